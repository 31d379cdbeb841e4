"""BatchedPotentialShaping on rewardlab's own batched torch envs: exact on tensors."""

from __future__ import annotations

import pytest
import torch
from shaping_checks import assert_episode_shaping_telescopes

from rewardlab import envs
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
