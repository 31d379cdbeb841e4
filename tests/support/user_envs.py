"""Users' own Gymnasium envs, written to a folder of the test's as ``module.py`` (the corridor with a secret beside it)."""

from __future__ import annotations

from pathlib import Path

CORRIDOR_SOURCE = '''
"""A user's own env: walk right along a corridor to the goal."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Corridor(gym.Env):
    def __init__(self, length: int = 6):
        self.length = length
        self.observation_space = spaces.Box(0.0, float(length), (2,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def _obs(self):
        return np.array([self.position, self.length - self.position], dtype=np.float32)

    def step(self, action):
        self.position = max(0, self.position + (1 if action == 1 else -1))
        terminated = self.position >= self.length
        reward = 1.0 if terminated else 0.0  # the goal pays, nothing else does
        return self._obs(), reward, terminated, False, {}


gym.register("{name}-v0", entry_point=Corridor, max_episode_steps=30)
'''

# the corridor whose length its constructor must be given (gymnasium.make(id, length=...))
SIZED_CORRIDOR_SOURCE = CORRIDOR_SOURCE.replace("length: int = 6", "length: int")

DESCRIPTION = '''
summary = "walk right along a corridor of 6 cells; the episode ends at the goal cell."
success = "position >= 6"
terminated_meaning = "the agent reached the goal cell"

[action]
meaning = "0 = step left, 1 = step right"

[[state]]
name = "position"
index = 0
meaning = "the agent's cell, 0 at the start, 6 at the goal"
units = "cells"
low = 0
high = 6

[[state]]
name = "distance_to_goal"
index = 1
meaning = "cells left to the goal"
units = "cells"
'''

SECRET = "user-secret-9f3a1c"


UNIT_BOX_SOURCE = '''
"""A user's env whose continuous observation is scaled to [0, 1] (float32)."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class UnitBox(gym.Env):
    def __init__(self):
        self.observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = self.np_random.uniform(0.2, 0.4, 2).astype(np.float32)
        return self.x.copy(), {}

    def step(self, action):
        self.x = np.clip(self.x + (0.03 if int(action) else -0.03), 0, 1).astype(np.float32)
        terminated = bool(self.x[0] >= 0.9)
        return self.x.copy(), float(terminated), terminated, False, {}


gym.register("{name}-v0", entry_point=UnitBox, max_episode_steps=50)
'''


IMAGE_SOURCE = '''
"""A user's env with uint8 height x width x channel images, which SB3 transposes."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Image(gym.Env):
    def __init__(self):
        self.observation_space = spaces.Box(0, 255, (12, 12, 3), np.uint8)
        self.action_space = spaces.Discrete(4)

    def _obs(self):
        image = np.zeros((12, 12, 3), np.uint8)
        image[self.cell[0], self.cell[1], 0] = 255
        image[11, 11, 1] = 255
        return image

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cell = np.array([0, 0])
        return self._obs(), {}

    def step(self, action):
        move = [(0, 1), (1, 0), (0, -1), (-1, 0)][int(action)]
        self.cell = np.clip(self.cell + move, 0, 11)
        terminated = bool((self.cell == 11).all())
        return self._obs(), float(terminated), terminated, False, {}


gym.register("{name}-v0", entry_point=Image, max_episode_steps=30)
'''


def write_env(folder: Path, module: str, source: str) -> str:
    """Write ``source`` as ``module.py`` (registering ``<Module>-v0``); return the env id."""
    name = module.title().replace("_", "")
    (folder / f"{module}.py").write_text(source.replace("{name}", name))
    return f"{module}:{name}-v0"


def write_corridor(folder: Path, module: str) -> str:
    """Write ``module.py`` (registering ``<Module>-v0``), ``corridor.toml`` and a secret; return the env id."""
    (folder / "corridor.toml").write_text(DESCRIPTION)
    (folder / ".env").write_text(f"API_KEY={SECRET}\n")
    return write_env(folder, module, CORRIDOR_SOURCE)


POINT_MASS_SOURCE = '''
"""A user's own env: steer a point mass to a goal on a plane, around a pit."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces

PIT_CENTRE, PIT_RADIUS, GOAL_RADIUS = np.array([0.0, 0.0], np.float32), 0.3, 0.15


class PointMass(gym.Env):
    def __init__(self):
        plane = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict({"pos": plane, "vel": plane, "goal": plane})
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)  # a force along x and y

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = np.array([self.np_random.uniform(-0.9, -0.5), self.np_random.uniform(-0.8, 0.8)], np.float32)
        self.goal = np.array([self.np_random.uniform(0.5, 0.9), self.np_random.uniform(-0.8, 0.8)], np.float32)
        self.vel = np.zeros(2, np.float32)
        return self._obs(), {}

    def _obs(self):
        return {"pos": self.pos.copy(), "vel": self.vel.copy(), "goal": self.goal.copy()}

    def step(self, action):
        force = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.vel = (0.8 * self.vel + 0.2 * force).astype(np.float32)
        self.pos = np.clip(self.pos + 0.1 * self.vel, -1.0, 1.0).astype(np.float32)
        at_goal = np.linalg.norm(self.pos - self.goal) < GOAL_RADIUS
        in_pit = np.linalg.norm(self.pos - PIT_CENTRE) < PIT_RADIUS
        reward = 1.0 if at_goal else -1.0 if in_pit else 0.0  # the goal pays, the pit costs
        return self._obs(), reward, bool(at_goal or in_pit), False, {}


gym.register("{name}-v0", entry_point=PointMass, max_episode_steps=60)
'''

