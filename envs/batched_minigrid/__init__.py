"""MiniGrid in torch: :class:`BatchedMiniGridEnv` and the MiniGrid ids it registers.

``rewardlab.envs.make("MiniGrid-DoorKey-8x8-v0", num_envs=4096)`` makes the batched env for
every id in :data:`BATCHED_IDS`; any other MiniGrid id still runs through the Gymnasium
adapter. Making one needs the ``minigrid`` package (``pip install 'rewardlab[minigrid]'``),
registering them does not.
"""

from __future__ import annotations

import functools

from rewardlab.envs.batched_minigrid.descriptions import register_minigrid_descriptions
from rewardlab.envs.batched_minigrid.env import BatchedMiniGridEnv
from rewardlab.envs.registration import register

#: the MiniGrid ids that :func:`rewardlab.envs.make` builds as :class:`BatchedMiniGridEnv`
BATCHED_IDS = (
    "MiniGrid-Empty-5x5-v0",
    "MiniGrid-Empty-Random-5x5-v0",
    "MiniGrid-Empty-6x6-v0",
    "MiniGrid-Empty-Random-6x6-v0",
    "MiniGrid-Empty-8x8-v0",
    "MiniGrid-Empty-16x16-v0",
    "MiniGrid-FourRooms-v0",
    "MiniGrid-DoorKey-5x5-v0",
    "MiniGrid-DoorKey-6x6-v0",
    "MiniGrid-DoorKey-8x8-v0",
    "MiniGrid-DoorKey-16x16-v0",
    "MiniGrid-Unlock-v0",
    "MiniGrid-UnlockPickup-v0",
    "MiniGrid-BlockedUnlockPickup-v0",
    "MiniGrid-KeyCorridorS3R1-v0",
    "MiniGrid-KeyCorridorS3R2-v0",
    "MiniGrid-KeyCorridorS3R3-v0",
    "MiniGrid-KeyCorridorS4R3-v0",
    "MiniGrid-KeyCorridorS5R3-v0",
    "MiniGrid-KeyCorridorS6R3-v0",
    "MiniGrid-MultiRoom-N2-S4-v0",
    "MiniGrid-MultiRoom-N4-S5-v0",
    "MiniGrid-MultiRoom-N6-v0",
    "MiniGrid-ObstructedMaze-1Dl-v0",
    "MiniGrid-ObstructedMaze-1Dlh-v0",
    "MiniGrid-ObstructedMaze-1Dlhb-v0",
    "MiniGrid-ObstructedMaze-2Dl-v0",
    "MiniGrid-ObstructedMaze-2Dlh-v0",
    "MiniGrid-ObstructedMaze-2Dlhb-v0",
    "MiniGrid-LavaGapS5-v0",
    "MiniGrid-LavaGapS6-v0",
    "MiniGrid-LavaGapS7-v0",
    "MiniGrid-LavaCrossingS9N1-v0",
    "MiniGrid-LavaCrossingS9N2-v0",
    "MiniGrid-LavaCrossingS9N3-v0",
    "MiniGrid-LavaCrossingS11N5-v0",
    "MiniGrid-SimpleCrossingS9N1-v0",
    "MiniGrid-SimpleCrossingS9N2-v0",
    "MiniGrid-SimpleCrossingS9N3-v0",
    "MiniGrid-SimpleCrossingS11N5-v0",
)

for _env_id in BATCHED_IDS:
    register(_env_id, functools.partial(BatchedMiniGridEnv, env_id=_env_id))
register_minigrid_descriptions(BATCHED_IDS)

__all__ = ["BATCHED_IDS", "BatchedMiniGridEnv"]
