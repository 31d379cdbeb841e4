"""MiniGrid tasks (DoorKey, MultiRoom, a user's own ``MiniGridEnv``) as Gymnasium envs with
the observations learners need.

MiniGrid's own observation is a dict (``image``, ``direction``, ``mission``). The helpers here
keep the agent's egocentric ``7 x 7 x 3`` view (object, colour and state index per cell):

- ``obs="flat"``: the view flattened to ``(147,)`` uint8, for MLP policies
  (SB3's ``"MlpPolicy"``) and for the intrinsic modules (``Count`` counts it exactly);
- ``obs="image"``: the view as ``(7, 7, 3)`` uint8, for a small CNN of your own (SB3's
  ``NatureCNN`` needs images of at least 36 x 36).

The mission text is dropped, as in the batched MiniGrid (:mod:`rewardlab.envs.batched_minigrid`):
one warning per task says so, and whether the mission changes between episodes (then the
view must show what the mission names, as MiniGrid's own tasks do).

Importing this module registers three MultiRoom tasks with Gymnasium that MiniGrid itself does
not (it stops at ``MiniGrid-MultiRoom-N6-v0``): ``MiniGrid-MultiRoom-N7-S8-v0``,
``MiniGrid-MultiRoom-N10-S10-v0`` and ``MiniGrid-MultiRoom-N12-S10-v0``, the hardest MultiRoom
tasks of NovelD and BeBold (:data:`MULTIROOM_TASKS`). ``import rewardlab.envs`` imports it.

Any env whose unwrapped class is a ``minigrid`` ``MiniGridEnv`` gets this handling, whatever
its id (``"MiniGrid-DoorKey-8x8-v0"``, ``"BabyAI-GoToLocal-v0"``,
``"my_module:MiniGrid-MyTask-v0"``): :func:`is_minigrid` is how rewardlab tells.

A successful episode is one whose return is positive: MiniGrid pays
``1 - 0.9 * steps / max_steps`` for reaching the goal and 0 otherwise.

Needs the ``minigrid`` package: ``pip install 'rewardlab[minigrid]'``.

Example::

    >>> from rewardlab.envs.minigrid import make_minigrid
    >>> env = make_minigrid("MiniGrid-DoorKey-8x8-v0", seed=0)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, obs.dtype
    ((147,), dtype('uint8'))
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import gymnasium as gym
from gymnasium.wrappers import FlattenObservation

OBSERVATIONS = ("flat", "image")

#: MultiRoom tasks beyond MiniGrid's own, by id: ``(rooms, largest room side)``, made as NovelD
#: and BeBold make them, ``MultiRoomEnv(minNumRooms=rooms, maxNumRooms=rooms,
#: maxRoomSize=side)`` with MiniGrid's defaults for the rest (a 25 x 25 grid, ``max_steps`` 20
#: a room). Their ids follow MiniGrid's own (``MiniGrid-MultiRoom-N4-S5-v0``), so that what
#: serves MiniGrid ids (the batched family, the presets, the descriptions) serves them.
MULTIROOM_TASKS = {
    "MiniGrid-MultiRoom-N7-S8-v0": (7, 8),
    "MiniGrid-MultiRoom-N10-S10-v0": (10, 10),
    "MiniGrid-MultiRoom-N12-S10-v0": (12, 10),
}


def register_multiroom_tasks() -> None:
    """Register :data:`MULTIROOM_TASKS` with Gymnasium, each unless an id of that name is
    registered already (a MiniGrid that registers it keeps its own). The entry point is a
    string: registering imports nothing, making one needs the ``minigrid`` package."""
    for env_id, (rooms, side) in MULTIROOM_TASKS.items():
        if env_id not in gym.registry:
            gym.register(
                env_id,
                entry_point="minigrid.envs:MultiRoomEnv",
                kwargs={"minNumRooms": rooms, "maxNumRooms": rooms, "maxRoomSize": side},
            )


def _import_minigrid() -> Any:
    try:
        import minigrid
        import minigrid.wrappers
    except ImportError as error:
        raise ImportError(
            "MiniGrid envs need the minigrid package: pip install 'rewardlab[minigrid]'"
        ) from error
    return minigrid


def is_minigrid(env: gym.Env) -> bool:
    """Whether ``env`` (wrapped or not) is a MiniGrid task: its unwrapped class subclasses
    ``minigrid``'s ``MiniGridEnv``, whatever its id.

    :param env: a Gymnasium env
    """
    # an env of a MiniGridEnv subclass was made by importing minigrid: nothing to import here
    module = sys.modules.get("minigrid.minigrid_env")
    return module is not None and isinstance(env.unwrapped, module.MiniGridEnv)


def is_minigrid_id(env_id: str) -> bool:
    """Whether Gymnasium's ``env_id`` (``"module:Name-v0"`` too) makes a MiniGrid task, read
    from its registered entry point without making the env. The id's module (``minigrid``,
    or the user's) must be imported already (``rewardlab.envs.check_id`` does it).

    :param env_id: a Gymnasium id, or ``"module:Name-v0"``
    """
    name = env_id.partition(":")[2] if ":" in env_id else env_id
    module = sys.modules.get("minigrid.minigrid_env")
    if module is None or name not in gym.registry:
        return False
    entry_point = gym.registry[name].entry_point
    if isinstance(entry_point, str):
        entry_point = gym.envs.registration.load_env_creator(entry_point)
    return isinstance(entry_point, type) and issubclass(entry_point, module.MiniGridEnv)


def mission_note(env: gym.Env, env_id: str) -> str:
    """The line that says a MiniGrid task's mission is not part of the observation.

    :param env: the task, unwrapped or not
    :param env_id: its id, for the line
    """
    space = env.unwrapped.observation_space["mission"]
    if getattr(space, "ordered_placeholders", None):
        # the same line for every episode's mission, so that Python shows it once
        mission = "which changes between episodes: the policy must see what it names"
    else:
        mission = f"{env.unwrapped.mission!r}, the same in every episode"
    view = "the observation is the agent's 7 x 7 x 3 view"
    return f"{env_id}: {view}; the mission ({mission}) is dropped"


_SAID: set[str] = set()


def note_once(message: str, stacklevel: int = 2) -> None:
    """Warn with ``message`` once per process: a run makes its env several times (training,
    evaluation, each search candidate), and Python's own once-per-place rule starts over
    whenever a warnings filter changes (torch's compile changes them).

    :param message: the warning's text
    :param stacklevel: as ``warnings.warn``'s, from the caller's point of view
    """
    if message not in _SAID:
        _SAID.add(message)
        warnings.warn(message, stacklevel=stacklevel + 1)


def minigrid_view(env: gym.Env, env_id: str, obs: str = "flat") -> gym.Env:
    """A MiniGrid env with the agent's view as its observation, the mission dropped (one
    warning says so).

    :param env: a MiniGrid env as ``gymnasium.make`` gives it (see :func:`is_minigrid`)
    :param env_id: its id, for the warning
    :param obs: ``"flat"`` (``(147,)`` uint8) or ``"image"`` (``(7, 7, 3)`` uint8)
    :raises ValueError: an unknown ``obs``, or an env that is not a MiniGrid task
    """
    if obs not in OBSERVATIONS:
        raise ValueError(f"obs must be one of {OBSERVATIONS}, got {obs!r}")
    if not is_minigrid(env):
        raise ValueError(
            f"env_id={env_id!r} is not a MiniGrid task (its class {type(env.unwrapped).__name__} "
            "is no minigrid MiniGridEnv)"
        )
    minigrid = _import_minigrid()
    note_once(mission_note(env, env_id))
    env = minigrid.wrappers.ImgObsWrapper(env)
    return FlattenObservation(env) if obs == "flat" else env


def make_minigrid(
    env_id: str, *, obs: str = "flat", seed: int | None = None, **kwargs: Any
) -> gym.Env:
    """One MiniGrid env with the agent's view as its observation.

    :param env_id: a MiniGrid task's id, e.g. ``"MiniGrid-DoorKey-8x8-v0"`` or a user's
        ``"my_module:MiniGrid-MyTask-v0"`` (Gymnasium imports ``my_module``)
    :param obs: ``"flat"`` (``(147,)`` uint8) or ``"image"`` (``(7, 7, 3)`` uint8)
    :param seed: seeds the env's first reset and its action space
    :param kwargs: passed to ``gymnasium.make`` (e.g. ``max_steps``, ``render_mode``)
    :raises ValueError: an unknown ``obs`` or an env that is not a MiniGrid task
    """
    if obs not in OBSERVATIONS:
        raise ValueError(f"obs must be one of {OBSERVATIONS}, got {obs!r}")
    _import_minigrid()
    made = gym.make(env_id, **kwargs)
    try:
        env = minigrid_view(made, env_id, obs)
    except ValueError:
        made.close()
        raise
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env


def make_minigrid_vec(
    env_id: str, n_envs: int, *, obs: str = "flat", seed: int = 0, **kwargs: Any
) -> Any:
    """``n_envs`` MiniGrid envs as an SB3 ``DummyVecEnv``, each inside a ``Monitor``.

    :param env_id: a MiniGrid task's id
    :param n_envs: how many envs
    :param obs: ``"flat"`` or ``"image"``, see :func:`make_minigrid`
    :param seed: env ``i`` is seeded with ``seed + i``
    :param kwargs: passed to ``gymnasium.make``
    """
    from stable_baselines3.common.env_util import make_vec_env

    return make_vec_env(lambda: make_minigrid(env_id, obs=obs, **kwargs), n_envs=n_envs, seed=seed)


register_multiroom_tasks()
