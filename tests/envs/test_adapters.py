"""The Gymnasium and SB3 views of batched envs: what their tools expect, and SB3 PPO learning."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import NormalizeReward, RecordEpisodeStatistics
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.utils import check_for_correct_spaces
from stable_baselines3.common.vec_env import VecCheckNan, VecEnv, VecMonitor, VecNormalize

from rewardlab import envs
from rewardlab.envs.adapters import GymnasiumVectorEnv, SB3VecEnv

CLASSIC_IDS = [
    "CartPole-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Acrobot-v1",
    "Pendulum-v1",
]


def check_vector_step(vec: gymnasium.vector.VectorEnv, step: tuple) -> None:
    """What Gymnasium's env checker asks of one env's step, asked of every env of a batch."""
    obs, reward, terminated, truncated, info = step
    assert isinstance(obs, np.ndarray) and obs.dtype == vec.single_observation_space.dtype
    assert obs in vec.observation_space
    assert all(row in vec.single_observation_space for row in obs)
    assert reward.shape == (vec.num_envs,) and np.issubdtype(reward.dtype, np.floating)
    assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
    assert np.isfinite(obs).all() and np.isfinite(reward).all()
    assert info["reward_components"]["extrinsic"].shape == (vec.num_envs,)


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_gymnasium_view_passes_vector_env_checks(env_id: str) -> None:
    vec = GymnasiumVectorEnv(envs.make(env_id, 16, seed=0, max_episode_steps=20))
    assert isinstance(vec, gymnasium.vector.VectorEnv)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    reference = gymnasium.make_vec(env_id, 16, vectorization_mode="sync")
    assert vec.single_observation_space == reference.single_observation_space
    assert vec.action_space == reference.action_space
    assert vec.observation_space == reference.observation_space

    obs, info = vec.reset(seed=0)
    assert obs in vec.observation_space and isinstance(info, dict)
    vec.action_space.seed(0)
    ended = 0
    for _ in range(25):
        step = vec.step(vec.action_space.sample())
        check_vector_step(vec, step)
        _, _, terminated, truncated, info = step
        done = terminated | truncated
        if done.any():
            ended += int(done.sum())
            assert np.array_equal(info["_final_obs"], done)
            assert np.array_equal(info["_final_info"], done)
            for index in range(vec.num_envs):
                final = info["final_obs"][index]
                assert (final is None) != bool(done[index])
                assert final is None or final in vec.single_observation_space
    assert ended >= 16
    vec.close()


def test_gymnasium_view_is_deterministic_given_a_seed() -> None:
    def rollout() -> list:
        vec = GymnasiumVectorEnv(envs.make("Acrobot-v1", 4, max_episode_steps=10))
        steps = [vec.reset(seed=42)[0]]
        actions = np.random.default_rng(0).integers(0, 3, (30, 4))
        steps += [vec.step(action)[:4] for action in actions]
        return steps

    assert data_equivalence(rollout(), rollout(), exact=True)


def test_gymnasium_vector_wrappers_run_on_the_view() -> None:
    """Gymnasium's wrappers that support same-step autoreset (its observation wrappers
    accept only next-step autoreset and refuse any same-step vector env)."""
    vec = RecordEpisodeStatistics(
        NormalizeReward(GymnasiumVectorEnv(envs.make("CartPole-v1", 8, seed=0)))
    )
    vec.reset(seed=0)
    lengths = np.zeros(8, dtype=int)
    checked = 0
    for _ in range(60):
        _, _, terminated, truncated, info = vec.step(vec.action_space.sample())
        lengths += 1
        done = terminated | truncated
        if done.any():
            assert np.array_equal(info["_episode"], done)
            assert np.array_equal(info["episode"]["l"][done], lengths[done])
            checked += int(done.sum())
            lengths[done] = 0
    assert checked >= 8


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_sb3_view_reports_terminal_observations(env_id: str) -> None:
    env = envs.make(env_id, 8, seed=0, max_episode_steps=15)
    venv = VecCheckNan(VecMonitor(SB3VecEnv(env)), raise_exception=True)
    assert isinstance(venv.unwrapped, VecEnv)
    check_for_correct_spaces(venv, env.single_observation_space, env.single_action_space)
    obs = venv.reset()
    assert obs.shape == (8, *env.single_observation_space.shape)
    venv.action_space.seed(0)
    monitored = 0
    for _ in range(30):
        actions = np.stack([venv.action_space.sample() for _ in range(8)])
        obs, reward, dones, infos = venv.step(actions)
        assert obs.shape[0] == reward.shape[0] == dones.shape[0] == len(infos) == 8
        for done, info in zip(dones, infos, strict=True):
            assert set(info["reward_components"]) == {"extrinsic"}
            assert ("terminal_observation" in info) == done
            if done:
                assert info["terminal_observation"] in env.single_observation_space
                assert isinstance(info["TimeLimit.truncated"], bool)
                monitored += "episode" in info
    assert monitored >= 8


def test_sb3_view_truncation_flags_follow_sb3() -> None:
    venv = SB3VecEnv(envs.make("Pendulum-v1", 4, seed=0, max_episode_steps=3))
    venv.reset()
    for _ in range(3):
        _, _, dones, infos = venv.step(np.zeros((4, 1), dtype=np.float32))
    assert dones.all() and all(info["TimeLimit.truncated"] for info in infos)

    venv = SB3VecEnv(envs.make("CartPole-v1", 4, seed=0))
    venv.reset()
    for _ in range(50):
        _, _, dones, infos = venv.step(np.ones(4, dtype=np.int64))
        if dones.any():
            break
    assert all(not info["TimeLimit.truncated"] for info in np.array(infos)[dones])


def test_sb3_view_seeds_the_next_reset() -> None:
    venv = SB3VecEnv(envs.make("CartPole-v1", 4))
    venv.seed(5)
    first = venv.reset()
    venv.seed(5)
    assert np.array_equal(first, venv.reset())
    assert venv.get_attr("num_envs") == [4] * 4
    assert venv.env_is_wrapped(gymnasium.Wrapper) == [False] * 4
    assert venv.render().ndim == 3


def test_sb3_vec_normalize_runs_on_the_view() -> None:
    venv = VecNormalize(SB3VecEnv(envs.make("MountainCarContinuous-v0", 8, seed=0)))
    venv.reset()
    for _ in range(20):
        obs, reward, _, _ = venv.step(np.zeros((8, 1), dtype=np.float32))
    assert np.abs(obs).max() < 10 and np.isfinite(reward).all()


@pytest.fixture
def one_thread():
    """SB3's small networks run fastest on one thread; with two, a busy two-core machine
    spends most of the time waiting for the second one (15 s becomes minutes)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_sb3_ppo_learns_cartpole(one_thread: None) -> None:
    """About 15 s on two cores; a random policy averages ~22."""
    train = VecMonitor(SB3VecEnv(envs.make("CartPole-v1", 8, seed=0)))
    model = PPO(
        "MlpPolicy",
        train,
        n_steps=256,
        batch_size=256,
        n_epochs=10,
        learning_rate=1e-3,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [64, 64]},
    )
    model.learn(30_000)
    evaluation = VecMonitor(SB3VecEnv(envs.make("CartPole-v1", 8, seed=1)))
    mean_return, _ = evaluate_policy(model, evaluation, n_eval_episodes=16, deterministic=True)
    assert mean_return > 150
