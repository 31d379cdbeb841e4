"""Intrinsic rewards in SB3: GAE over the combined reward (on-policy), the replay buffer (off-policy)."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from stable_baselines3 import DQN, PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecEnvWrapper

from rewardlab import intrinsic
from rewardlab.agents.sb3 import RewardComponentCallback
from rewardlab.agents.sb3_intrinsic import (
    IntrinsicRewardCallback,
    IntrinsicRewardVecEnv,
)

GAMMA, LAMBDA, COEF = 0.9, 0.8, 0.5


# small networks run fastest on one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


def frozen_lake(n_envs: int):
    """Discrete states, episodes that terminate (holes, goal) and truncate (5 steps)."""
    return make_vec_env(
        "FrozenLake-v1",
        n_envs=n_envs,
        seed=0,
        env_kwargs={"is_slippery": False, "max_episode_steps": 5},
    )


class Recorder(BaseCallback):
    """Records what SB3 saw, independently of the intrinsic callback."""

    def __init__(self) -> None:
        super().__init__()
        self.next_obs: list[np.ndarray] = []
        self.rollouts: list[dict[str, np.ndarray]] = []

    def _on_step(self) -> bool:
        new_obs, dones, infos = self.locals["new_obs"], self.locals["dones"], self.locals["infos"]
        self.next_obs.append(
            np.array(
                [
                    info["terminal_observation"] if d else o
                    for o, d, info in zip(new_obs, dones, infos, strict=True)
                ]
            )
        )
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        self.rollouts.append(
            {
                "rewards": buffer.rewards.copy(),
                "values": buffer.values.copy(),
                "episode_starts": buffer.episode_starts.copy(),
                "last_values": self.locals["values"].cpu().numpy().flatten(),
                "last_dones": np.asarray(self.locals["dones"], dtype=float),
                "returns": buffer.returns.copy(),
                "advantages": buffer.advantages.copy(),
            }
        )


def gae(rewards, values, episode_starts, last_values, last_dones):
    advantages = np.zeros_like(rewards)
    last = np.zeros(rewards.shape[1])
    for t in reversed(range(len(rewards))):
        if t == len(rewards) - 1:
            not_done, next_values = 1.0 - last_dones, last_values
        else:
            not_done, next_values = 1.0 - episode_starts[t + 1], values[t + 1]
        delta = rewards[t] + GAMMA * next_values * not_done - values[t]
        last = delta + GAMMA * LAMBDA * not_done * last
        advantages[t] = last
    return advantages, advantages + values


def sequential_count_bonus(states: np.ndarray) -> np.ndarray:
    """COEF / sqrt(n) with n the running visit count of each state, in time-major order."""
    seen: dict[int, int] = {}
    bonus = []
    for s in states.flatten().tolist():
        seen[s] = seen.get(s, 0) + 1
        bonus.append(COEF / math.sqrt(seen[s]))
    return np.array(bonus).reshape(states.shape)


def test_on_policy_returns_are_gae_over_extrinsic_plus_intrinsic_rewards():
    venv = frozen_lake(n_envs=2)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        gamma=GAMMA,
        gae_lambda=LAMBDA,
        seed=0,
    )
    count = intrinsic.Count(venv.observation_space)
    before, after = Recorder(), Recorder()
    bonus_callback = IntrinsicRewardCallback(count, coef=COEF)
    model.learn(128, callback=CallbackList([before, bonus_callback, after]))

    expected_bonus = sequential_count_bonus(np.stack(before.next_obs))  # (steps, envs)
    assert expected_bonus.shape == (128 // 2, 2)
    ended = np.stack([r["episode_starts"] for r in before.rollouts[1:]])
    assert ended.sum() > 4  # the rollouts do cross episode ends
    for k, (raw, final) in enumerate(zip(before.rollouts, after.rollouts, strict=True)):
        bonus = expected_bonus[32 * k : 32 * (k + 1)]
        assert np.allclose(final["rewards"], raw["rewards"] + bonus, atol=1e-6)
        advantages, returns = gae(
            raw["rewards"] + bonus,
            raw["values"],
            raw["episode_starts"],
            raw["last_values"],
            raw["last_dones"],
        )
        assert np.allclose(final["advantages"], advantages, atol=1e-5)
        assert np.allclose(final["returns"], returns, atol=1e-5)
    assert np.allclose(bonus_callback.intrinsic_rewards, expected_bonus[-32:], atol=1e-6)


def test_on_policy_logs_the_mean_intrinsic_reward(tmp_path):
    venv = frozen_lake(n_envs=2)
    model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=0)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    hybrid = intrinsic.make(
        "count,rnd", venv.observation_space, venv.action_space, fusion="sum", seed=0
    )
    callback = IntrinsicRewardCallback(hybrid, coef=COEF)
    model.learn(64, callback=callback)
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert float(rows[-1]["reward/intrinsic/hybrid"]) == pytest.approx(
        callback.intrinsic_rewards.mean(), rel=1e-5
    )
    assert "reward/intrinsic/hybrid/rnd" in rows[-1]


def per_episode_visits(next_states: np.ndarray, dones: np.ndarray) -> np.ndarray:
    """Visits of each (step, env) next state within its env's episode, by hand."""
    visits = np.zeros(next_states.shape, dtype=int)
    episodes: list[dict] = [{} for _ in range(next_states.shape[1])]
    for t in range(next_states.shape[0]):
        for e, episode in enumerate(episodes):
            state = int(next_states[t, e])
            episode[state] = episode.get(state, 0) + 1
            visits[t, e] = episode[state]
            if dones[t, e]:
                episode.clear()
    return visits


