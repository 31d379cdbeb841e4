"""MiniGrid in torch: :class:`BatchedMiniGridEnv`, and the family that builds every MiniGrid task.

``rewardlab.envs.make(env_id, num_envs=4096)`` makes a :class:`BatchedMiniGridEnv` for any
MiniGrid task, whatever its id (``"MiniGrid-DoorKey-8x8-v0"``, a user's
``"my_module:MiniGrid-MyTask-v0"``), when its dynamics are MiniGrid's: its class leaves
MiniGrid's step, reward and view as they are (or is one of MiniGrid's success-rule tasks,
``layouts.SUCCESS_RULES``) and its layouts hold only MiniGrid's own objects; its own
``_gen_grid`` makes the layouts. Any other MiniGrid task runs through the Gymnasium adapter,
with one warning that says why. Making one needs the ``minigrid`` package
(``pip install 'rewardlab[minigrid]'``), registering the family does not.
"""

from __future__ import annotations

import functools
from typing import Any

from rewardlab.envs.batched_minigrid.descriptions import register_minigrid_descriptions
from rewardlab.envs.batched_minigrid.env import (
    BatchedMiniGridEnv,
    StepEvents,
    minigrid_reward,
    minigrid_success,
)
from rewardlab.envs.batched_minigrid.layouts import NotBatchable
from rewardlab.envs.core import Batched
from rewardlab.envs.gymnasium_env import GymnasiumBatchedEnv
from rewardlab.envs.minigrid import is_minigrid_id, note_once
from rewardlab.envs.registration import EnvFactory, register_family


def make_batched_minigrid(num_envs: int, env_id: str, **kwargs: Any) -> Batched:
    """``num_envs`` copies of a MiniGrid task: a :class:`BatchedMiniGridEnv` where its dynamics
    are MiniGrid's, else (with one warning saying why) the Gymnasium adapter.

    :param num_envs: how many copies
    :param env_id: the task's Gymnasium id (``"module:Name-v0"`` too, its module imported)
    :param kwargs: :class:`BatchedMiniGridEnv`'s (``layouts`` and ``reuse`` do not reach the
        adapter)
    :raises ValueError: ``success_fn`` or ``reward_fn`` given for a task that is not batched
    """
    try:
        return BatchedMiniGridEnv(num_envs, env_id=env_id, **kwargs)
    except NotBatchable as reason:
        rules = [name for name in ("success_fn", "reward_fn") if kwargs.get(name) is not None]
        if rules:
            raise ValueError(
                f"{env_id} is not batched ({reason}), and {' and '.join(rules)} work on the "
                "batched MiniGrid only: write the reward into the task's class instead"
            ) from reason
        note_once(
            f"{env_id} is not batched ({reason}); it runs through the Gymnasium adapter, one "
            "MiniGrid env per copy in Python, several times slower",
            stacklevel=3,
        )
    for pool_argument in ("layouts", "reuse"):  # the batched env's layout pool only
        kwargs.pop(pool_argument, None)
    return GymnasiumBatchedEnv(env_id, num_envs, **kwargs)


def minigrid_family(env_id: str) -> EnvFactory | None:
    """:func:`make_batched_minigrid` for the id of any MiniGrid task, ``None`` for other ids.

    :param env_id: a Gymnasium id whose module is imported
    """
    if not is_minigrid_id(env_id):
        return None
    return functools.partial(make_batched_minigrid, env_id=env_id)


#: MiniGrid's own ids that the batched step is checked against, step for step, in the suite
#: (every other MiniGrid task is batched too, by the same family, where it can be)
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
    # NovelD's and BeBold's, registered by rewardlab.envs.minigrid
    "MiniGrid-MultiRoom-N7-S8-v0",
    "MiniGrid-MultiRoom-N10-S10-v0",
    "MiniGrid-MultiRoom-N12-S10-v0",
    "MiniGrid-ObstructedMaze-1Dl-v0",
    "MiniGrid-ObstructedMaze-1Dlh-v0",
    "MiniGrid-ObstructedMaze-1Dlhb-v0",
    "MiniGrid-ObstructedMaze-2Dl-v0",
    "MiniGrid-ObstructedMaze-2Dlh-v0",
    "MiniGrid-ObstructedMaze-2Dlhb-v0",
    "MiniGrid-ObstructedMaze-1Q-v0",
    "MiniGrid-ObstructedMaze-2Q-v0",
    "MiniGrid-ObstructedMaze-Full-v0",
    # MiniGrid's v1 places the keys after every door and blocking ball (in v0 a blocking
    # ball can cover a key placed before it)
    "MiniGrid-ObstructedMaze-2Dlhb-v1",
    "MiniGrid-ObstructedMaze-1Q-v1",
    "MiniGrid-ObstructedMaze-2Q-v1",
    "MiniGrid-ObstructedMaze-Full-v1",
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

register_family(minigrid_family)
register_minigrid_descriptions(BATCHED_IDS)

__all__ = [
    "BATCHED_IDS",
    "BatchedMiniGridEnv",
    "NotBatchable",
    "StepEvents",
    "make_batched_minigrid",
    "minigrid_family",
    "minigrid_reward",
    "minigrid_success",
]
