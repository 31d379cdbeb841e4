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
