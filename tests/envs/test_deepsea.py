"""DeepSea: bsuite's dynamics, rewards, episode ends and seeding, batched."""

from __future__ import annotations

import pytest
import torch
from gymnasium.vector import AutoresetMode

import rewardlab.envs.deepsea  # noqa: F401  (registers DeepSea-v0)
from rewardlab import envs
from rewardlab.intrinsic import Count


def run_episode(env, policy) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Run one episode in every copy with ``policy(env) -> actions``; return returns and steps."""
    total = torch.zeros(env.num_envs)
    steps = []
    for _ in range(env.size):
        obs, reward, terminated, truncated, info = env.step(policy(env))
        total += reward
        steps.append((obs, terminated, truncated, info))
    return total, steps


@pytest.mark.parametrize("size", [1, 4, 10])
def test_the_optimal_policy_gets_one_minus_the_move_cost(size):
    env = envs.make("DeepSea-v0", num_envs=3, size=size, seed=0)
    first, _ = env.reset()
    assert torch.equal(first.argmax(1), torch.zeros(3, dtype=torch.long))
    total, steps = run_episode(env, lambda e: e.right_actions())
    assert total.tolist() == pytest.approx([0.99] * 3, abs=1e-5)
    *middle, (obs, terminated, truncated, info) = steps
    assert not any(bool(t.any()) for _, t, _, _ in middle)
    assert terminated.all() and not truncated.any()
    assert info["final_obs"].argmax(1).tolist() == [size * size - 1] * 3
    assert obs.argmax(1).tolist() == [0] * 3  # same-step autoreset
    assert torch.equal(
        info["reward_components"]["extrinsic"], steps[-1][3]["reward_components"]["extrinsic"]
    )


def test_going_left_costs_nothing_and_finds_nothing():
    env = envs.make("DeepSea-v0", num_envs=2, size=6, seed=1)
    env.reset()
    total, steps = run_episode(env, lambda e: 1 - e.right_actions())
    assert total.tolist() == [0.0, 0.0]
    # Every step down the left wall: the last observation is the bottom-left cell.
    assert steps[-1][3]["final_obs"].argmax(1).tolist() == [30, 30]


def test_random_actions_rarely_find_the_treasure():
    size, num_envs = 8, 4096
    env = envs.make("DeepSea-v0", num_envs=num_envs, size=size, seed=2)
    env.reset()
    generator = torch.Generator().manual_seed(0)
    total, _ = run_episode(env, lambda e: torch.randint(0, 2, (num_envs,), generator=generator))
    found = int((total > 0.5).sum())
    assert 0 < found < 40  # binomial(4096, 2**-8): mean 16, sd 4
    assert float(total.max()) == pytest.approx(0.99, abs=1e-5)


def test_the_action_mapping_is_fixed_by_the_seed():
    def mapping(**kwargs):
        return envs.make("DeepSea-v0", num_envs=1, size=12, **kwargs).action_mapping

    assert torch.equal(mapping(seed=3), mapping(seed=3))
    assert not torch.equal(mapping(seed=3), mapping(seed=4))
    assert torch.equal(mapping(seed=4, mapping_seed=3), mapping(seed=3))
    assert bool(mapping(seed=None, randomize_actions=False).eq(1).all())
    env = envs.make("DeepSea-v0", num_envs=1, size=12, seed=3)
    before = env.action_mapping.clone()
    env.reset(seed=99)
    assert torch.equal(env.action_mapping, before)


def test_follows_the_batched_env_contract():
    env = envs.make("DeepSea-v0", num_envs=5, size=4, seed=0)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.spec_id == "DeepSea-v0"
    assert env.single_observation_space.shape == (16,)
    obs, _ = env.reset()
    obs, reward, terminated, truncated, info = env.step(torch.zeros(5, dtype=torch.long))
    assert obs.dtype == torch.float32 and reward.dtype == torch.float32
    assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
    assert obs.sum(1).tolist() == [1.0] * 5
    assert env.render(0).shape == (32, 32, 3)


def test_size_is_checked():
    with pytest.raises(ValueError, match="size"):
        envs.make("DeepSea-v0", num_envs=1, size=0)
    with pytest.raises(ValueError, match="max_episode_steps"):
        envs.make("DeepSea-v0", num_envs=1, size=3, max_episode_steps=10)


def test_count_reads_deepsea_observations_exactly():
    env = envs.make("DeepSea-v0", num_envs=1, size=5, seed=0)
    count = Count(env.single_observation_space)
    assert count.mode == "exact"
    obs, _ = env.reset()
    next_obs, *_ = env.step(env.right_actions())
    assert count.compute(obs, torch.zeros(1), next_obs).item() == 1.0
