"""FruitCollection: placement, eating, reward components, episode ends, seeding, the batched
contract and the "+1" feature masks."""

from __future__ import annotations

import pytest
import torch
from gymnasium.vector import AutoresetMode

from rewardlab import envs
from rewardlab.envs.fruit import FRUIT_POSITIONS, FruitCollectionEnv

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3
CELLS = 100


def place(env: FruitCollectionEnv, row: int, column: int, fruits: list[int]) -> None:
    """Put every copy's agent on ``(row, column)`` with fruits at the positions ``fruits``."""
    present = torch.zeros(env.num_positions, env.num_envs)
    present[fruits] = 1.0
    agent = torch.tensor([[row], [column]], dtype=torch.float32).expand(2, env.num_envs)
    env._state = torch.cat((agent, present))


def step_all(env: FruitCollectionEnv, action: int) -> tuple:
    return env.step(torch.full((env.num_envs,), action, dtype=torch.int64))


def test_reset_places_five_fruits_and_the_agent_off_them() -> None:
    env = envs.make("FruitCollection-v0", num_envs=2_000, seed=0)
    obs, _ = env.reset()
    assert obs.shape == (2_000, 110) and obs.dtype == torch.float32
    bits = obs[:, CELLS:]
    assert bits.sum(dim=1).eq(5).all()
    assert obs[:, :CELLS].sum(dim=1).eq(1).all()
    cell = obs[:, :CELLS].argmax(dim=1)
    state = env.state
    assert torch.equal(cell, (state[:, 0] * 10 + state[:, 1]).long())
    assert torch.equal(bits, state[:, 2:])
    fruit_cells = torch.tensor([r * 10 + c for r, c in FRUIT_POSITIONS])
    on_a_fruit = (cell[:, None] == fruit_cells) & (bits > 0.5)
    assert not on_a_fruit.any()
    # Each position holds a fruit half the time; the agent starts anywhere.
    assert bits.mean(dim=0).sub(0.5).abs().max() < 0.05
    assert cell.unique().numel() > 90


def test_walking_onto_a_fruit_pays_one_exactly_once() -> None:
    env = envs.make("FruitCollection-v0", num_envs=3, seed=0)
    env.reset()
    place(env, 0, 0, fruits=[0, 4])  # fruit_0 at (0, 2), fruit_4 at (3, 9)
    obs, reward, terminated, truncated, info = step_all(env, RIGHT)
    assert reward.tolist() == [0.0] * 3
    obs, reward, terminated, truncated, info = step_all(env, RIGHT)  # onto (0, 2)
    assert reward.tolist() == [1.0] * 3
    components = info["reward_components"]
    assert components["fruit_0"].tolist() == [1.0] * 3
    assert all(components[f"fruit_{k}"].eq(0).all() for k in range(1, 10))
    assert torch.equal(components["extrinsic"], reward)
    assert obs[:, CELLS].tolist() == [0.0] * 3 and obs[:, CELLS + 4].tolist() == [1.0] * 3
    assert not (terminated | truncated).any()
    for action in (LEFT, RIGHT, UP, UP):  # back onto the empty cell, and into the border
        obs, reward, *_ = step_all(env, action)
        assert reward.tolist() == [0.0] * 3
    assert obs[:, 2].tolist() == [1.0] * 3  # still at (0, 2): the border held the agent


def test_the_last_fruit_terminates_and_the_next_episode_starts_at_once() -> None:
    env = envs.make("FruitCollection-v0", num_envs=2, seed=0)
    env.reset()
    place(env, 1, 9, fruits=[4])  # the only fruit, at (3, 9)
    step_all(env, DOWN)
    obs, reward, terminated, truncated, info = step_all(env, DOWN)
    assert reward.tolist() == [1.0, 1.0] and info["reward_components"]["fruit_4"].tolist() == [
        1.0,
        1.0,
    ]
    assert terminated.all() and not truncated.any()
    final = info["final_obs"]
    assert final[:, :CELLS].argmax(dim=1).tolist() == [39, 39]
    assert final[:, CELLS:].sum().item() == 0
    assert obs[:, CELLS:].sum(dim=1).tolist() == [5.0, 5.0]  # same-step autoreset


def test_truncated_after_300_steps() -> None:
    env = envs.make("FruitCollection-v0", num_envs=2, seed=0)
    env.reset()
    place(env, 0, 3, fruits=[0, 1, 2])  # column 3 holds no fruit position: UP stays put
    for t in range(1, 300):
        obs, reward, terminated, truncated, info = step_all(env, UP)
        assert not (terminated | truncated).any(), t
    obs, reward, terminated, truncated, info = step_all(env, UP)
    assert truncated.all() and not terminated.any()
    assert info["final_obs"][:, CELLS : CELLS + 3].sum().item() == 6  # the fruits were still there
    assert env.max_episode_steps == 300


def test_components_add_up_to_the_reward_on_random_play() -> None:
    env = envs.make("FruitCollection-v0", num_envs=64, seed=1)
    env.reset()
    generator = torch.Generator().manual_seed(0)
    eaten = 0.0
    for _ in range(300):
        actions = torch.randint(0, 4, (64,), generator=generator)
        _, reward, _, _, info = env.step(actions)
        parts = [info["reward_components"][f"fruit_{k}"] for k in range(10)]
        assert torch.equal(torch.stack(parts).sum(dim=0), reward)
        assert torch.equal(info["reward_components"]["extrinsic"], reward)
        eaten += float(reward.sum())
    assert eaten > 100


def test_same_seed_same_episodes() -> None:
    def play(seed: int) -> list[torch.Tensor]:
        env = envs.make("FruitCollection-v0", num_envs=8, seed=seed)
        obs, _ = env.reset()
        seen = [obs]
        for t in range(400):  # through truncations and resets
            obs, *_ = env.step(torch.full((8,), t % 4, dtype=torch.int64))
            seen.append(obs)
        return seen

    first, again, other = play(3), play(3), play(4)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])
    env = envs.make("FruitCollection-v0", num_envs=8, seed=0)
    assert torch.equal(env.reset(seed=3)[0], first[0])


def test_feature_masks_keep_the_position_and_one_bit() -> None:
    env = envs.make("FruitCollection-v0", num_envs=1, seed=0)
    masks = env.feature_masks()
    assert list(masks) == env.fruit_names == [f"fruit_{k}" for k in range(10)]
    for k, mask in enumerate(masks.values()):
        assert mask.shape == (110,) and mask[:CELLS].all() and mask.sum() == 101
        assert mask[CELLS + k]


def test_large_variant_and_contract() -> None:
    env = envs.make("FruitCollection-Large-v0", num_envs=16, seed=0)
    obs, _ = env.reset()
    assert env.spec_id == "FruitCollection-Large-v0"
    assert obs.shape == (16, 420) and obs[:, 400:].sum(dim=1).eq(10).all()
    assert env.max_episode_steps == 600
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert tuple(env.action_space.shape) == (16,)
    _, _, _, _, info = env.step(torch.zeros(16, dtype=torch.int64))
    assert sorted(info["reward_components"]) == sorted(["extrinsic", *env.fruit_names])
    assert env.render(3).shape == (160, 160, 3)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="num_fruits must be in"):
        FruitCollectionEnv(1, num_fruits=11)
    with pytest.raises(ValueError, match="outside the 10 x 10 grid"):
        FruitCollectionEnv(1, fruit_positions=[(0, 0), (10, 3)])
    with pytest.raises(ValueError, match="distinct"):
        FruitCollectionEnv(1, fruit_positions=[(0, 0), (0, 0)])
