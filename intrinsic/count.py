"""Count-based exploration bonuses: exact counts and SimHash pseudo-counts."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from rewardlab.common.networks import generator
from rewardlab.envs.core import WholeNumberBox
from rewardlab.intrinsic.base import Batch, IntrinsicModule, as_tensor, check_batch
from rewardlab.intrinsic.spaces import check_space, encode, flat_dim, indices

MODES = ("auto", "exact", "simhash")


class Count(IntrinsicModule):
    """A count-based bonus ``beta / sqrt(n(s'))``: MBIE-EB (Strehl & Littman 2008) with exact
    counts, and #Exploration (Tang et al. 2017) with SimHash pseudo-counts.

    ``n(s')`` is how many times the next observation has been seen, this visit included, so
    the first visit earns ``beta`` and the bonus decays as a state grows familiar. Counts
    advance in :meth:`compute`, row by row in batch order (the ``k``-th visit within one
    batch gets ``beta / sqrt(k + earlier visits)``); :meth:`update` has nothing to train.

    - ``mode="exact"`` counts observations themselves. ``"auto"`` picks it where the space
      says its values are whole numbers: ``Discrete``, ``MultiDiscrete``, ``MultiBinary``,
      integer and bool ``Box`` spaces, and :class:`~rewardlab.envs.WholeNumberBox` (the
      float one-hot and bit observations of rewardlab's envs, and of Gymnasium envs with
      ``Discrete`` or integer observations brought into the batched-env contract). A float
      observation that is not a whole number is then refused, since counting it exactly
      would make every visit new.
    - ``mode="simhash"`` counts the hash ``sgn(A g(s'))``, ``A`` a fixed ``hash_bits x D``
      matrix of N(0, 1) entries and ``g`` the flattened observation; ``"auto"`` picks it for
      other float ``Box`` spaces, whatever their bounds (a ``Box(0, 1)`` of continuous values
      included). ``hash_bits`` sets the granularity (the paper tries 16 to 256).
    - ``episodic=True`` counts within the current episode of each env (reset at its end;
      :meth:`compute` then needs ``dones`` and reads a batch time-major with ``num_envs``
      envs); ``False`` counts over the whole of training.

    Example::

        >>> import gymnasium as gym
        >>> import torch
        >>> from rewardlab.intrinsic import Count
        >>> count = Count(gym.spaces.Discrete(5), beta=1.0)
        >>> states = torch.tensor([0, 0, 3, 0])
        >>> count.compute(states, torch.zeros(4), states)
        tensor([1.0000, 0.7071, 1.0000, 0.5774])

    :param observation_space: the observation space of one env
    :param beta: the bonus of a first visit
    :param mode: ``"auto"``, ``"exact"`` or ``"simhash"``
    :param hash_bits: ``k``, the number of SimHash bits
    :param episodic: count per episode instead of over all of training
    :param num_envs: envs interleaved in a time-major batch (episodic counts); ``None``: a
        batch is one step of ``N`` envs
    :param seed: seed of the hash matrix
    :param name: the component name (``intrinsic/<name>``)
    """

    def __init__(
        self,
        observation_space: object,
        *,
        beta: float = 1.0,
        mode: str = "auto",
        hash_bits: int = 32,
        episodic: bool = False,
        num_envs: int | None = None,
        seed: int | None = None,
        name: str = "count",
    ) -> None:
        super().__init__(observation_space, num_envs, name)
        self.space = check_space(observation_space, "Count", "observation")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not isinstance(hash_bits, int) or hash_bits < 1:
            raise ValueError(f"hash_bits must be a positive int, got {hash_bits!r}")
        if beta <= 0:
            raise ValueError(f"beta must be positive, got {beta!r}")
        self.beta = float(beta)
        self.episodic = episodic
        self.mode = _resolve_mode(self.space, mode)
        if self.mode == "simhash":
            projection = torch.randn(hash_bits, flat_dim(self.space), generator=generator(seed))
            self.register_buffer("projection", projection)
        # Keys are the bytes of a code row: uint8 where every code fits, to keep them small.
        self._key_dtype = torch.uint8 if _fits_in_a_byte(self.space, self.mode) else torch.long
        self._counts: dict[bytes, int] = {}
        self._episode_counts: list[dict[bytes, int]] = []

    @property
    def distinct(self) -> int:
        """How many distinct observations (or hash codes) have been counted over training."""
        return len(self._counts)

    def visits(self, observations: Batch) -> torch.Tensor:
        """How many times each observation has been counted over training (counting nothing).

        :param observations: ``(N, *obs_shape)``
        :return: int64 ``(N,)`` on the CPU
        """
        unique, inverse = _group(
            self._codes(as_tensor(observations, "observations", self.device)).cpu()
        )
        keys = [row.tobytes() for row in unique.to(self._key_dtype).numpy()]
        return torch.tensor([self._counts.get(key, 0) for key in keys], dtype=torch.long)[inverse]

    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        """Count each ``next_obs``, return ``beta / sqrt(count)``; see :meth:`IntrinsicModule.compute`.

        :param obs: observations ``(N, *obs_shape)`` (checked, not used)
        :param actions: actions ``(N, ...)`` (checked, not used)
        :param next_obs: next observations ``(N, *obs_shape)``, the states counted
        :param dones: ``(N,)`` episode ends; required when ``episodic``
        """
        tensors = [
            (w, as_tensor(x, w, self.device))
            for w, x in (("obs", obs), ("actions", actions), ("next_obs", next_obs))
        ]
        size = check_batch(*tensors)
        codes = self._codes(tensors[2][1]).cpu()
        unique, inverse = _group(codes)
        keys = [row.tobytes() for row in unique.to(self._key_dtype).numpy()]
        lifelong = self._count_lifelong(keys, inverse)
        if self.episodic:
            if dones is None:
                raise ValueError(
                    f"Count {self.name!r} counts per episode (episodic=True): pass compute(dones=)"
                )
            done = as_tensor(dones, "dones", torch.device("cpu")).bool().flatten()
            check_batch(("next_obs", codes), ("dones", done))
            visits = self._count_episodic(keys, inverse, done, self.streams(size))
        else:
            visits = lifelong
        return (self.beta / torch.sqrt(visits.float())).to(self.device)

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        """Nothing to train: counts advance in :meth:`compute`, where transitions are seen.

        :param obs: observations (ignored)
        :param actions: actions (ignored)
        :param next_obs: next observations (ignored)
        """

    def get_extra_state(self) -> Any:
        return {
            "counts": dict(self._counts),
            "episode_counts": [dict(c) for c in self._episode_counts],
        }

    def set_extra_state(self, state: Any) -> None:
        self._counts = dict(state["counts"])
        self._episode_counts = [dict(c) for c in state["episode_counts"]]

    def _codes(self, next_obs: torch.Tensor) -> torch.Tensor:
        """One row of whole numbers per observation (kept in the batch's dtype: no copies)."""
        if self.mode == "simhash":
            return (encode(self.space, next_obs) @ self.projection.T > 0).to(torch.uint8)
        if isinstance(self.space, spaces.Box):
            flat = next_obs.reshape(len(next_obs), -1)
            if flat.is_floating_point() and bool(flat.frac().any()):
                raise ValueError(
                    f"Count {self.name!r} counts the observations of {self.space} exactly, but "
                    "got values that are not whole numbers; use Count(..., mode='simhash') "
                    "for continuous observations"
                )
            return flat
        return indices(self.space, next_obs)

    def _count_lifelong(self, keys: list[bytes], inverse: torch.Tensor) -> torch.Tensor:
        # The k-th occurrence of a key within the batch (in row order) is visit prior + k.
        prior = torch.tensor([self._counts.get(key, 0) for key in keys], dtype=torch.long)
        order = torch.argsort(inverse, stable=True)
        per_key = torch.bincount(inverse, minlength=len(keys))
        first_row = torch.cumsum(per_key, 0) - per_key
        occurrence = torch.empty_like(inverse)
        occurrence[order] = torch.arange(len(inverse)) - first_row[inverse[order]] + 1
        for key, before, seen in zip(keys, prior.tolist(), per_key.tolist(), strict=True):
            self._counts[key] = before + seen
        return prior[inverse] + occurrence

    def _count_episodic(
        self, keys: list[bytes], inverse: torch.Tensor, done: torch.Tensor, num_envs: int
    ) -> torch.Tensor:
        if len(self._episode_counts) != num_envs:
            if self._episode_counts:
                raise ValueError(
                    f"Count {self.name!r} tracks episodes of {len(self._episode_counts)} envs but "
                    f"got a batch of {num_envs}; give it num_envs= so that it reads rollouts "
                    "as (steps, num_envs)"
                )
            self._episode_counts = [{} for _ in range(num_envs)]
        visits = []
        for row, (key_index, ended) in enumerate(zip(inverse.tolist(), done.tolist(), strict=True)):
            episode = self._episode_counts[row % num_envs]
            key = keys[key_index]
            episode[key] = episode.get(key, 0) + 1
            visits.append(episode[key])
            if ended:
                episode.clear()
        return torch.tensor(visits, dtype=torch.long)


def _group(codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct rows of ``codes`` and each row's index among them, like
    ``torch.unique(codes, dim=0, return_inverse=True)`` but faster on wide rows: rows are
    grouped by a random projection, and the groups are checked to hold equal rows (on a
    collision the exact, slower grouping is used)."""
    values = codes if codes.is_floating_point() else codes.double()
    weights = torch.rand(
        codes.shape[1], generator=torch.Generator().manual_seed(0), dtype=values.dtype
    )
    unique_hashes, inverse = torch.unique(values @ weights, return_inverse=True)
    first = torch.full((len(unique_hashes),), len(codes), dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(len(codes)), reduce="amin")
    representatives = codes[first]
    if torch.equal(representatives[inverse], codes):
        return representatives, inverse
    return torch.unique(codes, dim=0, return_inverse=True)


def _fits_in_a_byte(space: spaces.Space, mode: str) -> bool:
    if mode == "simhash" or isinstance(space, spaces.MultiBinary):
        return True
    if isinstance(space, spaces.Box):
        return bool(np.all(space.low >= 0) and np.all(space.high <= 255))
    return False


def _resolve_mode(space: spaces.Space, mode: str) -> str:
    if mode != "auto":
        return mode
    if not isinstance(space, spaces.Box) or isinstance(space, WholeNumberBox):
        return "exact"
    if np.issubdtype(space.dtype, np.integer) or np.issubdtype(space.dtype, np.bool_):
        return "exact"
    return "simhash"  # a float Box says nothing of its values: Box(0, 1) may be continuous
