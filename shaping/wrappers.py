"""Potential-based shaping wrappers for Gymnasium envs, vector envs and batched torch envs.

All of them add ``F = scale * (gamma * phi(s') - phi(s))`` to the reward, with
``phi(s') = 0`` on termination, the real last observation on truncation, and
``F = 0`` on the reset step of next-step autoreset (see :mod:`rewardlab.shaping.core`).
The env's own reward stays visible as ``info["reward_components"]["extrinsic"]``
and the shaping term as ``info["reward_components"][name]``.

They compose with Gymnasium's reward wrappers: put ``TransformReward``,
``ClipReward`` or ``NormalizeReward`` *outside* the shaping wrapper to transform
the shaped reward, or inside it to shape a transformed reward (the
``"extrinsic"`` component then holds the transformed reward).
"""

from __future__ import annotations

import hashlib
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from rewardlab.common.compiled import source_fingerprint
from rewardlab.common.components import with_components
from rewardlab.envs.core import BatchedWrapper, in_step, object_fingerprint
from rewardlab.shaping.core import (
    Potential,
    PotentialTracker,
    evaluate_potential,
    raise_not_finite,
    shaping_term,
)


def check_name(name: str) -> str:
    """Return ``name`` if it can name a reward component, else raise ``ValueError``."""
    if not isinstance(name, str) or not name or name == "extrinsic":
        raise ValueError(
            f"name={name!r} must be a non-empty string other than 'extrinsic' "
            "(the env's own reward keeps that name)"
        )
    return name


def shaping_component(components: dict | None, extrinsic: Any, name: str, value: Any) -> dict:
    """The components with the shaping term added under ``name`` (see :func:`with_components`)."""
    fix = "give this shaping wrapper another name="
    return with_components(components, extrinsic, {name: value}, fix)


