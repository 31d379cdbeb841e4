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

    It counts over the whole of training (a lifelong count); :class:`~rewardlab.intrinsic.
    EpisodicCount` counts within each episode.

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
    :param num_envs: envs interleaved in a time-major batch; ``None``: a batch is one step
        of ``N`` envs
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
        self.mode = resolve_mode(self.space, mode)
        if self.mode == "simhash":
            projection = torch.randn(hash_bits, flat_dim(self.space), generator=generator(seed))
            self.register_buffer("projection", projection)
        # Keys are the bytes of a code row: uint8 where every code fits, to keep them small.
        self._key_dtype = torch.uint8 if _fits_in_a_byte(self.space, self.mode) else torch.long
        self._counts: dict[bytes, int] = {}

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
        :param dones: not used: the count runs across episodes
        """
        tensors = [
            (w, as_tensor(x, w, self.device))
            for w, x in (("obs", obs), ("actions", actions), ("next_obs", next_obs))
        ]
        check_batch(*tensors)
        codes = self._codes(tensors[2][1]).cpu()
        unique, inverse = _group(codes)
        keys = [row.tobytes() for row in unique.to(self._key_dtype).numpy()]
        visits = self._count_lifelong(keys, inverse)
        return (self.beta / torch.sqrt(visits.float())).to(self.device)

    def novelty(self, observations: Batch) -> torch.Tensor:
        """``beta / sqrt(n(s))`` of each observation with the counts so far, counting nothing
        (an unseen observation counts as one visit); NovelD's lifelong novelty.

        :param observations: ``(N, *obs_shape)``
        :return: float32 ``(N,)`` on :attr:`device`
        """
        visits = self.visits(observations).clamp(min=1)
        return (self.beta / torch.sqrt(visits.float())).to(self.device)

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        """Nothing to train: counts advance in :meth:`compute`, where transitions are seen.

        :param obs: observations (ignored)
        :param actions: actions (ignored)
        :param next_obs: next observations (ignored)
        """

    def get_extra_state(self) -> Any:
        return {"counts": dict(self._counts)}

    def set_extra_state(self, state: Any) -> None:
        self._counts = dict(state["counts"])

    def _codes(self, next_obs: torch.Tensor) -> torch.Tensor:
        return state_codes(self, next_obs)

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

def state_codes(module: Any, observations: torch.Tensor) -> torch.Tensor:
    """One row of whole numbers per observation, what a count counts (kept in the batch's
    dtype: no copies): the observation itself (``module.mode == "exact"``) or its SimHash
    bits ``sgn(A g(s))`` (``"simhash"``, with ``module.projection`` as ``A``).

    :param module: a counting module with ``space``, ``mode``, ``name`` (and ``projection``)
    :param observations: ``(N, *obs_shape)``
    :raises ValueError: an exact count of values that are not whole numbers
    """
    space = module.space
    if module.mode == "simhash":
        return (encode(space, observations) @ module.projection.T > 0).to(torch.uint8)
    if isinstance(space, spaces.Box):
        flat = observations.reshape(len(observations), -1)
        if flat.is_floating_point() and bool(flat.frac().any()):
            raise ValueError(
                f"{type(module).__name__} {module.name!r} counts the observations of {space} "
                "exactly, but got values that are not whole numbers; pass mode='simhash' for "
                "continuous observations"
            )
        return flat
    return indices(space, observations)


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


def resolve_mode(space: spaces.Space, mode: str) -> str:
    """``mode``, with ``"auto"`` resolved for ``space`` (see :class:`Count`)."""
    if mode != "auto":
        return mode
    if not isinstance(space, spaces.Box) or isinstance(space, WholeNumberBox):
        return "exact"
    if np.issubdtype(space.dtype, np.integer) or np.issubdtype(space.dtype, np.bool_):
        return "exact"
    return "simhash"  # a float Box says nothing of its values: Box(0, 1) may be continuous
