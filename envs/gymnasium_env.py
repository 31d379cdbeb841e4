"""Any Gymnasium env in the batched-env contract: a Gymnasium vector env, numpy to torch at the boundary.

Our PPO, HRA, the reward search and the LLM policy step batched envs (tensors in, tensors
out, same-step autoreset with ``info["final_obs"]``). :class:`GymnasiumBatchedEnv` gives
that contract to every env Gymnasium can make: registered ids (MiniGrid, Box2D, toy text,
third-party packages) and ``"module:Env-v0"`` ids, whose module is imported first (from the
working directory too, as ``python -m`` would). :func:`rewardlab.envs.make` uses it for
every id that has no batched env of its own.

Observations become float32 tensors: ``Box`` as they are, ``Discrete`` as one-hot vectors
(as SB3 feeds them to a network; integer ``Box`` and one-hot observations are declared
:class:`~rewardlab.envs.WholeNumberBox`), ``Dict``/``Tuple`` flattened as Gymnasium's
``FlattenObservation`` does it: a ``Dict``'s parts in the sorted order of its keys (Gymnasium
sorts them when the space is made from a plain dict), each part's values in row-major order,
a ``Discrete`` part one-hot. ``{"pos": (2,), "vel": (2,), "goal": (2,)}`` becomes six columns
``goal_0, goal_1, pos_0, pos_1, vel_0, vel_1``: :attr:`GymnasiumBatchedEnv.observation_parts`
keeps those names, which the generic description, the LLM policy's prompt and reward programs
use. MiniGrid tasks (any env whose class is a ``MiniGridEnv``, whatever its id) keep the
agent's ``7 x 7 x 3`` view, flattened, and drop the mission (see :mod:`rewardlab.envs.minigrid`).
Actions are ``Discrete`` or ``Box``.

Example::

    >>> from rewardlab.envs.gymnasium_env import GymnasiumBatchedEnv
    >>> env = GymnasiumBatchedEnv("FrozenLake-v1", num_envs=4, seed=0)
    >>> obs, info = env.reset()
    >>> obs.shape
    torch.Size([4, 16])
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import FlattenObservation

from rewardlab.envs.core import Actions, Batched, StepReturn, WholeNumberBox, resolve_device
from rewardlab.envs.minigrid import is_minigrid, minigrid_view

#: the modules whose import registers (and wraps) envs of an id prefix, and how to install them
ID_PACKAGES = {
    "MiniGrid-": (("minigrid", "rewardlab.envs.minigrid"), "pip install 'rewardlab[minigrid]'"),
    "BabyAI-": (("minigrid", "rewardlab.envs.minigrid"), "pip install 'rewardlab[minigrid]'"),
    "ALE/": (("ale_py",), "pip install ale-py"),
}


@dataclass(frozen=True)
class ObservationPart:
    """One part of a ``Dict``/``Tuple`` observation and the columns it takes once flattened.

    :param name: the part's key path joined by ``_`` (``"pos"``, ``"arm_joint"``; a ``Tuple``'s
        items are ``item0``, ``item1``, ...), a Python identifier.
    :param start: its first column in the flat observation.
    :param stop: one past its last column.
    :param space: the part's own space (a ``Discrete`` part is one-hot: ``stop - start == n``).
    """

    name: str
    start: int
    stop: int
    space: spaces.Space


def observation_parts(space: spaces.Space) -> list[ObservationPart] | None:
    """The parts of a ``Dict``/``Tuple`` observation space in the order Gymnasium's
    ``flatten`` lays them out (a ``Dict``'s own key order, sorted when it was made from a
    plain dict); ``None`` for any other space.

    :param space: the env's observation space, before flattening.
    """
    if not isinstance(space, spaces.Dict | spaces.Tuple):
        return None
    parts: list[ObservationPart] = []

    def walk(node: spaces.Space, name: str, start: int) -> int:
        if isinstance(node, spaces.Dict | spaces.Tuple):
            items = node.spaces.items() if isinstance(node, spaces.Dict) else (
                (f"item{index}", child) for index, child in enumerate(node.spaces))
            for key, child in items:
                start = walk(child, f"{name}_{key}" if name else _identifier(str(key)), start)
            return start
        stop = start + int(spaces.flatdim(node))
        parts.append(ObservationPart(name, start, stop, node))
        return stop

    walk(space, "", 0)
    return parts


def _identifier(key: str) -> str:
    name = "".join(character if character.isalnum() else "_" for character in key).strip("_") or "part"
    return name if name[0].isalpha() else f"part_{name}"


def env_module(env_id: str) -> str | None:
    """The module of a ``"module:Env-v0"`` id, ``None`` for a plain id."""
    module, separator, _ = env_id.partition(":")
    return module if separator and module else None


def import_env_module(env_id: str) -> str | None:
    """Import what registers ``env_id`` with Gymnasium and return the module's file or folder.

    A ``"module:Env-v0"`` id imports ``module`` (see :func:`import_user_module` for where it is
    looked for); a MiniGrid id imports ``minigrid``.

    :return: the path of the user's module (its file, or its package folder), ``None`` for
        ids of installed packages.
    :raises ValueError: the module cannot be imported, naming it and what to do.
    """
    for prefix, (packages, install) in ID_PACKAGES.items():
        if env_id.startswith(prefix):
            try:
                for package in packages:
                    importlib.import_module(package)
            except ImportError as error:
                raise ValueError(f"env {env_id!r} needs the {packages[0]} package ({error}): {install}") from error
            return None
    module = env_module(env_id)
    if module is None:
        return None
    imported = import_user_module(module, f"env {env_id!r}")
    path = getattr(imported, "__file__", None)
    if path is None:
        return None
    package = module.split(".")[0]
    top = sys.modules[package]
    folder = list(getattr(top, "__path__", []) or [])
    return folder[0] if folder else os.path.realpath(path)


#: where :func:`import_user_module` also looks for a user's module; ``None``: the import path only
_working_folder: str | None = None


def look_in_working_folder(folder: str) -> None:
    """Let :func:`import_user_module` find a user's module in ``folder`` when it is on no import
    path, as ``python -m`` finds one in the working folder.

    The ``rewardlab`` command calls it once, for the ids its command line and ``--config`` name
    (the user's own words); the library alone never changes the import path, and an id read
    from a file (a reward program's header) is refused before anything is imported.

    :param folder: the folder, usually the working directory.
    """
    global _working_folder
    _working_folder = os.path.realpath(folder)


def import_user_module(module: str, what: str) -> Any:
    """Import a user's ``module`` (of a ``"module:name"`` spec): from the import path, or from
    the folder :func:`look_in_working_folder` named (the ``rewardlab`` command's working folder).

    :param module: the module's dotted name.
    :param what: what it is imported for, for the error (``"env 'm:Env-v0'"``).
    :raises ValueError: it cannot be found, or importing it failed (a syntax error, any
        error its code raised), naming it and what to do.
    """
    folder = _working_folder
    if folder is not None and folder not in sys.path and importlib.util.find_spec(module.split(".")[0]) is None:
        # on the import path, not only imported here: the sandbox's fork server takes this path
        sys.path.append(folder)
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ValueError(
            f"{what}: cannot import module {module!r} ({error}); run rewardlab from the folder "
            f"that holds {module.split('.')[0]}.py, or install it, or add its folder to PYTHONPATH"
        ) from error
    except Exception as error:  # the user's module ran and failed (a syntax error, a bad register call)
        raise ValueError(
            f"{what}: importing module {module!r} failed with {type(error).__name__}: {error}; "
            f"fix the module (python -c 'import {module}' shows the traceback)"
        ) from error


class UnknownGymnasiumId(ValueError):
    """Gymnasium cannot make the id: the registry above (``rewardlab.envs.make``) adds its own
    ids to the message."""


def check_gymnasium_id(env_id: str) -> None:
    """Raise a clear error unless Gymnasium can make ``env_id`` (after importing its module).

    :raises ValueError: naming the id, and the import or install it may need
        (:class:`UnknownGymnasiumId` where the id's module imports and Gymnasium has no such id).
    """
    import_env_module(env_id)
    try:
        gymnasium.spec(env_id.partition(":")[2] if env_module(env_id) else env_id)
    except gymnasium.error.Error as error:
        # a missing package was reported by import_env_module: here it is installed
        packages = [packages[0] for prefix, (packages, _) in ID_PACKAGES.items() if env_id.startswith(prefix)]
        hint = (
            f"{packages[0]} is installed and registers no such id"
            if packages
            else "for an env of your own use 'module:EnvName-v0', where importing module registers "
            "EnvName-v0 (gymnasium.register)"
        )
        raise UnknownGymnasiumId(f"unknown env {env_id!r}: Gymnasium cannot make it ({error}); {hint}") from None


def make_one(env_id: str, kwargs: dict[str, Any] | None = None) -> gymnasium.Env:
    """One Gymnasium env of ``env_id`` with the observation rewardlab's learners take
    (a MiniGrid task's view flattened, its mission dropped; ``Dict``/``Tuple`` observations
    flattened).

    :param env_id: a Gymnasium id or ``"module:Env-v0"`` (its module imported already).
    :param kwargs: passed to ``gymnasium.make`` (and so to the env's constructor).
    :raises ValueError: the env's constructor (or Gymnasium) failed, naming the id, the
        arguments and the error.
    """
    kwargs = dict(kwargs or {})
    try:
        env = gymnasium.make(env_id, **kwargs)
    except Exception as error:  # the user's constructor can raise anything: say which and why
        raise construction_error(env_id, kwargs, error) from error
    if is_minigrid(env):
        return minigrid_view(env, env_id)
    if isinstance(env.observation_space, spaces.Dict | spaces.Tuple):
        env = FlattenObservation(env)
    return env


def construction_error(env_id: str, kwargs: dict[str, Any], error: Exception) -> ValueError:
    """The error to raise when making ``env_id`` with ``kwargs`` raised ``error``."""
    return ValueError(
        f"env {env_id!r} could not be made with the arguments {kwargs}: "
        f"{type(error).__name__}: {error}. Give the arguments its constructor takes: "
        "envs.make(env_id, num_envs, **kwargs), rewardlab train --env-kwargs '{\"name\": value}', "
        "or an id registered with them (gymnasium.register(id, entry_point, kwargs={...}))"
    )


class GymnasiumBatchedEnv(Batched):
    """``num_envs`` copies of any Gymnasium env, stepped as one batched env of torch tensors.

    The copies run in a Gymnasium ``SyncVectorEnv`` with same-step autoreset; what it returns
    becomes tensors on ``device`` and ``info["final_obs"]`` holds the true last observation
    where an episode ended (the next one elsewhere), as in :class:`~rewardlab.envs.BatchedEnv`.
    Copy ``i`` is seeded with ``seed + i`` at the first reset.

    :param env_id: a Gymnasium id or ``"module:Env-v0"``.
    :param num_envs: how many copies, at least 1.
    :param device: where the tensors live.
    :param seed: seed of the first reset; ``None`` seeds from the OS.
    :param max_episode_steps: a time limit other than the id's own.
    :param compile: accepted for the contract of :func:`rewardlab.envs.make`; a Gymnasium
        env steps in numpy and is never compiled.
    :param validate_actions: check discrete actions are in range (always done by Gymnasium).
    :param kwargs: passed to ``gymnasium.make``.
    :raises ValueError: Gymnasium cannot make the id, or its spaces are not supported.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.SAME_STEP}
    render_mode = None

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        max_episode_steps: int | None = None,
        compile: bool = False,
        validate_actions: bool = True,
        **kwargs: Any,
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        check_gymnasium_id(env_id)
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        self.env_id = env_id
        self.spec_id = env_id
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.validate_actions = validate_actions
        self._seed = seed
        self._vector = SyncVectorEnv(  # make_one says why an env cannot be made
            [lambda: make_one(env_id, kwargs) for _ in range(self.num_envs)],
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
        observation_space = self._vector.single_observation_space
        action_space = self._vector.single_action_space
        #: the parts of a Dict/Tuple observation and their flat columns; None for other spaces
        first = self._vector.envs[0]
        self.observation_parts = observation_parts(
            first.env.observation_space if isinstance(first, FlattenObservation) else observation_space
        )
        if not isinstance(action_space, spaces.Discrete | spaces.Box):
            self._vector.close()
            raise ValueError(
                f"env {env_id!r} has the action space {action_space}; rewardlab's batched envs, and "
                "so its PPO, HRA, reward search and LLM policy, take Discrete or Box actions: wrap the "
                "env to one of those (a gymnasium.ActionWrapper), or train it with rewardlab train "
                "--algo sb3-ppo or sb3-a2c, whose SB3 learners take MultiDiscrete and MultiBinary actions"
            )
        #: the one-hot size of a Discrete observation, None for Box observations
        self.discrete_observations: int | None = None
        if isinstance(observation_space, spaces.Discrete):
            self.discrete_observations = int(observation_space.n)
            self._obs_start = int(observation_space.start)
            observation_space = WholeNumberBox(0.0, 1.0, (self.discrete_observations,), np.float32)
        elif not isinstance(observation_space, spaces.Box):
            self._vector.close()
            raise ValueError(
                f"env {env_id!r} has the observation space {observation_space}; rewardlab takes Box, "
                "Discrete, Dict or Tuple observations"
            )
        else:
            # integer and bool observations stay whole numbers as float32 (Count counts them exactly)
            whole = not np.issubdtype(observation_space.dtype, np.floating)
            observation_space = (WholeNumberBox if whole else spaces.Box)(
                observation_space.low.astype(np.float32), observation_space.high.astype(np.float32),
                observation_space.shape, np.float32,
            )
        self.single_observation_space = observation_space
        self.single_action_space = action_space
        self.observation_space = gymnasium.vector.utils.batch_space(observation_space, self.num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(action_space, self.num_envs)
        spec = self._vector.envs[0].spec
        self.max_episode_steps = spec.max_episode_steps if spec is not None else None
        self._started = False

    @property
    def unwrapped(self) -> GymnasiumBatchedEnv:
        return self

    @property
    def envs(self) -> list[gymnasium.Env]:
        """The Gymnasium envs, one per copy (e.g. ``env.envs[0].unwrapped.mission``)."""
        return list(self._vector.envs)

    def _obs(self, obs: np.ndarray) -> torch.Tensor:
        if self.discrete_observations is not None:
            index = torch.as_tensor(np.asarray(obs, dtype=np.int64) - self._obs_start)
            return torch.nn.functional.one_hot(index, self.discrete_observations).float().to(self.device)
        return torch.as_tensor(np.asarray(obs, dtype=np.float32), device=self.device)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every copy (copy ``i`` seeded with ``seed + i``).

        :param seed: ``None`` takes the constructor's seed at the first reset and continues
            the copies' streams after it.
        :param options: passed to every copy's ``reset``.
        """
        if seed is None and not self._started:
            seed = self._seed
        self._started = True
        obs, _ = self._vector.reset(seed=seed, options=options)
        if seed is not None:
            self._vector.action_space.seed(seed)
        return self._obs(obs), {}

    def step(self, actions: Actions) -> StepReturn:
        """Step every copy; those whose episode ended are reset in the same call.

        :param actions: ``(num_envs,)`` ints for ``Discrete``, ``(num_envs, *shape)`` floats for
            ``Box``; a tensor or numpy array.
        :return: ``(obs, reward, terminated, truncated, info)`` as tensors; ``info["final_obs"]``
            and ``info["reward_components"]`` (``"extrinsic"``) as in the batched envs.
        """
        if not self._started:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        if isinstance(actions, torch.Tensor):
            actions = actions.detach().cpu().numpy()
        actions = np.asarray(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"actions has {len(actions)} rows; the env has num_envs={self.num_envs}")
        if isinstance(self.single_action_space, spaces.Discrete):
            if not np.issubdtype(actions.dtype, np.integer) and not np.all(np.mod(actions, 1) == 0):
                raise TypeError(f"discrete actions must be integers, got dtype {actions.dtype}")
            actions = actions.astype(np.int64).reshape(self.num_envs)
            low = int(self.single_action_space.start)
            high = low + int(self.single_action_space.n) - 1
            if self.validate_actions and ((actions < low) | (actions > high)).any():
                raise ValueError(f"actions {actions.tolist()} are outside the action range [{low}, {high}]")
        else:
            actions = actions.astype(self.single_action_space.dtype).reshape(
                self.num_envs, *self.single_action_space.shape
            )
        obs, reward, terminated, truncated, info = self._vector.step(actions)
        next_obs = self._obs(obs)
        final_obs = next_obs.clone()
        ended = np.asarray(info.get("_final_obs", np.zeros(self.num_envs, dtype=bool)))
        if ended.any():
            last = np.stack([info["final_obs"][i] for i in np.flatnonzero(ended)])
            final_obs[torch.as_tensor(ended)] = self._obs(last)
        reward_tensor = torch.as_tensor(np.asarray(reward, dtype=np.float32), device=self.device)
        return (
            next_obs,
            reward_tensor,
            torch.as_tensor(np.asarray(terminated, dtype=bool), device=self.device),
            torch.as_tensor(np.asarray(truncated, dtype=bool), device=self.device),
            {"final_obs": final_obs, "reward_components": {"extrinsic": reward_tensor}},
        )

    def close(self) -> None:
        self._vector.close()

    def __repr__(self) -> str:
        return f"GymnasiumBatchedEnv({self.env_id!r}, num_envs={self.num_envs}, device={self.device})"