def batch_of_one(obs: Any) -> Any:
    """A single observation as a batch of one (arrays, tensors, and dicts and tuples of them,
    as Gymnasium batches ``Dict`` and ``Tuple`` spaces)."""
    if isinstance(obs, dict):
        return {key: batch_of_one(value) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(batch_of_one(value) for value in obs)
    if isinstance(obs, torch.Tensor):
        return obs.unsqueeze(0)
    return np.asarray(obs)[None]


def stack_final(obs: Any, ended: np.ndarray, final: Any) -> Any:
    """A full batch of true last observations: ``final[i]`` where ``ended[i]``, else ``obs[i]``.

    ``obs`` is an array, or a dict or tuple of them (then each ``final[i]`` is one too).
    """
    if isinstance(obs, dict):
        return {
            key: stack_final(value, ended, [f[key] if f is not None else None for f in final])
            for key, value in obs.items()
        }
    if isinstance(obs, tuple):
        return tuple(
            stack_final(value, ended, [f[k] if f is not None else None for f in final])
            for k, value in enumerate(obs)
        )
    rows = [final[i] if ended[i] else obs[i] for i in range(len(obs))]
    return np.stack([np.asarray(row) for row in rows])


class PotentialShaping(gym.Wrapper):
    """Adds the potential-based shaping term to a Gymnasium env's reward.

    ``F = scale * (gamma * phi(s') - phi(s))``, ``phi(s') = 0`` when the episode
    terminates; a truncated episode keeps ``phi`` of its last observation. This
    leaves the optimal policy unchanged (Ng et al., 1999) when ``gamma`` is the
    learner's discount.

    Example:
        >>> import gymnasium as gym
        >>> from rewardlab.shaping import PotentialShaping, potentials
        >>> env = PotentialShaping(gym.make("MountainCar-v0"), potentials.for_env("MountainCar-v0"))
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(2)
        >>> sorted(info["reward_components"])
        ['extrinsic', 'shaping']

    :param env: the env to wrap.
    :param potential: ``phi(obs_batch) -> (N,)``, or ``phi(obs_batch, t=...)`` for a
        dynamic potential (``t`` counts the transitions seen by this wrapper); a ``Dict``
        or ``Tuple`` observation arrives as a dict or tuple of batches of one.
    :param gamma: the learner's discount factor, in (0, 1].
    :param scale: multiplies the shaping term.
    :param name: the component name under ``info["reward_components"]``.
    """

    def __init__(
        self,
        env: gym.Env,
        potential: Potential,
        gamma: float = 0.99,
        scale: float = 1.0,
        name: str = "shaping",
    ):
        super().__init__(env)
        self.tracker = PotentialTracker(potential, gamma, scale)
        self.name = check_name(name)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.tracker.reset(batch_of_one(obs))
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        shaping = float(self.tracker.step(batch_of_one(obs), [terminated])[0])
        info = dict(info)
        info["reward_components"] = shaping_component(
            info.get("reward_components"), float(reward), self.name, shaping
        )
        return obs, float(reward) + shaping, terminated, truncated, info


class PotentialShapingVector(VectorWrapper):
    """Adds the potential-based shaping term to a Gymnasium vector env's rewards.

    Exact under every autoreset mode the env declares in
    ``metadata["autoreset_mode"]``: next-step (the reset step gets ``F = 0``),
    same-step (the true last observation comes from ``info["final_obs"]``) and
    disabled (``reset(options={"reset_mask": mask})`` restarts only those envs).

    Example:
        >>> import gymnasium as gym
        >>> from rewardlab.shaping import PotentialShapingVector, potentials
        >>> envs = gym.make_vec("CartPole-v1", num_envs=4)
        >>> envs = PotentialShapingVector(envs, potentials.for_env("CartPole-v1"))
        >>> obs, info = envs.reset(seed=0)
        >>> obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
        >>> info["reward_components"]["shaping"].shape
        (4,)

    :param env: the vector env to wrap.
    :param potential: ``phi(obs_batch) -> (N,)`` on numpy batches (a dict or tuple of them
        for ``Dict`` and ``Tuple`` observations, as the vector env batches them).
    :param gamma: the learner's discount factor, in (0, 1].
    :param scale: multiplies the shaping term.
    :param name: the component name under ``info["reward_components"]``.
    """

    def __init__(
        self,
        env: VectorEnv,
        potential: Potential,
        gamma: float = 0.99,
        scale: float = 1.0,
        name: str = "shaping",
    ):
        super().__init__(env)
        self.tracker = PotentialTracker(potential, gamma, scale)
        self.name = check_name(name)
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = AutoresetMode(mode)
        self._restarting = np.zeros(self.num_envs, dtype=bool)

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        mask = None if options is None else options.get("reset_mask")
        self.tracker.reset(obs, mask)
        if mask is None:
            self._restarting[:] = False
        else:
            self._restarting[np.asarray(mask, dtype=bool)] = False
        return obs, info

    def step(self, actions: Any):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        terminated = np.asarray(terminated, dtype=bool)
        ended = terminated | np.asarray(truncated, dtype=bool)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            final_obs = None
            if ended.any():
                final_obs = stack_final(obs, info["_final_obs"], info["final_obs"])
            shaping = self.tracker.step(obs, terminated, ended=ended, final_obs=final_obs)
        elif self.autoreset_mode is AutoresetMode.NEXT_STEP:
            shaping = self.tracker.step(obs, terminated, restarting=self._restarting)
            self._restarting = ended
        else:
            shaping = self.tracker.step(obs, terminated)
        rewards = np.asarray(rewards, dtype=np.float64)
        info = dict(info)
        info["reward_components"] = shaping_component(
            info.get("reward_components"), rewards, self.name, shaping
        )
        info["_reward_components"] = np.ones(self.num_envs, dtype=bool)
        return obs, rewards + shaping, terminated, truncated, info


class BatchedPotentialShaping(BatchedWrapper):
    """Adds the potential-based shaping term to a batched torch env (``rewardlab.envs.make``).

    The env follows rewardlab's batched-env contract: tensors on one device,
    same-step autoreset with the true last observations in ``info["final_obs"]``.
    The potential receives tensors and must return a tensor ``(N,)`` on the same
    device; nothing crosses to the host.

    Example:
        >>> from rewardlab import envs
        >>> from rewardlab.shaping import BatchedPotentialShaping, potentials
        >>> env = envs.make("MountainCar-v0", num_envs=16, seed=0)
        >>> env = BatchedPotentialShaping(env, potentials.for_env("MountainCar-v0"))
        >>> obs, info = env.reset()
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> info["reward_components"]["shaping"].shape
        torch.Size([16])

    :param env: the batched env to wrap.
    :param potential: ``phi(obs_batch) -> (N,)`` on tensors.
    :param gamma: the learner's discount factor, in (0, 1].
    :param scale: multiplies the shaping term.
    :param name: the component name under ``info["reward_components"]``.
    """

    def __init__(
        self,
        env: Any,
        potential: Potential,
        gamma: float = 0.99,
        scale: float = 1.0,
        name: str = "shaping",
    ):
        for attribute in ("num_envs", "device", "step", "reset"):
            if not hasattr(env, attribute):
                raise ValueError(
                    f"env={env!r} is not a batched env (it has no {attribute!r}); use "
                    "PotentialShaping for a gymnasium.Env, PotentialShapingVector for a "
                    "gymnasium VectorEnv and VecPotentialShaping for an SB3 VecEnv"
                )
        super().__init__(env)
        self.tracker = PotentialTracker(potential, gamma, scale)
        self.name = check_name(name)

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.tracker.reset(obs)
        return obs, info

    # The step as pure tensor math on the wrapped env's (BatchedEnv.advance_carried's
    # protocol), carrying the running potential: step runs it once with its checks
    # (BatchedWrapper.step), a learner compiles it into its rollout.

    @property
    def _steps_by_advance(self) -> bool:
        """Whether a learner may run :meth:`advance_carried` in place of :meth:`step`: this
        class's own step and reset, over an env that steps by its ``advance_carried``, with
        a static potential that says it traces (``traces = True``, as this package's
        formula potentials do). A potential traces when it is tensor math only, never
        reading a tensor's value in Python (``if obs.max() > 0``), and holds no weights
        that change (a network's)."""
        return (
            type(self).step is BatchedWrapper.step
            and type(self).reset is BatchedPotentialShaping.reset
            and bool(getattr(self.env, "_steps_by_advance", False))
            and getattr(self.tracker.potential, "traces", False) is True
            and not self.tracker.dynamic
        )

    @property
    def component_names(self) -> tuple[str, ...]:
        """The wrapped env's component names, then this wrapper's (not one of them)."""
        inner = dict.fromkeys(self.carried_env.component_names)
        return tuple(shaping_component(inner, None, self.name, None))

    def carried(self) -> tuple[torch.Tensor, ...]:
        """The wrapped env's carry, then the running potential ``(N,)``: float32 in a learner's
        steps, in the potential's own dtype within :meth:`step`."""
        phi = self.tracker.phi
        if phi is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        return (*self.carried_env.carried(), phi if in_step() else phi.to(torch.float32))

    def carried_example(self) -> tuple[torch.Tensor, ...]:
        """Tensors of :meth:`carried`'s shapes and dtypes (before a reset too)."""
        inner = self.carried_env.carried_example()
        return (*inner, torch.zeros(self.num_envs, dtype=torch.float32, device=self.device))

    def advance_carried(self, carry, actions, fresh):  # noqa: ANN001, ANN201 (BatchedEnv's)
        """The step as :meth:`BatchedEnv.advance_carried`: the wrapped env's step, then
        :meth:`PotentialTracker.step`'s formula on the carried potential. Within :meth:`step`
        the potential's values are checked at each step (:func:`evaluate_potential`: its
        shape, NaN and inf on the CPU) and a dynamic one is given ``t=``; in a learner's
        steps the formula alone, the potential checked at :meth:`commit_carried`."""
        inner, (obs, reward, terminated, truncated, done, final_obs), components = (
            self.carried_env.advance_carried(carry[:-1], actions, fresh)
        )
        tracker = self.tracker
        phi_obs = self._potential(obs)
        phi_next = torch.where(done, self._potential(final_obs), phi_obs)
        shaping = shaping_term(carry[-1], phi_next, terminated, tracker.gamma, tracker.scale)
        shaping = shaping.to(reward.dtype)
        step = (obs, reward + shaping, terminated, truncated, done, final_obs)
        return (*inner, phi_obs), step, (*components, shaping)

    def commit_carried(self, carry: Any, done: torch.Tensor, actions: torch.Tensor) -> None:
        """Take the last carry as the wrapped env's and this wrapper's own; the potential
        is checked finite here, once for the steps (it was not at each)."""
        phi = carry[-1]
        if phi.device.type == "cpu" and not bool(torch.isfinite(phi).all()):
            raise_not_finite(self.tracker.potential, phi)
        self.carried_env.commit_carried(carry[:-1], done, actions)
        self.tracker.phi = phi
        self.tracker.num_transitions += done.numel()

    def step_fingerprint(self) -> str:
        """The wrapped env's, with this package's source, the potential's (its class's, where
        it is not this package's) and its constants, and the shaping's."""
        source = source_fingerprint("rewardlab.shaping")
        potential = object_fingerprint(self.tracker.potential, source)
        constants = repr((self.tracker.gamma, self.tracker.scale, self.name))
        parts = (self.env.step_fingerprint(), potential, constants)
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def _potential(self, obs: torch.Tensor) -> torch.Tensor:
        """``phi(obs)``: float32 in a learner's steps; within :meth:`step` checked, in the
        potential's own dtype (as :meth:`PotentialTracker.step` computes the term) and at the
        time of the step's transitions for a dynamic potential."""
        tracker = self.tracker
        if not in_step():
            return tracker.potential(obs).to(torch.float32)
        t = tracker.num_transitions + len(obs) if tracker.dynamic else None
        return evaluate_potential(tracker.potential, obs, t)
