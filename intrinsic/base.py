"""What every intrinsic reward module shares: the interface, input checks, running statistics
and the whitening of observations.

A module rewards transitions ``(s, a, s')`` in batches. The caller gives it the flattened
batch of a rollout (``N`` rows) and gets one bonus per row:

- :meth:`IntrinsicModule.compute` returns the bonus ``(N,)``. Computing a bonus counts as
  seeing the transition: counts and reward-normalisation statistics advance here, so call
  it once per batch of new transitions.
- :meth:`IntrinsicModule.update` trains the module's own networks on the batch.

Modules that need the time order of a rollout (RND's discounted-return filter, episodic
counts) read the batch time-major: row ``t * num_envs + e`` is step ``t`` of env ``e``, as a
``(T, num_envs, ...)`` rollout flattens. With ``num_envs=None`` each call is one step of
``N`` parallel envs (the natural layout when the module is called once per env step).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rewardlab.common.running_stats import RunningMeanStd
from rewardlab.intrinsic.spaces import encode

Batch = torch.Tensor | np.ndarray


class IntrinsicModule(nn.Module, ABC):
    """Base class of intrinsic reward modules; see the module docstring for the protocol.

    Subclasses set :attr:`name` (the component is reported as ``intrinsic/<name>``) and
    implement :meth:`compute` and :meth:`update`. Being an ``nn.Module``, a module moves
    with ``.to(device)`` and saves with ``state_dict()``.

    Every caller passes ``dones`` (rewardlab's PPO and both SB3 integrations do); modules
    whose bonus forgets at episode ends set :attr:`episodic` and need them. Lifelong modules
    that can score observations without counting them implement
    ``novelty(observations) -> (N,)`` (NovelD's fusion reads it).

    :param observation_space: the observation space of one env
    :param num_envs: how many envs a time-major batch interleaves (see the module docstring)
    :param name: the name the bonus is reported under
    """

    name: str
    #: whether the bonus starts afresh at each episode end (per-episode counts, E3B)
    episodic: bool = False

    def __init__(self, observation_space: object, num_envs: int | None, name: str) -> None:
        super().__init__()
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self.observation_space = observation_space
        self.name = name
        self.num_envs = check_num_envs(num_envs)
        self.register_buffer("_device_anchor", torch.zeros(0), persistent=False)

    @property
    def device(self) -> torch.device:
        """The device the module's networks and statistics live on."""
        return self._device_anchor.device

    @abstractmethod
    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        """The bonus of each transition of a batch.

        :param obs: observations ``(N, *obs_shape)``
        :param actions: actions ``(N, *action_shape)``
        :param next_obs: the observations the actions led to, ``(N, *obs_shape)``; for a
            transition that ended its episode, the true last observation (``final_obs``,
            ``terminal_observation``), never the reset observation
        :param dones: ``(N,)`` booleans, true where the transition ended its episode; only
            modules that track episodes need them
        :return: float32 ``(N,)`` on :attr:`device`
        """

    @abstractmethod
    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        """Train the module on a batch of transitions (the same layout as :meth:`compute`).

        :param obs: observations ``(N, *obs_shape)``
        :param actions: actions ``(N, *action_shape)``
        :param next_obs: next observations ``(N, *obs_shape)``
        """

    def set_num_envs(self, num_envs: int) -> None:
        """Tell a module built with ``num_envs=None`` how many envs its batches interleave.

        Integrations call this with their env's ``num_envs``.

        :param num_envs: the number of envs
        :raises ValueError: the module was built for another number of envs
        """
        num_envs = check_num_envs(num_envs)
        if self.num_envs is not None and self.num_envs != num_envs:
            raise ValueError(
                f"{type(self).__name__} {self.name!r} was built with num_envs={self.num_envs} "
                f"but is used with {num_envs} envs"
            )
        self.num_envs = num_envs

    def streams(self, batch_size: int) -> int:
        """How many envs a batch of ``batch_size`` rows interleaves (time-major).

        :param batch_size: rows in the batch
        :raises ValueError: ``batch_size`` is not a multiple of ``num_envs``
        """
        if self.num_envs is None:
            return batch_size
        if batch_size % self.num_envs:
            raise ValueError(
                f"{type(self).__name__} {self.name!r} reads batches as (steps, num_envs="
                f"{self.num_envs}) time-major, but got {batch_size} rows, not a multiple of "
                f"{self.num_envs}"
            )
        return self.num_envs

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, observation_space={self.observation_space})"
        )


class WhitensObservations:
    """RND's whitening of observations (Burda et al. 2018), shared by the modules whose
    networks read observations (:class:`~rewardlab.intrinsic.RND`,
    :class:`~rewardlab.intrinsic.Surprise`).

    Flattened observations are whitened with a running mean and standard deviation
    (``obs_rms``) and clipped to ``[-obs_clip, obs_clip]``, so that the networks see inputs
    at unit scale whatever the env's units (raw ``uint8`` pixels and the same pixels
    ``/ 255`` give the same bonus). :meth:`init_obs_stats` initialises the statistics from a
    short random rollout (see :func:`~rewardlab.intrinsic.random_observations`); otherwise
    the first batch whitened does. The module folds observations in as it trains.
    """

    space: spaces.Space
    obs_rms: RunningMeanStd
    obs_clip: float
    device: torch.device

    def init_obs_stats(self, observations: Batch) -> None:
        """Fold a batch of observations (e.g. from a short random rollout) into the whitening.

        :param observations: ``(N, *obs_shape)``
        """
        self.obs_rms.update(encode(self.space, as_tensor(observations, "observations", self.device)))

    def whiten(self, raw: torch.Tensor) -> torch.Tensor:
        """``raw`` (flattened observations) whitened and clipped; statistics that have seen
        nothing yet are initialised from ``raw`` first.

        :param raw: ``(N, flat_dim)``, as :func:`~rewardlab.intrinsic.spaces.encode` makes them
        """
        if float(self.obs_rms.count) < 1.0:
            self.obs_rms.update(raw)
        # RND's variance floor (the statistics are float64)
        std = torch.sqrt(self.obs_rms.var + 1e-8)
        whitened = ((raw - self.obs_rms.mean) / std).to(raw.dtype)
        return whitened.clamp(-self.obs_clip, self.obs_clip)


