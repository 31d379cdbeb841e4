"""Potentials, argument checks, invariance and SB3 composition of the shaping API."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from rewardlab.shaping import (
    PotentialShaping,
    PotentialShapingVector,
    VecPotentialShaping,
    potentials,
)
from rewardlab.shaping.invariance import check_bonus, check_potential, value_iteration

OBS_SAMPLES = {
    "MountainCar-v0": np.array([[-0.5, 0.0], [0.5, 0.0], [-1.2, 0.07]]),
    "MountainCarContinuous-v0": np.array([[-0.5, 0.0], [0.5, 0.0]]),
    "CartPole-v1": np.array([[0.0, 0.0, 0.0, 0.0], [2.4, 1.0, 0.2095, -1.0]]),
    "Acrobot-v1": np.array([[1.0, 0.0, 1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 1.0, 0.0, 1.0, -1.0]]),
    "Pendulum-v1": np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 2.0]]),
}


@pytest.mark.parametrize("env_id", sorted(OBS_SAMPLES))
def test_built_in_potentials_agree_on_numpy_and_torch(env_id):
    phi = potentials.for_env(env_id)
    obs = OBS_SAMPLES[env_id]
    values = phi(obs)
    assert isinstance(values, np.ndarray) and values.shape == (len(obs),)
    torch_values = phi(torch.tensor(obs, dtype=torch.float32))
    assert isinstance(torch_values, torch.Tensor) and torch_values.shape == (len(obs),)
    np.testing.assert_allclose(torch_values.numpy(), values, rtol=1e-5, atol=1e-5)
    assert potentials.available()[env_id]


def test_potential_values_mean_what_they_say():
    car = potentials.for_env("MountainCar-v0", weight=10.0)
    valley, goal = car(np.array([[-np.pi / 6, 0.0], [0.5, 0.0]]))
    assert valley == pytest.approx(-10.0) and goal == pytest.approx(0.0, abs=1e-12)
    acrobot = potentials.for_env("Acrobot-v1", weight=3.0)
    down, line = acrobot(np.array([[1.0, 0.0, 1.0, 0.0, 0, 0], [-1.0, 0.0, 0.0, 1.0, 0, 0]]))
    assert down == pytest.approx(-3.0) and line == pytest.approx(0.0)
    pendulum = potentials.for_env("Pendulum-v1", weight=5.0)
    up, hanging = pendulum(np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]))
    assert up == pytest.approx(0.0) and hanging == pytest.approx(-5.0)


def test_minigrid_goal_distance_on_a_full_grid():
    grid = np.zeros((2, 5, 5, 3), dtype=np.uint8)
    grid[:, :, :, 0] = 1
    grid[0, 1, 1, 0], grid[0, 3, 4, 0] = 10, 8  # agent (1, 1), goal (3, 4): distance 5
    grid[1, 3, 4, 0] = 10  # agent on the goal hides it: distance 0
    phi = potentials.for_env("MiniGrid-Empty-5x5-v0", weight=1.0)
    np.testing.assert_allclose(phi(grid), [-5 / 10, 0.0])
    np.testing.assert_allclose(phi(torch.tensor(grid)).numpy(), [-5 / 10, 0.0])


def test_a_users_module_minigrid_id_gets_the_minigrid_potential():
    """``module:MiniGrid-*`` names a MiniGrid task as ``MiniGrid-*`` does (gym.make's form)."""
    assert isinstance(potentials.for_env("my_tasks:MiniGrid-Lava-v0"), potentials.MiniGridGoalDistance)
    with pytest.raises(ValueError, match="no built-in potential"):
        potentials.for_env("my_tasks:Corridor-v0")


def test_unknown_env_lists_the_known_ones():
    with pytest.raises(ValueError, match="CartPole-v1"):
        potentials.for_env("NoSuchEnv-v0")


def test_value_potential_from_a_torch_critic():
    critic = torch.nn.Linear(2, 1)
    phi = potentials.ValuePotential(critic, weight=2.0)
    obs = np.array([[0.1, 0.2], [0.3, -0.4]])
    expected = 2.0 * critic(torch.tensor(obs, dtype=torch.float32)).detach().numpy()[:, 0]
    np.testing.assert_allclose(phi(obs), expected, rtol=1e-6)
    assert phi(torch.tensor(obs, dtype=torch.float32)).shape == (2,)


def test_value_potential_from_an_sb3_model():
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, seed=0)
    phi = potentials.ValuePotential(model)
    obs = np.zeros((3, 4), dtype=np.float32)
    assert phi(obs).shape == (3,)