# Gymnasium flattens a Dict observation in the sorted order of its keys: goal, pos, vel.
POINT_MASS_DESCRIPTION = '''
summary = "steer a point mass on the plane [-1, 1]^2 to its goal (within 0.15) around a pit of radius 0.3 at the origin; the episode ends at the goal (+1), in the pit (-1) or after 60 steps."
success = "goal_distance < 0.15"
terminated_meaning = "the point mass reached the goal or fell into the pit"

[action]
meaning = "the force along x and y, each in [-1, 1]"

[[state]]
name = "goal_x"
index = 0
meaning = "the goal's x (fixed for the episode)"

[[state]]
name = "goal_y"
index = 1
meaning = "the goal's y (fixed for the episode)"

[[state]]
name = "pos_x"
index = 2
meaning = "the point mass's x"
low = -1
high = 1

[[state]]
name = "pos_y"
index = 3
meaning = "the point mass's y"
low = -1
high = 1

[[state]]
name = "vel_x"
index = 4
meaning = "the point mass's velocity along x"

[[state]]
name = "vel_y"
index = 5
meaning = "the point mass's velocity along y"

[derived]
goal_distance = "sqrt((pos_x - goal_x)**2 + (pos_y - goal_y)**2)"
pit_distance = "sqrt(pos_x**2 + pos_y**2)"
'''


def write_point_mass(folder: Path, module: str, derived: bool = True) -> str:
    """Write ``module.py`` (registering ``<Module>-v0``, the point mass) and ``pointmass.toml``
    (its description; without the derived variables and success rule if not ``derived``);
    return the env id."""
    description = POINT_MASS_DESCRIPTION
    if not derived:
        description = description.split("[derived]")[0].replace('success = "goal_distance < 0.15"\n', "")
    (folder / "pointmass.toml").write_text(description)
    return write_env(folder, module, POINT_MASS_SOURCE)


KEY_ROOMS_SOURCE = '''
"""A user's own MiniGrid task, written as MiniGrid's documentation teaches: three rooms in a
row (``rooms``), a key in the first, a locked door of the key's colour into the second, a
closed door into the third, where the goal is."""
import gymnasium as gym
from minigrid.core.constants import COLOR_NAMES
from minigrid.core.grid import Grid
from minigrid.core.mission import MissionSpace
from minigrid.core.world_object import Door, Goal, Key
from minigrid.minigrid_env import MiniGridEnv


class KeyRoomsEnv(MiniGridEnv):
    def __init__(self, room_size: int = 5, rooms: int = 3, max_steps: int | None = None, **kwargs):
        self.room_size, self.rooms = room_size, rooms
        width = rooms * (room_size - 1) + 1
        mission_space = MissionSpace(self._gen_mission, ordered_placeholders=[COLOR_NAMES])
        super().__init__(
            mission_space=mission_space,
            width=width,
            height=room_size,
            max_steps=max_steps or 10 * width * room_size,
            **kwargs,
        )

    @staticmethod
    def _gen_mission(color: str):
        return f"use the {color} key to open the locked door and get to the goal"

    def _gen_grid(self, width, height):
        self.grid = Grid(width, height)
        self.grid.wall_rect(0, 0, width, height)
        wall = self.room_size - 1
        for room in range(1, self.rooms):
            self.grid.vert_wall(room * wall, 0)
        color = self._rand_elem(COLOR_NAMES)
        self.put_obj(Door(color, is_locked=True), wall, self._rand_int(1, height - 1))
        for room in range(2, self.rooms):
            self.put_obj(Door(self._rand_elem(COLOR_NAMES)), room * wall, self._rand_int(1, height - 1))
        self.place_obj(Goal(), top=((self.rooms - 1) * wall, 0), size=(wall, height))
        self.place_obj(Key(color), top=(0, 0), size=(wall, height))
        self.place_agent(top=(0, 0), size=(wall, height))
        self.mission = self._gen_mission(color)


gym.register("{name}-v0", entry_point=KeyRoomsEnv)
'''


def write_key_rooms(folder: Path, module: str) -> str:
    """Write ``module.py``, a user's MiniGrid task registering ``MiniGrid-KeyRooms-v0`` with
    Gymnasium; return its ``module:MiniGrid-KeyRooms-v0`` id."""
    (folder / f"{module}.py").write_text(KEY_ROOMS_SOURCE.replace("{name}", "MiniGrid-KeyRooms"))
    return f"{module}:MiniGrid-KeyRooms-v0"
