"""The one place the shaping formula lives.

``F(s, s') = scale * (gamma * phi(s') - phi(s))`` with ``phi(s') = 0`` when the
episode terminated. Every wrapper (Gymnasium, Gymnasium vector, SB3, batched
torch) keeps a :class:`PotentialTracker` and only translates its API's way of
reporting episode ends into the tracker's three cases:

- an ordinary step: ``phi(s')`` from the observation returned;
- an episode that ended this step with a reset in the same call (same-step
  autoreset, SB3): ``phi(s')`` from the true last observation, and the running
  potential restarts from the reset observation;
- a reset step of next-step autoreset: ``F = 0`` and the running potential
  restarts from the observation returned.

Everything here works on numpy arrays and torch tensors alike and returns the
kind it was given.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

Batch = np.ndarray | torch.Tensor
Potential = Callable[..., Batch]


def check_gamma(gamma: float) -> float:
    """Return ``gamma`` as a float if it lies in (0, 1], else raise ``ValueError``."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 < gamma <= 1.0:
        raise ValueError(
            f"gamma={gamma!r} must be a number in (0, 1]; pass the learner's own discount "
            "factor (e.g. 0.99) so that shaping leaves the optimal policy unchanged"
        )
    return float(gamma)


def check_scale(scale: float) -> float:
    """Return ``scale`` as a float if it is finite, else raise ``ValueError``."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale={scale!r} must be a finite number")
    return float(scale)


def evaluate_potential(potential: Potential, obs: Batch, t: int | None = None) -> Batch:
    """Evaluate ``potential`` on a batch and check what it returns.

    :param potential: callable ``phi(obs_batch)`` or ``phi(obs_batch, t=...)``.
    :param obs: a batch ``(N, *obs_shape)``, numpy array or torch tensor.
    :param t: the step count passed to a dynamic potential; ``None`` for a static one.
    :return: the potentials, shape ``(N,)``, the same kind as ``obs``.
    :raises ValueError: if the potential cannot take ``obs`` or returns a wrong
        shape, kind, NaN or inf. On a GPU, NaN and inf are not checked here, since the
        check would wait for the device at every step.
    """
    try:
        values = potential(obs) if t is None else potential(obs, t=t)
    except Exception as error:
        # the first line, as torch lists every signature it expected on lines of its own;
        # the chained traceback keeps the rest
        lines = str(error).splitlines() or [""]
        said = lines[0] + (" ..." if len(lines) > 1 else "")
        raise ValueError(
            f"potential {_name(potential)} could not take an observation batch "
            f"{describe_batch(obs)}: {type(error).__name__}: {said}. A potential takes a batch "
            "(N, *obs_shape) (a numpy array under Gymnasium and SB3, a torch tensor under "
            "rewardlab's batched envs) and returns shape (N,)"
        ) from error
    # The common case, a numpy batch and a float array back, is checked with as few
    # numpy calls as possible: shaping runs at every env step.
    if type(values) is np.ndarray and type(obs) is np.ndarray and values.dtype.kind == "f":
        if values.shape != (len(obs),):
            _raise_shape(potential, values, len(obs))
        if not np.isfinite(np.add.reduce(values)):
            raise_not_finite(potential, values)
        return values
    leaf = first_leaf(obs)
    n = len(leaf)
    if isinstance(leaf, torch.Tensor) and not isinstance(values, torch.Tensor):
        raise ValueError(
            f"potential {_name(potential)} returned {type(values).__name__} for a torch "
            "batch; it must return a torch tensor of shape (N,) on the observation's device"
        )
    if not isinstance(leaf, torch.Tensor):
        if isinstance(values, torch.Tensor):
            raise ValueError(
                f"potential {_name(potential)} returned a torch tensor for a numpy batch; "
                "it must return a numpy array of shape (N,)"
            )
        values = np.asarray(values, dtype=np.float64)
    if tuple(values.shape) != (n,):
        _raise_shape(potential, values, n)
    if isinstance(values, torch.Tensor):
        # On a GPU the check would wait for the device at every step; it is left out there.
        if values.device.type == "cpu" and not bool(torch.isfinite(values).all()):
            raise_not_finite(potential, values)
    elif not np.isfinite(values).all():
        raise_not_finite(potential, values)
    return values


def _raise_shape(potential: Potential, values: Batch, n: int) -> None:
    raise ValueError(
        f"potential {_name(potential)} returned shape {tuple(values.shape)} for a batch "
        f"of {n} observations; it must return one value per observation, shape ({n},)"
    )


def raise_not_finite(potential: Potential, values: Batch) -> None:
    raise ValueError(
        f"potential {_name(potential)} returned NaN or inf ({values}); a potential must be "
        "finite on every observation the env can produce"
    )


def first_leaf(obs: Any) -> Any:
    """The first array or tensor of a batch that may be a (nested) dict or tuple (the
    batches of Gymnasium's ``Dict`` and ``Tuple`` spaces)."""
    while isinstance(obs, dict | tuple):
        obs = next(iter(obs.values())) if isinstance(obs, dict) else obs[0]
    return obs


def batch_size(obs: Any) -> int:
    """The leading dimension of a batch (an array, a tensor, or a dict or tuple of them)."""
    return len(first_leaf(obs))


def describe_batch(obs: Any) -> str:
    """Shape and dtype of a batch, for error messages."""
    if isinstance(obs, dict):
        return "{" + ", ".join(f"{key!r}: {describe_batch(value)}" for key, value in obs.items()) + "}"
    if isinstance(obs, tuple):
        return "(" + ", ".join(describe_batch(value) for value in obs) + ")"
    return f"of shape {tuple(obs.shape)} and dtype {obs.dtype}"


def _name(potential: Potential) -> str:
    return getattr(potential, "__name__", None) or type(potential).__name__


def _where(mask: Batch, a: Batch | float, b: Batch) -> Batch:
    if isinstance(b, torch.Tensor):
        return torch.where(mask, a, b)
    return np.where(mask, a, b)


def _as_mask(mask: Any, like: Batch) -> Batch:
    if isinstance(like, torch.Tensor):
        return torch.as_tensor(mask, dtype=torch.bool, device=like.device)
    return np.asarray(mask, dtype=bool)


def shaping_term(phi: Batch, phi_next: Batch, terminated: Batch, gamma: float, scale: float) -> Batch:
    """``scale * (gamma * phi(s') - phi(s))`` with ``phi(s') = 0`` where ``terminated``.

    :param phi: ``phi(s)``, the running potential.
    :param phi_next: ``phi(s')`` of the true next observations (the last one where an
        episode ended).
    :param terminated: bool mask, same kind as ``phi_next``.
    """
    shaping = gamma * _where(terminated, 0.0, phi_next) - phi
    if scale != 1.0:
        shaping = scale * shaping
    return shaping


class PotentialTracker:
    """Running potential of each env and the shaping term of each step.

    :param potential: callable ``phi(obs_batch) -> (N,)``; a dynamic one also
        takes ``t=``, the number of transitions the tracker has seen so far.
    :param gamma: the learner's discount, in (0, 1].
    :param scale: multiplies the shaping term.
    """

    def __init__(self, potential: Potential, gamma: float = 0.99, scale: float = 1.0):
        if not callable(potential):
            raise ValueError(
                f"potential={potential!r} is not callable; pass a function phi(obs_batch) -> (N,)"
            )
        self.potential = potential
        self.gamma = check_gamma(gamma)
        self.scale = check_scale(scale)
        self.dynamic = "t" in _parameters(potential)
        self.num_transitions = 0
        self.phi: Batch | None = None

    def evaluate(self, obs: Batch) -> Batch:
        """``phi(obs)`` checked, at the tracker's current time for a dynamic potential."""
        return evaluate_potential(self.potential, obs, self.num_transitions if self.dynamic else None)

    def reset(self, obs: Batch, mask: Any = None) -> None:
        """Start episodes: the running potential becomes ``phi(obs)`` (only where ``mask``)."""
        phi = self.evaluate(obs)
        if mask is None or self.phi is None:
            self.phi = phi
        else:
            self.phi = _where(_as_mask(mask, phi), phi, self.phi)

    def step(
        self,
        next_obs: Batch,
        terminated: Any,
        ended: Any = None,
        final_obs: Batch | None = None,
        restarting: Any = None,
    ) -> Batch:
        """The shaping term of one batched transition; updates the running potential.

        :param next_obs: the observations the step returned.
        :param terminated: ``(N,)`` bools: the episode reached a terminal state, ``phi(s') = 0``.
        :param ended: ``(N,)`` bools for same-step autoreset: these episodes ended in this
            step and ``next_obs`` holds their reset observation; their true last
            observation is in ``final_obs``.
        :param final_obs: the true last observations, a full batch like ``next_obs``
            (rows of envs that did not end are ignored).
        :param restarting: ``(N,)`` bools for next-step autoreset: this step was a reset
            step, so ``F = 0`` and the running potential restarts from ``next_obs``.
        :return: ``scale * (gamma * phi(s') - phi(s))``, shape ``(N,)``.
        """
        if self.phi is None:
            raise RuntimeError("PotentialTracker.step called before reset; reset the env first")
        self.num_transitions += batch_size(next_obs)
        phi_obs = self.evaluate(next_obs)
        phi_next = phi_obs
        if final_obs is not None:
            phi_next = _where(_as_mask(ended, phi_obs), self.evaluate(final_obs), phi_obs)
        elif ended is not None and _as_mask(ended, phi_obs).any():
            raise ValueError(
                "episodes ended with a same-step reset but no final observation was given; "
                "pass the true last observations as final_obs"
            )
        shaping = shaping_term(self.phi, phi_next, _as_mask(terminated, phi_obs), self.gamma, self.scale)
        if restarting is not None:
            shaping = _where(_as_mask(restarting, phi_obs), 0.0, shaping)
        # The next transition starts from the observation returned: for an env that was
        # reset inside this step (same-step, or the reset step of next-step autoreset)
        # that is the first observation of its new episode.
        self.phi = phi_obs
        return shaping


def _parameters(potential: Potential) -> set[str]:
    try:
        return set(inspect.signature(potential).parameters)
    except (TypeError, ValueError):
        return set()