def test_scheduled_potential_anneals_and_stays_exact():
    schedule = potentials.linear_schedule(1.0, 0.0, steps=10)
    assert schedule(0) == 1.0 and schedule(5) == 0.5 and schedule(20) == 0.0
    phi = potentials.ScheduledPotential(lambda obs: obs[:, 0], schedule)
    env = PotentialShaping(gym.make("MountainCar-v0"), phi, gamma=0.9)
    env.reset(seed=0)
    for _ in range(12):
        *_, info = env.step(2)
    assert info["reward_components"]["shaping"] == 0.0


def test_invariance_holds_for_potentials_and_catches_other_bonuses():
    rng = np.random.default_rng(0)
    states, actions = 6, 3
    P = rng.dirichlet(np.ones(states), size=(states, actions))
    R = rng.normal(size=(states, actions))
    for _ in range(5):
        report = check_potential(P, R, 0.9, phi=rng.normal(scale=10, size=states))
        assert report.policies_agree
        assert report.q_shift_error < 1e-6
    q = value_iteration(P, R, 0.9)
    greedy = q.argmax(1)
    bonus = np.zeros((states, actions))
    bonus[0, (greedy[0] + 1) % actions] = 100.0  # +100 for one non-optimal action
    report = check_bonus(P, R, 0.9, bonus)
    assert not report.policies_agree and 0 in report.differing_states


def test_invariance_with_terminal_states():
    # chain 0 -> 1 -> 2 (terminal); action 0 moves right, action 1 stays
    P = np.zeros((3, 2, 3))
    P[0, 0, 1] = P[1, 0, 2] = P[2, :, 2] = 1
    P[0, 1, 0] = P[1, 1, 1] = 1
    R = np.array([[-1.0, -1.0], [-1.0, -1.0], [0.0, 0.0]])
    terminal = np.array([False, False, True])
    report = check_potential(P, R, 1.0, phi=np.array([-50.0, 80.0, 7.0]), terminal=terminal)
    assert report.policies_agree and report.q_shift_error < 1e-9


@pytest.mark.parametrize("gamma", [0.0, -0.1, 1.5, float("nan"), "0.9"])
def test_gamma_out_of_range_is_rejected(gamma):
    with pytest.raises(ValueError, match="gamma"):
        PotentialShaping(gym.make("CartPole-v1"), potentials.for_env("CartPole-v1"), gamma=gamma)


@pytest.mark.parametrize(
    "potential, message",
    [
        (lambda obs: obs[:, :2], "shape"),
        (lambda obs: np.full(len(obs), np.nan), "NaN"),
        (lambda obs: np.full(len(obs), np.inf), "NaN or inf"),
        (lambda obs: obs[:, 7], "could not take"),
        (lambda obs: torch.zeros(len(obs)), "torch tensor for a numpy batch"),
    ],
)
def test_bad_potentials_are_reported(potential, message):
    env = PotentialShaping(gym.make("CartPole-v1"), potential)
    with pytest.raises(ValueError, match=message):
        env.reset(seed=0)
        env.step(0)


def test_a_potential_whose_error_spans_lines_is_told_on_one_line_with_the_batch_kind():
    """torch's errors list every signature on lines of their own; the first line says it."""
    env = PotentialShaping(gym.make("CartPole-v1"), lambda obs: torch.linalg.norm(obs, dim=-1))
    with pytest.raises(ValueError) as caught:
        env.reset(seed=0)
    message = str(caught.value)
    assert "\n" not in message, message
    assert "linalg_norm() received an invalid combination of arguments" in message
    assert "a numpy array under Gymnasium and SB3, a torch tensor under rewardlab's" in message


