"""Episodic novelty: bonuses that forget at every episode end.

- :class:`EpisodicCount` counts states within the current episode of each env ("Revisiting
  intrinsic reward", ICLR 2023; NovelD's first-visit gate), for observations that can be
  counted.
- :class:`E3B` is the elliptical bonus of Henaff et al. (2022) for observations that cannot:
  ``phi(s')^T C^-1 phi(s')`` with ``C`` the covariance of the episode's embeddings so far.

Both read a rollout time-major (row ``t * num_envs + e``) and need ``dones`` in
:meth:`~rewardlab.intrinsic.IntrinsicModule.compute`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from gymnasium import spaces

from rewardlab.common.networks import generator, minibatches, mlp, seeded
from rewardlab.common.running_stats import RunningMeanStd
from rewardlab.intrinsic.base import (
    Batch,
    IntrinsicModule,
    WhitensObservations,
    as_tensor,
    check_batch,
    check_obs_clip,
)
from rewardlab.intrinsic.count import MODES, resolve_mode, state_codes
from rewardlab.intrinsic.spaces import check_space, encode, flat_dim

BONUSES = ("inverse_sqrt", "first_visit")

# Odd 64-bit constants (the golden ratio's and two of splitmix64's) that spread the env and
# the episode of a row over the key's bits; int64 products wrap, which a hash wants.
_ENV_MIX = -7046029254386353131
_EPISODE_MIX = -4658895280553007687
_STATE_MIX = -7723592293110705685


def _dones(dones: Batch | None, size: int, module: IntrinsicModule) -> torch.Tensor:
    """``dones`` as ``(size,)`` booleans on the module's device, or a clear error."""
    if dones is None:
        raise ValueError(
            f"{type(module).__name__} {module.name!r} is episodic: its compute needs dones= "
            "(the episode ends of the batch's transitions)"
        )
    done = as_tensor(dones, "dones", module.device).bool().flatten()
    if len(done) != size:
        raise ValueError(f"dones has {len(done)} rows for a batch of {size} transitions")
    return done


