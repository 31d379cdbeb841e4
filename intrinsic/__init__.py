"""rewardlab intrinsic: exploration bonuses for transitions, in batches.

Lifelong modules: :class:`RND` (random network distillation), :class:`Count` (exact counts
and SimHash pseudo-counts), :class:`Surprise` (ICM forward-model error). Episodic ones, which
forget at every episode end: :class:`EpisodicCount` (per-episode counts) and :class:`E3B`
(elliptical bonus over a learned embedding). :class:`Hybrid` fuses several (HIRE's sum,
product, cycle and max; NGU's and NovelD's lifelong x episodic fusions). They share one
interface, :class:`IntrinsicModule` (see :mod:`rewardlab.intrinsic.base`)::

    bonus = module.compute(obs, actions, next_obs, dones)  # (N,), counts the transitions
    module.update(obs, actions, next_obs)                  # trains the module's networks

:func:`make` builds modules by name (``"rnd"``, ``"count"``, ``"surprise"``, ``"episodic"``,
``"e3b"``), fusing several with :class:`Hybrid`; :func:`register` adds names.

Example::

    >>> import gymnasium as gym
    >>> from rewardlab import intrinsic
    >>> env = gym.make("CartPole-v1")
    >>> module = intrinsic.make("rnd,count", env.observation_space, env.action_space,
    ...                         fusion="sum", num_envs=8, seed=0)
    >>> module
    Hybrid([rnd, count], fusion='sum', schedule=None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from rewardlab.intrinsic.base import IntrinsicModule
from rewardlab.intrinsic.count import Count
from rewardlab.intrinsic.episodic import E3B, EpisodicCount
from rewardlab.intrinsic.hybrid import FUSIONS, DecaySchedule, Hybrid
from rewardlab.intrinsic.rnd import RND, random_observations
from rewardlab.intrinsic.surprise import Surprise

ModuleFactory = Callable[..., IntrinsicModule]

_REGISTRY: dict[str, ModuleFactory] = {
    "rnd": lambda observation_space, action_space, **options: RND(observation_space, **options),
    "count": lambda observation_space, action_space, **options: Count(observation_space, **options),
    "surprise": Surprise,
    "episodic": lambda observation_space, action_space, **options: EpisodicCount(
        observation_space, **options
    ),
    "e3b": E3B,
}


def register(name: str, factory: ModuleFactory) -> None:
    """Make ``name`` available to :func:`make`.

    :param name: the name, lower case
    :param factory: called as ``factory(observation_space, action_space, seed=..., **options)``
    :raises ValueError: ``name`` is taken
    """
    if name in _REGISTRY:
        raise ValueError(f"intrinsic module {name!r} is already registered")
    _REGISTRY[name] = factory


def registered() -> list[str]:
    """The names :func:`make` knows, sorted."""
    return sorted(_REGISTRY)


def make(
    names: str | Sequence[str],
    observation_space: object,
    action_space: object,
    *,
    fusion: str = "sum",
    weights: Sequence[float] | None = None,
    schedule: DecaySchedule | None = None,
    num_envs: int | None = None,
    seed: int | None = None,
    device: str | torch.device | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> IntrinsicModule:
    """Build intrinsic modules by name; several are fused into a :class:`Hybrid`.

    :param names: one name, several separated by commas (``"rnd,count"``), or a list
    :param observation_space: the observation space of one env
    :param action_space: the action space of one env
    :param fusion: how several modules are fused (see :class:`Hybrid`)
    :param weights: one weight per module, for the fusion
    :param schedule: the fused bonus's coefficient schedule (see :class:`Hybrid`)
    :param num_envs: envs interleaved in the time-major batches the module will get
    :param seed: seed of the modules (the ``i``-th module gets ``seed + i``)
    :param device: where the module lives
    :param options: keyword arguments per module name, e.g. ``{"count": {"beta": 0.1}}``
    :raises ValueError: an unknown name, or none
    """
    if isinstance(names, str):
        names = [part.strip() for part in names.split(",")]
    names = [name.lower() for name in names if name]
    if not names:
        raise ValueError(f"no intrinsic module named; choose from {registered()}")
    unknown = [name for name in names if name not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown intrinsic module(s) {unknown}; registered: {registered()}")
    options = dict(options or {})
    stray = sorted(set(options) - set(names))
    if stray:
        raise ValueError(f"options given for {stray}, which are not among the modules {names}")
    modules = [
        _REGISTRY[name](
            observation_space,
            action_space,
            seed=None if seed is None else seed + i,
            **options.get(name, {}),
        )
        for i, name in enumerate(names)
    ]
    module = (
        modules[0]
        if len(modules) == 1
        else Hybrid(modules, fusion=fusion, weights=weights, schedule=schedule)
    )
    if num_envs is not None:
        module.set_num_envs(num_envs)
    return module if device is None else module.to(device)


__all__ = [
    "E3B",
    "FUSIONS",
    "RND",
    "Count",
    "DecaySchedule",
    "EpisodicCount",
    "Hybrid",
    "IntrinsicModule",
    "Surprise",
    "make",
    "random_observations",
    "register",
    "registered",
]
