"""BatchedPotentialShaping on rewardlab's own batched torch envs: exact on tensors."""

from __future__ import annotations

import pytest
import torch
from shaping_checks import assert_episode_shaping_telescopes

from rewardlab import envs
from rewardlab.envs.core import carried_steps
from rewardlab.shaping import BatchedPotentialShaping, potentials

# env id -> steps to run: past its time limit, so truncation is exercised too
CLASSIC = {
    "CartPole-v1": 520,
    "MountainCar-v0": 220,
    "MountainCarContinuous-v0": 1020,
    "Acrobot-v1": 520,
    "Pendulum-v1": 220,
}


def phi(obs: torch.Tensor) -> torch.Tensor:
    """A potential computed in float64, so the test measures the wrapper, not rounding."""
    obs = obs.double()
    return torch.sin(obs).sum(1) + 0.5 * (obs**2).sum(1)




@pytest.mark.parametrize("env_id", CLASSIC)
def test_episode_shaping_telescopes_on_batched_envs(env_id):
    seen = assert_episode_shaping_telescopes(envs.make(env_id, num_envs=4, seed=0), phi, CLASSIC[env_id])
    assert sum(seen.values()) > 0


def test_built_in_potentials_run_on_batched_envs():
    for env_id in CLASSIC:
        env = BatchedPotentialShaping(envs.make(env_id, num_envs=8, seed=1), potentials.for_env(env_id))
        env.reset(seed=1)
        for _ in range(5):
            *_, info = env.step(env.action_space.sample())
        assert torch.isfinite(info["reward_components"]["shaping"]).all()


def test_rejects_what_is_not_a_batched_env():
    import gymnasium as gym

    with pytest.raises(ValueError, match="not a batched env"):
        BatchedPotentialShaping(gym.make("CartPole-v1"), phi)


def test_a_dynamic_potential_is_given_the_transitions_seen_at_each_step():
    times = []

    def annealed(obs: torch.Tensor, t: int) -> torch.Tensor:
        times.append(t)
        return obs[:, 0] * (1.0 + t)

    env = BatchedPotentialShaping(envs.make("CartPole-v1", num_envs=4, seed=0), annealed, gamma=1.0)
    assert carried_steps(env) is not env  # a dynamic potential steps by step alone
    obs, _ = env.reset()
    phi = obs[:, 0].clone()
    for step in range(1, 4):
        obs, _, terminated, _, info = env.step(torch.zeros(4, dtype=torch.int64))
        last = torch.where(terminated, 0.0, info["final_obs"][:, 0] * (1.0 + 4 * step))
        torch.testing.assert_close(info["reward_components"]["shaping"], last - phi)
        phi = obs[:, 0] * (1.0 + 4 * step)
    # reset at t=0, then the observations and the last observations of each step at t=4k
    assert times == [0, 4, 4, 8, 8, 12, 12]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_potential_not_finite_at_a_step_is_reported_at_that_step(bad):
    def phi_bad_later(obs: torch.Tensor) -> torch.Tensor:
        return torch.where(obs[:, 0].abs() > 0.06, bad, 0.0)

    env = BatchedPotentialShaping(envs.make("CartPole-v1", num_envs=4, seed=0), phi_bad_later)
    env.reset(options={"low": -0.01, "high": 0.01})
    with pytest.raises(ValueError, match="NaN or inf"):
        for _ in range(100):
            env.step(torch.ones(4, dtype=torch.int64))


def test_a_name_an_inner_layer_reports_is_refused_at_the_step():
    env = envs.make("CartPole-v1", num_envs=4, seed=0)
    env = BatchedPotentialShaping(BatchedPotentialShaping(env, phi), phi)
    env.reset()
    with pytest.raises(ValueError, match=r"\['shaping'\] are already reported.*another name="):
        env.step(torch.zeros(4, dtype=torch.int64))
