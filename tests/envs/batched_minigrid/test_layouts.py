"""Cell codes, state rows and the layout pool of the batched MiniGrid against MiniGrid's own."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

pytest.importorskip("minigrid")

from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX  # noqa: E402
from minigrid.core.grid import Grid  # noqa: E402
from minigrid.core.world_object import Ball, Box, Door, Key, Lava, Wall  # noqa: E402

from rewardlab.envs.batched_minigrid import BatchedMiniGridEnv, layouts  # noqa: E402


def test_codes_use_minigrids_indices():
    names = ("unseen", "empty", "wall", "floor", "door", "key", "ball", "box", "goal", "lava")
    assert [OBJECT_TO_IDX[name] for name in names] == list(range(10))
    assert (layouts.UNSEEN, layouts.LAVA) == (0, 9)
    assert STATE_TO_IDX == {"open": layouts.OPEN, "closed": layouts.CLOSED, "locked": layouts.LOCKED}
    assert COLOR_TO_IDX["grey"] == layouts.GREY and max(COLOR_TO_IDX.values()) < 8
    assert layouts.cell_code(None) == layouts.NOTHING == layouts.EMPTY
    door = Door("blue", is_locked=True)
    assert layouts.cell_code(door) == 4 | 2 << 4 | 2 << 7
    assert layouts.cell_code(door, target=door) >> layouts.TARGET_SHIFT == 1
    # a state's byte stands for each full code, unseen first
    assert layouts.FULL_CODES[0] == 0 and len(layouts.FULL_CODES) <= 256
    assert (layouts.COMPACT_CODES[layouts.FULL_CODES] == np.arange(len(layouts.FULL_CODES))).all()
    assert layouts.FULL_CODES[layouts.compact_code(door, target=door)] == layouts.cell_code(door, door)


@pytest.mark.parametrize(
    "env_id", ["MiniGrid-ObstructedMaze-1Dlh-v0", "MiniGrid-KeyCorridorS3R2-v0", "MiniGrid-Unlock-v0"]
)
def test_a_state_row_writes_back_into_minigrid_unchanged(env_id):
    source = gymnasium.make(env_id).unwrapped
    source.reset(seed=5)
    # carry a box with a key in it, after a few steps, to cover the carried-contents row
    source.carrying = Box("red", contains=Key("yellow"))
    source.step_count = 17
    rule = layouts.success_rule(source)
    rows = layouts.Rows(source.width, source.height, boxes=True)
    row = layouts.encode_layout(source, rows, layouts.target_of(source, rule))
    target = gymnasium.make(env_id).unwrapped
    target.reset(seed=6)
    layouts.decode_layout(row, rows, target, step_count=17)
    assert np.array_equal(target.grid.encode(), source.grid.encode())
    assert tuple(target.agent_pos) == tuple(source.agent_pos) and target.agent_dir == source.agent_dir
    assert target.carrying.encode() == source.carrying.encode()
    assert target.carrying.contains.encode() == source.carrying.contains.encode()
    assert target.step_count == 17
    assert np.array_equal(target.gen_obs()["image"], source.gen_obs()["image"])
    # the flag follows the mission's object: re-encoding the written env flags the same cell
    again = layouts.encode_layout(target, rows, layouts.target_of(target, rule))
    assert np.array_equal(again, row)


def test_views_of_random_grids_match_gen_obs():
    """Occlusion over grids MiniGrid's generators do not make: walls, doors in every state,
    objects and lava strewn at random, the agent anywhere, carrying or not."""
    rng = np.random.default_rng(0)
    env_id = "MiniGrid-DoorKey-16x16-v0"
    source = gymnasium.make(env_id).unwrapped
    source.reset(seed=0)
    batched = BatchedMiniGridEnv(64, env_id=env_id, layouts=1, seed=0)
    batched.reset()
    colours = list(COLOR_TO_IDX)
    makers = [
        lambda: Wall(),
        lambda: Door(colours[rng.integers(6)], is_open=True),
        lambda: Door(colours[rng.integers(6)]),
        lambda: Door(colours[rng.integers(6)], is_locked=True),
        lambda: Key(colours[rng.integers(6)]),
        lambda: Ball(colours[rng.integers(6)]),
        lambda: Lava(),
    ]
    expected = []
    for index in range(batched.num_envs):
        grid = Grid(16, 16)
        density = rng.uniform(0.1, 0.6)
        for x in range(16):
            for y in range(16):
                if rng.random() < density:
                    grid.set(x, y, makers[rng.integers(len(makers))]())
        source.grid = grid
        source.agent_pos = (int(rng.integers(16)), int(rng.integers(16)))
        source.agent_dir = int(rng.integers(4))
        source.carrying = None if rng.random() < 0.5 else Key(colours[rng.integers(6)])
        batched.read_gymnasium_state(source, index)
        expected.append(source.gen_obs()["image"].reshape(-1))
    got = batched.observe(batched.state)
    np.testing.assert_array_equal(got.numpy(), np.stack(expected))


def test_reset_layouts_follow_minigrids_distribution():
    """Episodes start on layouts of MiniGrid's generator: over 1,000 starts, the position of
    DoorKey-8x8's wall, door, key and agent agrees with 1,000 fresh MiniGrid resets."""
    env_id = "MiniGrid-DoorKey-8x8-v0"

    def features(grid: np.ndarray, agent_x: int) -> tuple[float, ...]:
        kinds = grid[..., 0]
        door = np.argwhere(kinds == OBJECT_TO_IDX["door"])[0]
        key = np.argwhere(kinds == OBJECT_TO_IDX["key"])[0]
        return door[0], door[1], key[0], key[1], agent_x

    source = gymnasium.make(env_id).unwrapped
    theirs = []
    for seed in range(10_000, 11_000):
        source.reset(seed=seed)
        theirs.append(features(source.grid.encode(), source.agent_pos[0]))
    batched = BatchedMiniGridEnv(1000, env_id=env_id, layouts=1000, seed=1)
    batched.reset()
    ours = []
    for row in batched.state.numpy():
        layouts.decode_layout(row, batched.rows, source)
        ours.append(features(source.grid.encode(), source.agent_pos[0]))
    theirs, ours = np.array(theirs, dtype=float), np.array(ours, dtype=float)
    standard_error = np.sqrt(theirs.var(0) / len(theirs) + ours.var(0) / len(ours))
    assert (np.abs(theirs.mean(0) - ours.mean(0)) < 4 * standard_error).all()
    # and the pool's layouts are exactly MiniGrid's for their seeds
    for index in (0, 999):
        source.reset(seed=int(batched.layout_seeds[index]))
        target = layouts.target_of(source, batched.success)
        expected = layouts.encode_layout(source, batched.rows, target)
        assert torch.equal(batched._layouts[index], torch.as_tensor(expected))
