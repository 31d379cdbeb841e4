"""Exactness checks of potential-based shaping, shared by the shaping tests."""

from __future__ import annotations

import pytest
import torch

from rewardlab import envs
from rewardlab.shaping import BatchedPotentialShaping
from rewardlab.shaping.core import Potential


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
