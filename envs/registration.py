"""The registry of batched envs: :func:`register`, :func:`registered`, :func:`register_family`
and :func:`make`.

An id is built by its registered factory; else by the factory of a registered family that
claims it (every MiniGrid task, whatever its id: :mod:`rewardlab.envs.batched_minigrid`). Ids
neither knows go to :class:`~rewardlab.envs.gymnasium_env.GymnasiumBatchedEnv`, the
layer below, which knows nothing of this registry: when Gymnasium cannot make an id either,
the error it raises gets the registry's ids added here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rewardlab.envs.core import BatchedEnv
from rewardlab.envs.gymnasium_env import (
    GymnasiumBatchedEnv,
    UnknownGymnasiumId,
    check_gymnasium_id,
    construction_error,
)

EnvFactory = Callable[..., BatchedEnv]
#: ``family(env_id)``: the factory of a Gymnasium id the family builds, or ``None``
EnvFamily = Callable[[str], EnvFactory | None]

_REGISTRY: dict[str, EnvFactory] = {}
_FAMILIES: list[EnvFamily] = []


def register(env_id: str, factory: EnvFactory) -> None:
    """Make ``env_id`` available to :func:`make`.

    :param env_id: the id, Gymnasium style (``"Name-v0"``)
    :param factory: called as ``factory(num_envs, device=..., seed=..., compile=..., **kwargs)``;
        usually a :class:`BatchedEnv` subclass
    :raises ValueError: ``env_id`` is already registered
    """
    if env_id in _REGISTRY:
        raise ValueError(f"env_id {env_id!r} is already registered (by {_REGISTRY[env_id]!r})")
    _REGISTRY[env_id] = factory


def register_family(family: EnvFamily) -> None:
    """Let ``family`` build Gymnasium ids that are not registered one by one (a user's
    ``"module:Name-v0"`` too): :func:`make` asks it, once the id's module is imported, before
    it falls back to the Gymnasium adapter.

    :param family: ``family(env_id)`` gives a factory (called as :func:`register`'s are) for
        the ids it builds, ``None`` for the others
    """
    if family not in _FAMILIES:
        _FAMILIES.append(family)


def registered() -> list[str]:
    """The ids :func:`make` knows, sorted."""
    return sorted(_REGISTRY)


def check_id(env_id: str) -> None:
    """Raise a clear error unless :func:`make` can build ``env_id``.

    Imports what registers the id (a ``"module:Env-v0"`` id's module, ``minigrid`` for
    MiniGrid ids) on the way.

    :raises ValueError: naming the id and the import or install it may need.
    """
    if env_id not in _REGISTRY:
        try:
            check_gymnasium_id(env_id)
        except UnknownGymnasiumId as error:
            raise _unknown(error) from None


def make(
    env_id: str,
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    compile: bool = False,
    **kwargs: Any,
) -> BatchedEnv:
    """Create ``num_envs`` copies of ``env_id`` as one batched env on ``device``.

    Example::

        >>> from rewardlab import envs
        >>> env = envs.make("CartPole-v1", num_envs=1024, device="cpu", seed=0)
        >>> obs, info = env.reset()

    :param env_id: a registered id (see :func:`registered`), an id of a registered family
        (any MiniGrid task, ``"my_module:MiniGrid-MyTask-v0"`` too), or any other id
        Gymnasium can make (``"my_module:MyEnv-v0"``), run through
        :class:`~rewardlab.envs.gymnasium_env.GymnasiumBatchedEnv`
    :param num_envs: how many copies, at least 1
    :param device: ``"cpu"``, ``"cuda"`` or ``"cuda:<index>"``
    :param seed: seed of the env's generator, used by the first :meth:`~BatchedEnv.reset`
    :param compile: compile the step with Inductor at the first step (seconds to tens of
        seconds once; then several times faster); the default eager step suits tests and
        short runs
    :param kwargs: passed to the env, e.g. ``max_episode_steps=100`` or
        ``validate_actions=False``
    :raises ValueError: an id Gymnasium cannot make either, arguments the env's constructor
        does not take (or that make it fail), ``num_envs < 1`` or an unavailable device
    """
    factory = _REGISTRY.get(env_id)
    if factory is None:
        try:
            check_gymnasium_id(env_id)  # imports the id's module, which families read
        except UnknownGymnasiumId as error:
            raise _unknown(error) from None
        factory = next((found for family in _FAMILIES if (found := family(env_id))), None)
    if factory is None:
        return GymnasiumBatchedEnv(
            env_id, num_envs, device=device, seed=seed, compile=compile, **kwargs
        )
    try:
        env = factory(num_envs, device=device, seed=seed, compile=compile, **kwargs)
    except TypeError as error:
        if not kwargs:
            raise  # our own checks of the arguments above (num_envs=2.0)
        raise construction_error(env_id, kwargs, error) from error  # one the env does not take
    env.spec_id = env_id
    return env


def _unknown(error: UnknownGymnasiumId) -> ValueError:
    """Gymnasium's refusal of an id, with the batched ids :func:`make` knows."""
    return ValueError(f"{error}. Batched envs: {', '.join(registered())}")