def check_obs_clip(obs_clip: float) -> float:
    """Return ``obs_clip`` if it is a positive number, else raise ``ValueError``."""
    if isinstance(obs_clip, bool) or not isinstance(obs_clip, int | float) or not obs_clip > 0:
        raise ValueError(f"obs_clip must be a positive number, got {obs_clip!r}")
    return float(obs_clip)


def check_num_envs(num_envs: int | None) -> int | None:
    """Return ``num_envs`` if it is ``None`` or a positive int, else raise ``ValueError``.

    :param num_envs: the value to check
    """
    if num_envs is None:
        return None
    if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int or None, got {num_envs!r}")
    return int(num_envs)


def as_tensor(x: Batch, what: str, device: torch.device) -> torch.Tensor:
    """``x`` as a tensor on ``device``, refusing NaN.

    :param x: a tensor or numpy array (or anything ``numpy.asarray`` takes)
    :param what: how to call ``x`` in error messages (``"obs"``, ``"actions"``)
    :param device: where the tensor should be
    :raises ValueError: ``x`` holds NaN
    """
    tensor = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    tensor = tensor.to(device)
    # One pass (and one read-back) per batch; rows are located only to report an error.
    if tensor.is_floating_point() and bool(torch.isnan(tensor).any()):
        nan_rows = (
            torch.isnan(tensor.reshape(len(tensor), -1)).any(dim=1) if tensor.dim() else tensor
        )
        rows = nan_rows.nonzero().flatten()[:5].tolist()
        raise ValueError(
            f"{what} contains NaN (rows {rows}); an intrinsic bonus of NaN input is undefined"
        )
    return tensor


def check_batch(*named: tuple[str, torch.Tensor]) -> int:
    """Check that all tensors have the same number of rows and return it.

    :param named: ``(what, tensor)`` pairs
    :raises ValueError: row counts differ, or a tensor is a scalar
    """
    sizes = {}
    for what, tensor in named:
        if tensor.dim() == 0:
            raise ValueError(f"{what} must be a batch (N, ...), got a scalar")
        sizes[what] = tensor.shape[0]
    if len(set(sizes.values())) > 1:
        raise ValueError(f"batch sizes differ: {sizes}")
    return next(iter(sizes.values()))


class RunningRMS(nn.Module):
    """Running root mean square of all values seen, as a scale for bonuses.

    Dividing by it keeps a bonus's sign and its zero, and brings modules of different scales
    to a common one (about 1).

    :param epsilon: added to the mean square before the square root
    """

    mean_square: torch.Tensor
    count: torch.Tensor

    def __init__(self, epsilon: float = 1e-8) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.register_buffer("mean_square", torch.zeros(()))
        self.register_buffer("count", torch.zeros(()))

    @torch.no_grad()
    def update(self, values: torch.Tensor) -> None:
        """Fold ``values`` (any shape) into the statistic.

        :param values: the values
        """
        values = values.float().flatten()
        total = self.count + values.numel()
        self.mean_square += (values.square().sum() - self.mean_square * values.numel()) / total
        self.count.copy_(total)

    def scale(self, values: torch.Tensor) -> torch.Tensor:
        """``values / sqrt(mean_square + epsilon)``.

        :param values: the values to scale
        """
        return values / torch.sqrt(self.mean_square + self.epsilon)


class RewardForwardFilter(nn.Module):
    """The running discounted sum of rewards of each env, ``R_t = gamma * R_{t-1} + r_t``.

    It never resets at episode ends: RND treats the intrinsic return as non-episodic.

    :param gamma: the discount
    """

    returns: torch.Tensor

    def __init__(self, gamma: float) -> None:
        super().__init__()
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
        self.gamma = gamma
        self.register_buffer("returns", torch.zeros(0))

    @torch.no_grad()
    def __call__(self, rewards: torch.Tensor) -> torch.Tensor:
        """Advance the filter over ``rewards`` ``(T, num_envs)`` and return each ``R_t``.

        :param rewards: one row per step
        :raises ValueError: the number of envs changed since the last call
        """
        if self.returns.numel() == 0:
            self.returns = torch.zeros(rewards.shape[1], device=rewards.device)
        elif self.returns.shape[0] != rewards.shape[1]:
            raise ValueError(
                f"the return filter tracks {self.returns.shape[0]} envs but got a batch of "
                f"{rewards.shape[1]}; give the module num_envs= so that it reads rollouts as "
                "(steps, num_envs)"
            )
        out = torch.empty_like(rewards)
        running = self.returns
        for t in range(rewards.shape[0]):
            running = running * self.gamma + rewards[t]
            out[t] = running
        self.returns = running
        return out
