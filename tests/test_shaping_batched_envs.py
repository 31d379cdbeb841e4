"""BatchedPotentialShaping on rewardlab's own batched torch envs: exact on tensors."""

from __future__ import annotations

import pytest
import torch

import envs
from shaping import BatchedPotentialShaping, potentials
from shaping.core import Potential

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


def assert_episode_shaping_telescopes(
    env: envs.core.BatchedEnv, potential: Potential, steps: int, gamma: float = 0.95
) -> dict[str, int]:
    """Run ``env`` shaped with ``potential`` on uniform random actions for ``steps`` steps.

    Checks that each episode's discounted shaping sums to ``-phi(s0)`` when it terminated and
    to ``gamma^T phi(s_T) - phi(s0)`` when it was truncated, and returns how many episodes
    ended each way.
    """
    num_envs = env.num_envs
    env = BatchedPotentialShaping(env, potential, gamma=gamma)
    obs, _ = env.reset(seed=0)
    start_phi = potential(obs).double()
    discounted = torch.zeros(num_envs, dtype=torch.float64)
    length = torch.zeros(num_envs, dtype=torch.int64)
    seen = {"terminated": 0, "truncated": 0}
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        if isinstance(env.single_action_space, envs.core.spaces.Discrete):
            actions = torch.randint(0, int(env.single_action_space.n), (num_envs,), generator=generator)
        else:
            low = torch.as_tensor(env.single_action_space.low)
            high = torch.as_tensor(env.single_action_space.high)
            actions = low + (high - low) * torch.rand((num_envs, *low.shape), generator=generator)
        obs, reward, terminated, truncated, info = env.step(actions)
        shaping = info["reward_components"]["shaping"]
        assert shaping.shape == (num_envs,) and shaping.device == obs.device
        torch.testing.assert_close(reward, info["reward_components"]["extrinsic"] + shaping)
        discounted += gamma ** length.double() * shaping.double()
        length += 1
        for i in torch.nonzero(terminated | truncated).flatten().tolist():
            if terminated[i]:
                expected = -start_phi[i]
                seen["terminated"] += 1
            else:
                final_phi = potential(info["final_obs"][i : i + 1])[0].double()
                expected = gamma ** length[i].double() * final_phi - start_phi[i]
                seen["truncated"] += 1
            # The shaping term is returned in the reward's float32.
            assert float(discounted[i]) == pytest.approx(float(expected), abs=2e-4 * length[i].item())
            discounted[i], length[i] = 0.0, 0
            start_phi[i] = potential(obs[i : i + 1])[0].double()
    return seen


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