def test_a_potential_that_fails_on_a_tuple_batch_is_told_its_parts():
    env = gym.wrappers.TransformObservation(
        gym.make("CartPole-v1"), lambda obs: (obs, 1),
        gym.spaces.Tuple((gym.make("CartPole-v1").observation_space, gym.spaces.Discrete(2))),
    )  # fmt: skip
    shaped = PotentialShaping(env, lambda obs: obs[:, 0])
    with pytest.raises(ValueError, match=r"batch \(of shape \(1, 4\) and dtype float32, of shape \(1,\) and dtype int64\)"):
        shaped.reset(seed=0)


def test_bad_names_and_potentials_are_rejected():
    with pytest.raises(ValueError, match="name"):
        PotentialShaping(gym.make("CartPole-v1"), potentials.for_env("CartPole-v1"), name="extrinsic")
    with pytest.raises(ValueError, match="not callable"):
        PotentialShaping(gym.make("CartPole-v1"), 3.0)
    with pytest.raises(ValueError, match="already reported"):
        inner = PotentialShaping(gym.make("CartPole-v1"), potentials.for_env("CartPole-v1"))
        outer = PotentialShaping(inner, potentials.for_env("CartPole-v1"))
        outer.reset(seed=0)
        outer.step(0)


def test_two_shaping_wrappers_stack_with_their_own_names():
    env = gym.make("MountainCar-v0")
    env = PotentialShaping(env, potentials.for_env("MountainCar-v0"), name="energy")
    env = PotentialShaping(env, lambda obs: obs[:, 0], name="position")
    env.reset(seed=0)
    _, reward, *_, info = env.step(2)
    components = info["reward_components"]
    assert set(components) == {"extrinsic", "energy", "position"}
    assert reward == pytest.approx(sum(components.values()))


def test_composes_with_gymnasium_reward_wrappers():
    env = gym.make("MountainCar-v0")
    env = PotentialShaping(env, potentials.for_env("MountainCar-v0"))
    env = gym.wrappers.TransformReward(env, lambda r: 2.0 * r)
    env.reset(seed=0)
    _, reward, *_, info = env.step(2)
    assert reward == pytest.approx(2 * sum(info["reward_components"].values()))


def test_vector_wrapper_disabled_autoreset_with_reset_mask():
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    vector = SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(2)], autoreset_mode=AutoresetMode.DISABLED
    )
    env = PotentialShapingVector(vector, potentials.for_env("CartPole-v1"), gamma=0.9)
    obs, _ = env.reset(seed=0)
    phi = potentials.for_env("CartPole-v1")
    obs2, _, _, _, info = env.step(np.array([0, 1]))
    np.testing.assert_allclose(info["reward_components"]["shaping"], 0.9 * phi(obs2) - phi(obs), rtol=1e-5)
    obs3, _ = env.reset(options={"reset_mask": np.array([True, False])})
    np.testing.assert_allclose(env.tracker.phi, phi(obs3), rtol=1e-6)


class TrueReturnProbe(BaseCallback):
    """Records, after each rollout, what SB3 logs as ep_rew_mean and the episodes behind it."""

    def __init__(self):
        super().__init__()
        self.episodes: list[dict] = []
        self.shaped_rewards: list[float] = []

    def _on_step(self) -> bool:
        self.shaped_rewards.extend(self.locals["rewards"].tolist())
        return True

    def _on_rollout_end(self) -> None:
        self.episodes.extend(self.model.ep_info_buffer)


def test_sb3_ppo_logs_the_true_return_through_shaping():
    venv = make_vec_env("CartPole-v1", n_envs=4, seed=0)  # Monitor innermost
    venv = VecNormalize(VecPotentialShaping(venv, lambda obs: 10 * obs[:, 0] + 5, gamma=0.99))
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=128, n_epochs=1, seed=0)
    probe = TrueReturnProbe()
    model.learn(2048, callback=probe)
    assert probe.episodes, "episodes must have finished"
    # CartPole pays 1 per step: the true return equals the length, whatever the shaping.
    for episode in probe.episodes:
        assert episode["r"] == pytest.approx(episode["l"])
    assert not np.allclose(probe.shaped_rewards, 1.0), "the learner must see the shaped reward"
