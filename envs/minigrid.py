"""MiniGrid tasks (DoorKey, MultiRoom, ...) as Gymnasium envs with the observations learners need.

MiniGrid's own observation is a dict (``image``, ``direction``, ``mission``). The helpers here
keep the agent's egocentric ``7 x 7 x 3`` view (object, colour and state index per cell):

- ``obs="flat"``: the view flattened to ``(147,)`` uint8, for MLP policies
  (SB3's ``"MlpPolicy"``) and for the intrinsic modules (``Count`` counts it exactly);
- ``obs="image"``: the view as ``(7, 7, 3)`` uint8, for a small CNN of your own (SB3's
  ``NatureCNN`` needs images of at least 36 x 36).

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

from typing import Any

import gymnasium as gym
from gymnasium.wrappers import FlattenObservation

OBSERVATIONS = ("flat", "image")


def _import_minigrid() -> Any:
    try:
        import minigrid
        import minigrid.wrappers
    except ImportError as error:
        raise ImportError(
            "MiniGrid envs need the minigrid package: pip install 'rewardlab[minigrid]'"
        ) from error
    return minigrid


def make_minigrid(
    env_id: str, *, obs: str = "flat", seed: int | None = None, **kwargs: Any
) -> gym.Env:
    """One MiniGrid env with the agent's view as its observation.

    :param env_id: a MiniGrid id, e.g. ``"MiniGrid-DoorKey-8x8-v0"`` or
        ``"MiniGrid-MultiRoom-N2-S4-v0"``
    :param obs: ``"flat"`` (``(147,)`` uint8) or ``"image"`` (``(7, 7, 3)`` uint8)
    :param seed: seeds the env's first reset and its action space
    :param kwargs: passed to ``gymnasium.make`` (e.g. ``max_steps``, ``render_mode``)
    :raises ValueError: an unknown ``obs`` or a non-MiniGrid ``env_id``
    """
    if obs not in OBSERVATIONS:
        raise ValueError(f"obs must be one of {OBSERVATIONS}, got {obs!r}")
    minigrid = _import_minigrid()
    if not env_id.startswith("MiniGrid-"):
        raise ValueError(f"env_id={env_id!r} is not a MiniGrid task (ids start with 'MiniGrid-')")
    env = minigrid.wrappers.ImgObsWrapper(gym.make(env_id, **kwargs))
    if obs == "flat":
        env = FlattenObservation(env)
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env


def make_minigrid_vec(
    env_id: str, n_envs: int, *, obs: str = "flat", seed: int = 0, **kwargs: Any
) -> Any:
    """``n_envs`` MiniGrid envs as an SB3 ``DummyVecEnv``, each inside a ``Monitor``.

    :param env_id: a MiniGrid id
    :param n_envs: how many envs
    :param obs: ``"flat"`` or ``"image"``, see :func:`make_minigrid`
    :param seed: env ``i`` is seeded with ``seed + i``
    :param kwargs: passed to ``gymnasium.make``
    """
    from stable_baselines3.common.env_util import make_vec_env

    return make_vec_env(lambda: make_minigrid(env_id, obs=obs, **kwargs), n_envs=n_envs, seed=seed)
