"""Random network distillation (RND)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rewardlab.common.networks import generator, minibatches, mlp, seeded
from rewardlab.common.running_stats import RunningMeanStd
from rewardlab.intrinsic.base import (
    Batch,
    IntrinsicModule,
    RewardForwardFilter,
    WhitensObservations,
    as_tensor,
    check_batch,
    check_obs_clip,
)
from rewardlab.intrinsic.spaces import check_space, encode, flat_dim


class RND(WhitensObservations, IntrinsicModule):
    """Random network distillation: Burda, Edwards, Storkey & Klimov (2018), "Exploration by
    Random Network Distillation".

    A fixed, randomly initialised target network ``f`` embeds the next observation; a
    predictor ``f_hat`` is trained to reproduce the embedding. The bonus is the prediction
    error ``mean((f_hat(s') - f(s'))**2)``: high where the predictor has seen few similar
    observations, so it measures how novel ``s'`` is.

    As in the paper:

    - observations are whitened with a running mean and standard deviation and clipped to
      ``[-obs_clip, obs_clip]``; :meth:`init_obs_stats` initialises the statistics from a
      short random rollout (see :func:`random_observations`), otherwise the first batch
      given to :meth:`compute` does;
    - the bonus is divided by a running standard deviation of the discounted intrinsic
      return (a forward filter ``R_t = gamma * R_{t-1} + r_t`` per env that ignores episode
      ends), not of the bonus itself; set ``num_envs`` so that a rollout batch is read as
      ``(steps, num_envs)`` time-major;
    - the predictor trains on a random ``update_proportion`` of each batch (one subset per
      :meth:`update`, ``epochs`` passes over it), so it does not learn too fast when many
      envs run in parallel.

    Example::

        >>> import gymnasium as gym
        >>> import torch
        >>> from rewardlab.intrinsic import RND
        >>> rnd = RND(gym.spaces.Box(-1.0, 1.0, (4,)), num_envs=2, seed=0)
        >>> obs = torch.rand(8, 4)
        >>> bonus = rnd.compute(obs, torch.zeros(8, dtype=torch.long), obs)
        >>> bonus.shape
        torch.Size([8])
        >>> rnd.update(obs, torch.zeros(8, dtype=torch.long), obs)

    :param observation_space: the observation space of one env (``Box``, ``Discrete``,
        ``MultiDiscrete`` or ``MultiBinary``)
    :param num_envs: envs interleaved in a time-major batch; ``None``: a batch is one step
    :param feature_dim: width of the embedding
    :param hidden_sizes: hidden layers of the target and predictor MLPs
    :param learning_rate: Adam step size of the predictor
    :param update_proportion: the fraction of each batch the predictor trains on
    :param epochs: passes over that subset per :meth:`update`
    :param minibatch_size: rows per gradient step
    :param gamma: discount of the intrinsic return whose deviation normalises the bonus
    :param normalize_reward: divide the bonus by that deviation
    :param obs_clip: the bound of whitened observations
    :param seed: seed of the networks and of the subset sampling
    :param name: the component name (``intrinsic/<name>``)
    """

    def __init__(
        self,
        observation_space: object,
        *,
        num_envs: int | None = None,
        feature_dim: int = 64,
        hidden_sizes: Sequence[int] = (128, 128),
        learning_rate: float = 1e-3,
        update_proportion: float = 0.25,
        epochs: int = 4,
        minibatch_size: int = 256,
        gamma: float = 0.99,
        normalize_reward: bool = True,
        obs_clip: float = 5.0,
        seed: int | None = None,
        name: str = "rnd",
    ) -> None:
        super().__init__(observation_space, num_envs, name)
        self.space = check_space(observation_space, "RND", "observation")
        if not 0.0 < update_proportion <= 1.0:
            raise ValueError(f"update_proportion must be in (0, 1], got {update_proportion!r}")
        for what, value in (
            ("epochs", epochs),
            ("minibatch_size", minibatch_size),
            ("feature_dim", feature_dim),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{what} must be a positive int, got {value!r}")
        self.update_proportion = update_proportion
        self.epochs = epochs
        self.minibatch_size = minibatch_size
        self.normalize_reward = normalize_reward
        self.obs_clip = check_obs_clip(obs_clip)
        in_features = flat_dim(self.space)
        with seeded(seed):
            self.target = mlp(in_features, hidden_sizes, feature_dim, activation="relu", init="default")
            self.predictor = mlp(in_features, hidden_sizes, feature_dim, activation="relu", init="default")
        self.target.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.predictor.parameters(), lr=learning_rate)
        self.obs_rms = RunningMeanStd((in_features,))
        self.return_filter = RewardForwardFilter(gamma)
        self.return_rms = RunningMeanStd(())
        self.generator = generator(seed)
        self.last_loss = float("nan")

    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        """The normalised prediction error of each ``next_obs``; see :meth:`IntrinsicModule.compute`.

        :param obs: observations ``(N, *obs_shape)`` (checked, not used)
        :param actions: actions ``(N, ...)`` (checked, not used)
        :param next_obs: next observations ``(N, *obs_shape)``
        :param dones: not used: the intrinsic return runs across episodes
        """
        raw = self._encode(obs, actions, next_obs)
        with torch.no_grad():
            x = self.whiten(raw)
            bonus = (self.predictor(x) - self.target(x)).square().mean(dim=1)
            if self.normalize_reward:
                steps = bonus.view(-1, self.streams(len(bonus)))
                self.return_rms.update(self.return_filter(steps).flatten())
                bonus = bonus / torch.sqrt(self.return_rms.var + 1e-8).to(bonus.dtype)
        return bonus

    def novelty(self, observations: Batch) -> torch.Tensor:
        """The prediction error of each observation, not normalised and counting nothing
        (NovelD's lifelong novelty: only its differences matter).

        :param observations: ``(N, *obs_shape)``
        :return: float32 ``(N,)`` on :attr:`device`
        """
        raw = encode(self.space, as_tensor(observations, "observations", self.device))
        with torch.no_grad():
            x = self.whiten(raw)
            return (self.predictor(x) - self.target(x)).square().mean(dim=1)

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        """Update the whitening with ``next_obs``, then train the predictor on a random subset.

        :param obs: observations ``(N, *obs_shape)`` (checked, not used)
        :param actions: actions ``(N, ...)`` (checked, not used)
        :param next_obs: next observations ``(N, *obs_shape)``
        """
        raw = self._encode(obs, actions, next_obs)
        self.obs_rms.update(raw)
        subset_size = max(1, round(self.update_proportion * len(raw)))
        subset = torch.randperm(len(raw), generator=self.generator)[:subset_size].to(raw.device)
        x = self.whiten(raw[subset])
        with torch.no_grad():
            target = self.target(x)
        for _ in range(self.epochs):
            for rows in minibatches(subset_size, self.minibatch_size, self.generator):
                rows = rows.to(x.device)
                loss = F.mse_loss(self.predictor(x[rows]), target[rows])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
        self.last_loss = loss.item()

    def _encode(self, obs: Batch, actions: Batch, next_obs: Batch) -> torch.Tensor:
        tensors = [
            (what, as_tensor(x, what, self.device))
            for what, x in (("obs", obs), ("actions", actions), ("next_obs", next_obs))
        ]
        check_batch(*tensors)
        return encode(self.space, tensors[2][1])


def random_observations(env: Any, num_steps: int, seed: int | None = None) -> torch.Tensor:
    """Observations of a random policy, for :meth:`RND.init_obs_stats`.

    Works with a rewardlab batched env, a Gymnasium env or vector env, and an SB3 ``VecEnv``
    (which it leaves mid-episode: reset it before training).

    :param env: the environment
    :param num_steps: how many steps to take (each step of a vector env gives ``num_envs`` rows)
    :param seed: seed of the action sampling
    :return: ``(num_steps * num_envs, *obs_shape)`` observations (float32, on the CPU)
    """
    if num_steps < 1:
        raise ValueError(f"num_steps must be at least 1, got {num_steps!r}")
    vectorised = hasattr(env, "num_envs")
    sb3 = hasattr(env, "step_async")
    env.action_space.seed(seed)
    obs = env.reset() if sb3 else env.reset(seed=seed)[0]
    rows = []
    for _ in range(num_steps):
        if sb3:
            obs = env.step(np.stack([env.action_space.sample() for _ in range(env.num_envs)]))[0]
        else:
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if not vectorised and (terminated or truncated):
                obs = env.reset()[0]
        rows.append(
            torch.as_tensor(np.asarray(obs.cpu() if isinstance(obs, torch.Tensor) else obs))
        )
    batch = torch.stack(rows).float()
    return batch.flatten(0, 1) if vectorised else batch