def test_on_policy_rollouts_bring_episode_ends_to_an_episodic_count():
    venv = frozen_lake(n_envs=2)
    model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=0)
    count = intrinsic.EpisodicCount(venv.observation_space)
    recorder = Recorder()
    dones: list[np.ndarray] = []

    class Dones(BaseCallback):
        def _on_step(self) -> bool:
            dones.append(np.asarray(self.locals["dones"], dtype=bool))
            return True

    callback = IntrinsicRewardCallback(count, coef=1.0)
    model.learn(16 * 2, callback=CallbackList([recorder, Dones(), callback]))
    next_states, ended = np.array(recorder.next_obs), np.array(dones)
    assert ended.any() and not ended.all()
    expected = per_episode_visits(next_states, ended)
    assert np.allclose(callback.intrinsic_rewards, 1 / np.sqrt(expected), atol=1e-6)


def test_off_policy_wrapper_brings_episode_ends_to_an_episodic_count():
    venv = frozen_lake(n_envs=2)
    count = intrinsic.EpisodicCount(venv.observation_space, bonus="first_visit")
    wrapped = IntrinsicRewardVecEnv(venv, count, coef=1.0, update_every=8)
    wrapped.reset()
    rng = np.random.default_rng(0)
    next_states, ended, bonuses = [], [], []
    for _ in range(40):
        obs, _, dones, infos = wrapped.step(rng.integers(0, 4, size=2))
        next_states.append([info["terminal_observation"] if d else o
                            for o, d, info in zip(obs, dones, infos, strict=True)])  # fmt: skip
        ended.append(dones)
        bonuses.append([info["reward_components"]["intrinsic/episodic"] for info in infos])
    visits = per_episode_visits(np.array(next_states), np.array(ended))
    assert np.array(ended).sum() > 4
    assert np.allclose(bonuses, (visits == 1).astype(float))


def test_the_callback_refuses_off_policy_algorithms():
    venv = frozen_lake(n_envs=1)
    model = DQN("MlpPolicy", venv, learning_starts=10, seed=0)
    with pytest.raises(TypeError, match="IntrinsicRewardVecEnv"):
        model.learn(20, callback=IntrinsicRewardCallback(intrinsic.Count(venv.observation_space)))


def test_off_policy_replay_buffer_stores_extrinsic_plus_intrinsic_rewards():
    venv = frozen_lake(n_envs=2)
    count = intrinsic.Count(venv.observation_space)
    wrapped = IntrinsicRewardVecEnv(venv, count, coef=COEF, update_every=8)
    model = DQN("MlpPolicy", wrapped, learning_starts=1000, buffer_size=1000, seed=0)
    components = []

    class Components(BaseCallback):
        def _on_step(self) -> bool:
            components.append([dict(info["reward_components"]) for info in self.locals["infos"]])
            return True

    model.learn(100, callback=Components())
    buffer = model.replay_buffer
    steps = buffer.pos
    extrinsic = np.array([[c["extrinsic"] for c in step] for step in components])
    bonus = np.array([[c["intrinsic/count"] for c in step] for step in components])
    assert np.allclose(buffer.rewards[:steps], extrinsic + bonus, atol=1e-6)
    # The bonus counts the stored next observation (the terminal one at episode ends).
    next_states = buffer.next_observations[:steps].reshape(steps, 2)
    assert np.allclose(bonus, sequential_count_bonus(next_states.astype(int)), atol=1e-6)
    assert buffer.dones[:steps].sum() > 4


def test_off_policy_continuous_control_with_rnd_and_component_logging(tmp_path):
    venv = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    rnd = intrinsic.RND(venv.observation_space, seed=0)
    model = SAC(
        "MlpPolicy",
        IntrinsicRewardVecEnv(venv, rnd, coef=0.1, update_every=16),
        learning_starts=32,
        seed=0,
    )
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(64, callback=RewardComponentCallback(), log_interval=None)
    model.logger.dump(model.num_timesteps)
    with open(tmp_path / "progress.csv") as f:
        row = list(csv.DictReader(f))[-1]
    assert float(row["reward/intrinsic/rnd"]) > 0
    assert "reward/extrinsic" in row
    assert math.isfinite(rnd.last_loss)


def test_the_wrapper_needs_reset_and_terminal_observations():
    class DropTerminal(VecEnvWrapper):
        def reset(self):
            return self.venv.reset()

        def step_wait(self):
            obs, rewards, dones, infos = self.venv.step_wait()
            return obs, rewards, dones, [{} for _ in infos]

    venv = frozen_lake(n_envs=1)
    wrapped = IntrinsicRewardVecEnv(DropTerminal(venv), intrinsic.Count(venv.observation_space))
    with pytest.raises(RuntimeError, match="before reset"):
        wrapped.step(np.array([0]))
    wrapped.reset()
    with pytest.raises(ValueError, match="terminal_observation"):
        for _ in range(5):  # the time limit ends the episode at step 5
            wrapped.step(np.array([0]))
