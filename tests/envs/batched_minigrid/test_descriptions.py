"""MiniGrid's view described for reward programs: categorical cells, derived indicators, any
MiniGrid env."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

pytest.importorskip("minigrid")

from minigrid.core.grid import Grid  # noqa: E402
from minigrid.core.mission import MissionSpace  # noqa: E402
from minigrid.core.world_object import Door, Goal, Key  # noqa: E402
from minigrid.minigrid_env import MiniGridEnv  # noqa: E402

from rewardlab import envs  # noqa: E402
from rewardlab.envs.batched_minigrid.descriptions import (  # noqa: E402
    DOOR,
    GOAL,
    GOAL_UNSEEN,
    KEY,
    user_minigrid_description,
)

DERIVED = ("front_object", "front_colour", "front_state", "carrying_object", "has_key", "door_open",
           "goal_visible", "goal_distance")
WALL, BOX, EMPTY = 2, 7, 1


def _views(*cells: dict[tuple[int, int], tuple[int, int, int]]) -> torch.Tensor:
    """Flat views (N, 147), walls everywhere but the cells given; the agent carries nothing."""
    view = torch.zeros(len(cells), 7, 7, 3)
    view[..., 0] = WALL
    view[:, 3, 6] = torch.tensor([EMPTY, 0, 0])
    for row, given in enumerate(cells):
        for (x, y), triple in given.items():
            view[row, x, y] = torch.tensor(triple, dtype=torch.float32)
    return view.reshape(len(cells), 147)


def test_the_derived_variables_read_hand_built_views() -> None:
    description = envs.describe("MiniGrid-DoorKey-5x5-v0")
    obs = _views(
        {(3, 5): (KEY, 4, 0)},  # a yellow key in front, nothing carried
        {(3, 6): (KEY, 4, 0), (3, 5): (DOOR, 4, 2)},  # carrying it, facing the locked door
        {(3, 5): (DOOR, 4, 1)},  # a closed door in front
        {(1, 2): (DOOR, 2, 0), (3, 5): (BOX, 0, 0)},  # an open door aside, a box (state 0) in front
        {(5, 1): (GOAL, 1, 0), (3, 4): (GOAL, 1, 0)},  # two goals: the nearer is 2 steps ahead
        {(0, 0): (GOAL, 1, 0)},  # a goal in the far corner
    )
    got = {name: value.tolist() for name, value in description.state_tensors(obs, DERIVED).items()}
    assert got["front_object"] == [KEY, DOOR, DOOR, BOX, WALL, WALL]
    assert got["front_colour"] == [4, 4, 4, 0, 0, 0]
    assert got["front_state"] == [0, 3, 2, 0, 0, 0]  # locked 3, closed 2; a box is no door
    assert got["carrying_object"] == [EMPTY, KEY, EMPTY, EMPTY, EMPTY, EMPTY]
    assert got["has_key"] == [0, 1, 0, 0, 0, 0]
    assert got["door_open"] == [0, 0, 0, 1, 0, 0]
    assert got["goal_visible"] == [0, 0, 0, 0, 1, 1]
    assert got["goal_distance"] == [GOAL_UNSEEN] * 4 + [2, 9]


def test_the_cells_are_categories_and_the_mission_is_said_to_be_undescribed() -> None:
    description = envs.describe("MiniGrid-KeyCorridorS3R1-v0")
    kinds = {variable.name: variable.categories for variable in description.state}
    assert kinds["front_object"][KEY] == "key" and kinds["front_state"][3] == "locked"
    assert kinds["has_key"] == kinds["door_open"] == ("no", "yes")
    assert not kinds["goal_distance"] and not kinds["obs"]
    assert "mission text is not observed and not described" in description.summary
    prompt = description.to_prompt()
    assert "front_object: Tensor" in prompt and "compare with ==" in prompt


def _grid_env(env: gymnasium.Env) -> MiniGridEnv:
    return env.unwrapped  # type: ignore[return-value]


def test_the_variables_agree_with_minigrid_own_state_under_random_play() -> None:
    """has_key, front_state and door_open read from the view against MiniGrid's own grid."""
    from rewardlab.envs.minigrid import make_minigrid

    description = envs.describe("MiniGrid-DoorKey-5x5-v0")
    env = make_minigrid("MiniGrid-DoorKey-5x5-v0", seed=0)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    seen = {"has_key": set(), "front_state": set()}
    for _ in range(600):
        # mostly pick-ups and toggles, so that keys are carried and doors opened
        action = int(rng.choice(7, p=[.2, .2, .2, .15, .05, .15, .05]))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset(seed=int(rng.integers(1000)))
            continue
        grid = _grid_env(env)
        read = description.state_tensors(torch.as_tensor(obs[None]).float(), DERIVED)
        got = {name: float(value[0]) for name, value in read.items()}
        front = grid.grid.get(*grid.front_pos)
        door_state = (0 if not isinstance(front, Door) else 3 if front.is_locked
                      else 1 if front.is_open else 2)
        assert got["has_key"] == float(isinstance(grid.carrying, Key))
        assert got["front_state"] == door_state
        if isinstance(front, Door) and front.is_open:
            assert got["door_open"] == 1.0
        seen["has_key"].add(got["has_key"])
        seen["front_state"].add(got["front_state"])
    # the play carried a key and faced a locked door
    assert seen["has_key"] == {0.0, 1.0} and {0.0, 3.0} <= seen["front_state"]


class _KeyRoomEnv(MiniGridEnv):
    """A user's task: a key and a goal in a small room (not one of the built-ins)."""

    def __init__(self, **kwargs):
        mission = MissionSpace(mission_func=lambda: "get the key, then the goal")
        super().__init__(mission_space=mission, grid_size=6, max_steps=50, **kwargs)

    def _gen_grid(self, width: int, height: int) -> None:
        self.grid = Grid(width, height)
        self.grid.wall_rect(0, 0, width, height)
        self.put_obj(Key("yellow"), 2, 2)
        self.put_obj(Goal(), width - 2, height - 2)
        self.place_agent()
        self.mission = "get the key, then the goal"


class _Copies:
    """What the describer reads of a batched env: its observation space and its Gymnasium copies."""

    def __init__(self, env: gymnasium.Env, shape: tuple[int, ...] = (147,)):
        self.single_observation_space = gymnasium.spaces.Box(0, 255, shape)
        self.envs = [env]


def test_a_users_minigrid_env_gets_the_views_variables_and_no_other_env_does() -> None:
    from minigrid.wrappers import ImgObsWrapper

    user = ImgObsWrapper(_KeyRoomEnv())
    description = user_minigrid_description("mymodule:MiniGrid-KeyRoom-v0", _Copies(user))
    assert description is not None and "_KeyRoomEnv" in description.summary
    assert {"has_key", "door_open", "goal_distance", "front_object"} <= set(description.state_names)
    assert description.success is None  # the user's reward and ends are their own
    assert "mission text is not observed" in description.summary
    # another env of the view's size, and a MiniGrid env seen another way, are not described
    assert user_minigrid_description("Other-v0", _Copies(gymnasium.make("CartPole-v1"))) is None
    image = _Copies(user, (7, 7, 3))
    assert user_minigrid_description("mymodule:MiniGrid-KeyRoom-v0", image) is None


def test_describe_finds_a_registered_users_minigrid_env() -> None:
    env_id = "MiniGrid-TestsKeyRoom-v0"
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point=_KeyRoomEnv)
    description = envs.describe(env_id)
    assert "has_key" in description.state_names and "_KeyRoomEnv" in description.summary