class EpisodicCount(IntrinsicModule):
    """A per-episode count bonus: ``beta / sqrt(n_ep(s'))`` (``bonus="inverse_sqrt"``, the
    episodic count of "Revisiting intrinsic reward for exploration in procedurally generated
    environments", 2023) or ``beta * [n_ep(s') == 1]`` (``bonus="first_visit"``, NovelD's
    gate), with ``n_ep(s')`` the visits of ``s'`` in the current episode of its env, this one
    included. Counts start afresh after every transition whose ``dones`` is true.

    Observations are counted exactly or through SimHash bits as :class:`~rewardlab.intrinsic.
    Count` does (``mode``), then hashed to 64 bits per row; counting is tensor code over the
    whole rollout (a sort), with the episodes still running at its end carried to the next
    batch. After :meth:`compute`, :attr:`last_visits` holds each row's ``n_ep(s')`` (the
    fusions read it for NovelD's gate).

    Example::

        >>> import gymnasium as gym
        >>> import torch
        >>> from rewardlab.intrinsic import EpisodicCount
        >>> count = EpisodicCount(gym.spaces.Discrete(5), num_envs=1)
        >>> states = torch.tensor([0, 0, 3, 0])
        >>> count.compute(states, torch.zeros(4), states, dones=torch.tensor([0, 1, 0, 0]))
        tensor([1.0000, 0.7071, 1.0000, 1.0000])

    :param observation_space: the observation space of one env
    :param beta: the bonus of a first visit
    :param bonus: ``"inverse_sqrt"`` or ``"first_visit"``
    :param mode: ``"auto"``, ``"exact"`` or ``"simhash"`` (see :class:`~rewardlab.intrinsic.Count`)
    :param hash_bits: the number of SimHash bits
    :param num_envs: envs interleaved in a time-major batch; ``None``: a batch is one step
    :param seed: seed of the SimHash matrix and of the row hash
    :param name: the component name (``intrinsic/<name>``)
    """

    episodic = True

    def __init__(
        self,
        observation_space: object,
        *,
        beta: float = 1.0,
        bonus: str = "inverse_sqrt",
        mode: str = "auto",
        hash_bits: int = 32,
        num_envs: int | None = None,
        seed: int | None = None,
        name: str = "episodic",
    ) -> None:
        super().__init__(observation_space, num_envs, name)
        self.space = check_space(observation_space, "EpisodicCount", "observation")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if bonus not in BONUSES:
            raise ValueError(f"bonus must be one of {BONUSES}, got {bonus!r}")
        if isinstance(hash_bits, bool) or not isinstance(hash_bits, int) or hash_bits < 1:
            raise ValueError(f"hash_bits must be a positive int, got {hash_bits!r}")
        if not beta > 0:
            raise ValueError(f"beta must be positive, got {beta!r}")
        self.beta = float(beta)
        self.bonus = bonus
        self.mode = resolve_mode(self.space, mode)
        gen = generator(seed)
        if self.mode == "simhash":
            projection = torch.randn(hash_bits, flat_dim(self.space), generator=gen)
            self.register_buffer("projection", projection)
        # Two exact float64 projections of the codes (each value times a 20-bit weight stays
        # far below 2**53), mixed into one int64: distinct rows collide with odds ~2**-40.
        width = hash_bits if self.mode == "simhash" else _code_width(self.space)
        weights = torch.randint(1, 2**20, (width, 2), generator=gen, dtype=torch.int64)
        self.register_buffer("hash_weights", weights.double())
        # The episodes running at the end of the last batch: a key per (env, state), its
        # visits and its env (saved through get_extra_state: their length varies).
        for buffer in ("_open_keys", "_open_counts", "_open_env_ids"):
            self.register_buffer(buffer, torch.zeros(0, dtype=torch.int64), persistent=False)
        self._open_envs: int | None = None
        self.last_visits = torch.zeros(0, dtype=torch.int64)

    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        """Count each ``next_obs`` in its episode; see :meth:`IntrinsicModule.compute`.

        :param obs: observations ``(N, *obs_shape)`` (checked, not used)
        :param actions: actions ``(N, ...)`` (checked, not used)
        :param next_obs: next observations ``(N, *obs_shape)``, the states counted
        :param dones: ``(N,)`` episode ends (required)
        """
        tensors = [
            (w, as_tensor(x, w, self.device))
            for w, x in (("obs", obs), ("actions", actions), ("next_obs", next_obs))
        ]
        size = check_batch(*tensors)
        done = _dones(dones, size, self)
        num_envs = self.streams(size)
        if self._open_envs is None:
            self._open_envs = num_envs
        elif self._open_envs != num_envs:
            raise ValueError(
                f"EpisodicCount {self.name!r} tracks episodes of {self._open_envs} envs but got "
                f"a batch of {num_envs}; give it num_envs= so that it reads rollouts as "
                "(steps, num_envs)"
            )
        visits = self._count(self.state_hash(tensors[2][1]), done.view(-1, num_envs))
        self.last_visits = visits
        if self.bonus == "first_visit":
            return self.beta * (visits == 1).float()
        return self.beta / torch.sqrt(visits.float())

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        """Nothing to train: counts advance in :meth:`compute`.

        :param obs: observations (ignored)
        :param actions: actions (ignored)
        :param next_obs: next observations (ignored)
        """

    def state_hash(self, observations: torch.Tensor) -> torch.Tensor:
        """A 64-bit hash ``(N,)`` of each observation's counted code.

        :param observations: ``(N, *obs_shape)``
        """
        codes = state_codes(self, observations)
        halves = []
        # in slices, so that a rollout of a million rows never holds them all as float64
        for start in range(0, len(codes), 65536):
            halves.append(codes[start : start + 65536].double() @ self.hash_weights)
        if not halves:
            return torch.zeros(0, dtype=torch.int64, device=self.device)
        pair = torch.cat(halves).long()
        return pair[:, 0] * _STATE_MIX + pair[:, 1]

    def _count(self, state: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Visits of each row's state in its episode, ``(T * N,)``; carries the open episodes.

        :param state: ``(T * N,)`` state hashes, time-major
        :param done: ``(T, N)`` episode ends
        """
        steps, num_envs = done.shape
        env = torch.arange(num_envs, device=state.device).expand(steps, num_envs)
        # the episode of each row within the batch: 0 continues the episode carried in
        episode = (done.long().cumsum(0) - done.long()).reshape(-1)
        env = env.reshape(-1)
        keys = _key(state, env, episode)
        # Visits = the open episode's count (weight) + this batch's rows so far, per key.
        all_keys = torch.cat([self._open_keys, keys])
        weights = torch.cat([self._open_counts, torch.ones_like(keys)])
        sorted_keys, order = torch.sort(all_keys, stable=True)
        sorted_weights = weights[order]
        running = sorted_weights.cumsum(0)
        starts = torch.ones_like(sorted_keys, dtype=torch.bool)
        starts[1:] = sorted_keys[1:] != sorted_keys[:-1]
        group = starts.long().cumsum(0) - 1
        before_group = (running - sorted_weights)[starts]
        counts = torch.empty_like(running)
        counts[order] = running - before_group[group]
        visits = counts[len(self._open_keys) :]

        # The episodes still open after the batch: rows after each env's last done, plus the
        # carried episode of an env that did not end in this batch.
        ends = done.long().sum(0)
        open_rows = episode == ends[env]
        kept = ends[self._open_env_ids] == 0
        open_env = torch.cat([self._open_env_ids[kept], env[open_rows]])
        open_keys = torch.cat([
            self._open_keys[kept],
            _key(state[open_rows], env[open_rows], torch.zeros_like(env[open_rows])),
        ])  # fmt: skip
        open_weights = torch.cat([self._open_counts[kept], torch.ones_like(env[open_rows])])
        unique, inverse = torch.unique(open_keys, return_inverse=True)
        self._open_keys = unique
        self._open_counts = torch.zeros_like(unique).scatter_add_(0, inverse, open_weights)
        self._open_env_ids = torch.zeros_like(unique).scatter_(0, inverse, open_env)
        return visits

    def get_extra_state(self) -> Any:
        return {
            "open_envs": self._open_envs,
            "open": [t.cpu() for t in (self._open_keys, self._open_counts, self._open_env_ids)],
        }

    def set_extra_state(self, state: Any) -> None:
        self._open_envs = state["open_envs"]
        keys, counts, env_ids = (t.to(self.device) for t in state["open"])
        self._open_keys, self._open_counts, self._open_env_ids = keys, counts, env_ids


def _key(state: torch.Tensor, env: torch.Tensor, episode: torch.Tensor) -> torch.Tensor:
    """One int64 key per (state, env, episode) row."""
    return state * _STATE_MIX + env * _ENV_MIX + episode * _EPISODE_MIX


def _code_width(space: spaces.Space) -> int:
    """Columns of an exact code of ``space`` (see :func:`~rewardlab.intrinsic.count.state_codes`)."""
    if isinstance(space, spaces.Box):
        return int(torch.tensor(space.shape).prod()) if space.shape else 1
    if isinstance(space, spaces.Discrete):
        return 1
    return int(torch.tensor(space.shape).prod())


class E3B(WhitensObservations, IntrinsicModule):
    """Exploration via elliptical episodic bonuses: Henaff, Raileanu, Jiang & Rocktäschel
    (2022). The bonus of ``s'`` is ``phi(s')^T C^-1 phi(s')`` with
    ``C = ridge * I + sum phi(s) phi(s)^T`` over the states of the episode so far; ``C^-1``
    is kept per env and updated with the Sherman-Morrison formula after each step, and reset
    where an episode ends. It is a count for states that cannot be counted: a state close to
    the span of the episode's embeddings earns little.

    ``phi`` is learned, as in E3B, by inverse dynamics: an encoder of the (whitened)
    observation and a head that predicts ``a`` from ``(phi(s), phi(s'))`` (cross-entropy for
    ``Discrete`` actions, squared error for ``Box`` ones), trained in :meth:`update` on a
    random ``update_proportion`` of each batch.

    :param observation_space: the observation space of one env
    :param action_space: the action space of one env (``Discrete`` or ``Box``)
    :param num_envs: envs interleaved in a time-major batch; ``None``: a batch is one step
    :param feature_dim: the width of ``phi``
    :param hidden_sizes: hidden layers of the encoder
    :param ridge: ``lambda``, the prior covariance (E3B's 0.1)
    :param learning_rate: Adam step size
    :param update_proportion: the fraction of each batch trained on
    :param epochs: passes over that subset per :meth:`update`
    :param minibatch_size: rows per gradient step
    :param obs_clip: the bound of whitened observations
    :param seed: seed of the networks and of the subset sampling
    :param name: the component name (``intrinsic/<name>``)
    """

    episodic = True

    def __init__(
        self,
        observation_space: object,
        action_space: object,
        *,
        num_envs: int | None = None,
        feature_dim: int = 32,
        hidden_sizes: Sequence[int] = (128,),
        ridge: float = 0.1,
        learning_rate: float = 1e-3,
        update_proportion: float = 0.25,
        epochs: int = 1,
        minibatch_size: int = 256,
        obs_clip: float = 5.0,
        seed: int | None = None,
        name: str = "e3b",
    ) -> None:
        super().__init__(observation_space, num_envs, name)
        self.space = check_space(observation_space, "E3B", "observation")
        if not isinstance(action_space, spaces.Discrete | spaces.Box):
            raise ValueError(f"E3B takes Discrete or Box actions, got the action space {action_space!r}")
        if not 0.0 < update_proportion <= 1.0:
            raise ValueError(f"update_proportion must be in (0, 1], got {update_proportion!r}")
        if not ridge > 0:
            raise ValueError(f"ridge must be positive, got {ridge!r}")
        for what, value in (("epochs", epochs), ("minibatch_size", minibatch_size),
                            ("feature_dim", feature_dim)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{what} must be a positive int, got {value!r}")
        self.action_space = action_space
        self.ridge = float(ridge)
        self.feature_dim = feature_dim
        self.update_proportion = update_proportion
        self.epochs = epochs
        self.minibatch_size = minibatch_size
        self.obs_clip = check_obs_clip(obs_clip)
        in_features = flat_dim(self.space)
        self.discrete_actions = isinstance(action_space, spaces.Discrete)
        action_dim = int(action_space.n) if self.discrete_actions else flat_dim(action_space)
        with seeded(seed):
            self.encoder = mlp(in_features, hidden_sizes, feature_dim, activation="relu", init="default")
            self.inverse = mlp(2 * feature_dim, hidden_sizes, action_dim, activation="relu", init="default")
        self.optimizer = torch.optim.Adam(
            [*self.encoder.parameters(), *self.inverse.parameters()], lr=learning_rate
        )
        self.obs_rms = RunningMeanStd((in_features,))
        # C^-1 of each env's running episode; not saved (a loaded module starts new episodes)
        self.register_buffer(
            "inverse_covariance", torch.zeros(0, feature_dim, feature_dim), persistent=False
        )
        self.generator = generator(seed)
        self.last_loss = float("nan")

    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        """The elliptical bonus of each ``next_obs`` in its episode; see
        :meth:`IntrinsicModule.compute`.

        :param obs: observations ``(N, *obs_shape)`` (checked, not used)
        :param actions: actions ``(N, ...)`` (checked, not used)
        :param next_obs: next observations ``(N, *obs_shape)``
        :param dones: ``(N,)`` episode ends (required)
        """
        _, _, raw_next = self._encode(obs, actions, next_obs)
        done = _dones(dones, len(raw_next), self)
        num_envs = self.streams(len(raw_next))
        eye = torch.eye(self.feature_dim, device=self.device) / self.ridge
        inverse = self.inverse_covariance
        if inverse.shape[0] != num_envs:
            if inverse.shape[0]:
                raise ValueError(
                    f"E3B {self.name!r} tracks episodes of {inverse.shape[0]} envs but got a "
                    f"batch of {num_envs}; give it num_envs= so that it reads rollouts as "
                    "(steps, num_envs)"
                )
            inverse = eye.expand(num_envs, -1, -1).clone()
        with torch.no_grad():
            features = self.encoder(self.whiten(raw_next)).view(-1, num_envs, self.feature_dim)
        done = done.view(-1, num_envs)
        bonuses = []
        for t in range(features.shape[0]):
            phi = features[t]
            u = torch.bmm(inverse, phi.unsqueeze(-1)).squeeze(-1)  # C^-1 phi
            b = (phi * u).sum(-1)
            bonuses.append(b)
            inverse = inverse - u.unsqueeze(-1) * u.unsqueeze(-2) / (1.0 + b).view(-1, 1, 1)
            inverse = torch.where(done[t].view(-1, 1, 1), eye, inverse)
        self.inverse_covariance = inverse
        return torch.stack(bonuses).reshape(-1)

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        """Fold the observations into the whitening and train the encoder by inverse dynamics
        on a random subset.

        :param obs: observations ``(N, *obs_shape)``
        :param actions: actions ``(N, ...)``
        :param next_obs: next observations ``(N, *obs_shape)``
        """
        raw, action, raw_next = self._encode(obs, actions, next_obs)
        self.obs_rms.update(raw_next)
        subset_size = max(1, round(self.update_proportion * len(raw)))
        subset = torch.randperm(len(raw), generator=self.generator)[:subset_size].to(raw.device)
        x, x_next, a = self.whiten(raw[subset]), self.whiten(raw_next[subset]), action[subset]
        for _ in range(self.epochs):
            for rows in minibatches(subset_size, self.minibatch_size, self.generator):
                rows = rows.to(x.device)
                joint = torch.cat([self.encoder(x[rows]), self.encoder(x_next[rows])], dim=1)
                predicted = self.inverse(joint)
                if self.discrete_actions:
                    loss = F.cross_entropy(predicted, a[rows].long().flatten())
                else:
                    loss = F.mse_loss(predicted, a[rows].reshape(len(rows), -1).float())
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
        self.last_loss = loss.item()

    def _encode(
        self, obs: Batch, actions: Batch, next_obs: Batch
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        tensors = [
            (what, as_tensor(x, what, self.device))
            for what, x in (("obs", obs), ("actions", actions), ("next_obs", next_obs))
        ]
        check_batch(*tensors)
        return encode(self.space, tensors[0][1]), tensors[1][1], encode(self.space, tensors[2][1])


__all__ = ["BONUSES", "E3B", "EpisodicCount"]
