"""Surprise: the error of a learned forward model in a learned feature space (ICM)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn

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
from rewardlab.intrinsic.spaces import categories, check_space, encode, flat_dim, indices


class Surprise(WhitensObservations, IntrinsicModule):
    """Curiosity as surprise: the Intrinsic Curiosity Module of Pathak, Agrawal, Efros &
    Darrell (2017), "Curiosity-driven Exploration by Self-supervised Prediction".

    An encoder ``phi`` maps observations to features; a forward model predicts
    ``phi(s')`` from ``(phi(s), a)``. The bonus ``eta / 2 * ||f_hat(phi(s), a) - phi(s')||^2``
    is how badly the agent's model of its own dynamics predicted what happened: it is high
    for transitions unlike those trained on, and falls as the model learns them.

    With ``inverse_model=True`` (ICM) an inverse model predicts ``a`` from
    ``(phi(s), phi(s'))`` and the encoder learns from it, so the features keep what the
    agent can control and drop what it cannot; the loss is
    ``(1 - forward_weight) * L_inverse + forward_weight * L_forward`` with
    ``forward_weight = 0.2`` (the paper's beta). The forward loss does not move the target
    features ``phi(s')``, which would otherwise collapse to a constant. With
    ``inverse_model=False`` the encoder is a fixed random network, the random-features
    variant of Burda et al. (2018), "Large-Scale Study of Curiosity-Driven Learning".

    Observations are whitened as RND whitens them (a running mean and standard deviation,
    clipped to ``[-obs_clip, obs_clip]``; see :class:`~rewardlab.intrinsic.base.WhitensObservations`),
    so the bonus is on one scale whatever the env's units: raw ``uint8`` pixels and the
    same pixels ``/ 255`` give the same bonus.

    Example::

        >>> import gymnasium as gym
        >>> import torch
        >>> from rewardlab.intrinsic import Surprise
        >>> icm = Surprise(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2), seed=0)
        >>> obs, actions, next_obs = torch.rand(8, 4), torch.randint(0, 2, (8,)), torch.rand(8, 4)
        >>> icm.compute(obs, actions, next_obs).shape
        torch.Size([8])
        >>> icm.update(obs, actions, next_obs)

    :param observation_space: the observation space of one env
    :param action_space: the action space of one env (``Discrete``, ``MultiDiscrete``,
        ``MultiBinary`` or ``Box``)
    :param feature_dim: width of ``phi``
    :param hidden_size: width of the hidden layer of each network
    :param inverse_model: learn ``phi`` with an inverse model (ICM); else keep it random
    :param forward_weight: the weight of the forward loss in the model loss
    :param eta: scale of the bonus
    :param learning_rate: Adam step size
    :param epochs: passes over the batch per :meth:`update`
    :param minibatch_size: rows per gradient step
    :param obs_clip: the bound of whitened observations
    :param seed: seed of the networks and of the minibatch shuffling
    :param name: the component name (``intrinsic/<name>``)
    """

    def __init__(
        self,
        observation_space: object,
        action_space: object,
        *,
        feature_dim: int = 64,
        hidden_size: int = 128,
        inverse_model: bool = True,
        forward_weight: float = 0.2,
        eta: float = 1.0,
        learning_rate: float = 1e-3,
        epochs: int = 1,
        minibatch_size: int = 256,
        obs_clip: float = 5.0,
        seed: int | None = None,
        name: str = "surprise",
    ) -> None:
        super().__init__(observation_space, None, name)
        self.space = check_space(observation_space, "Surprise", "observation")
        self.action_space = check_space(action_space, "Surprise", "action")
        if not 0.0 <= forward_weight <= 1.0:
            raise ValueError(f"forward_weight must be in [0, 1], got {forward_weight!r}")
        for what, value in (
            ("epochs", epochs),
            ("minibatch_size", minibatch_size),
            ("feature_dim", feature_dim),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{what} must be a positive int, got {value!r}")
        self.inverse_model = inverse_model
        self.forward_weight = forward_weight
        self.eta = eta
        self.epochs = epochs
        self.minibatch_size = minibatch_size
        self.obs_clip = check_obs_clip(obs_clip)
        self.obs_rms = RunningMeanStd((flat_dim(self.space),))
        action_dim = flat_dim(self.action_space)
        with seeded(seed):
            relu = {"activation": "relu", "init": "default"}
            self.encoder = mlp(flat_dim(self.space), [hidden_size], feature_dim, **relu)
            self.forward_model = mlp(feature_dim + action_dim, [hidden_size], feature_dim, **relu)
            self.inverse = (
                mlp(2 * feature_dim, [hidden_size], action_dim, **relu) if inverse_model else None
            )
        if not inverse_model:
            self.encoder.requires_grad_(False)
        trained: list[nn.Module] = [self.forward_model]
        if self.inverse is not None:
            trained += [self.encoder, self.inverse]
        self.optimizer = torch.optim.Adam(
            [p for m in trained for p in m.parameters()], lr=learning_rate
        )
        self.generator = generator(seed)
        self.last_loss = float("nan")

    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        """The forward model's error on each transition; see :meth:`IntrinsicModule.compute`.

        :param obs: observations ``(N, *obs_shape)``
        :param actions: actions ``(N, *action_shape)``
        :param next_obs: next observations ``(N, *obs_shape)``
        :param dones: not used
        """
        x, a, x_next = self._encode(obs, actions, next_obs)
        with torch.no_grad():
            x, x_next = self.whiten(x), self.whiten(x_next)
            predicted = self.forward_model(torch.cat([self.encoder(x), a], dim=1))
            return 0.5 * self.eta * (predicted - self.encoder(x_next)).square().sum(dim=1)

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        """Update the whitening with ``next_obs``, then train the forward model (and, with
        ``inverse_model``, the encoder and inverse model).

        :param obs: observations ``(N, *obs_shape)``
        :param actions: actions ``(N, *action_shape)``
        :param next_obs: next observations ``(N, *obs_shape)``
        """
        x, a, x_next = self._encode(obs, actions, next_obs)
        self.obs_rms.update(x_next)
        x, x_next = self.whiten(x), self.whiten(x_next)
        raw_actions = as_tensor(actions, "actions", self.device)
        for _ in range(self.epochs):
            for rows in minibatches(len(x), self.minibatch_size, self.generator):
                rows = rows.to(x.device)
                loss = self._loss(x[rows], a[rows], x_next[rows], raw_actions[rows])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
        self.last_loss = loss.item()

    def _loss(
        self, x: torch.Tensor, a: torch.Tensor, x_next: torch.Tensor, raw_actions: torch.Tensor
    ) -> torch.Tensor:
        features, next_features = self.encoder(x), self.encoder(x_next)
        predicted = self.forward_model(torch.cat([features, a], dim=1))
        forward_loss = 0.5 * (predicted - next_features.detach()).square().sum(dim=1).mean()
        if self.inverse is None:
            return forward_loss
        logits = self.inverse(torch.cat([features, next_features], dim=1))
        return (1 - self.forward_weight) * self._inverse_loss(
            logits, raw_actions
        ) + self.forward_weight * forward_loss

    def _inverse_loss(self, output: torch.Tensor, raw_actions: torch.Tensor) -> torch.Tensor:
        if isinstance(self.action_space, spaces.Box):
            return F.mse_loss(output, encode(self.action_space, raw_actions))
        if isinstance(self.action_space, spaces.MultiBinary):
            return F.binary_cross_entropy_with_logits(
                output, encode(self.action_space, raw_actions)
            )
        target = indices(self.action_space, raw_actions)
        losses = [
            F.cross_entropy(logits, target[:, i])
            for i, logits in enumerate(output.split(categories(self.action_space), dim=1))
        ]
        return torch.stack(losses).sum()

    def _encode(
        self, obs: Batch, actions: Batch, next_obs: Batch
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        tensors = [
            (w, as_tensor(x, w, self.device))
            for w, x in (("obs", obs), ("actions", actions), ("next_obs", next_obs))
        ]
        check_batch(*tensors)
        (_, o), (_, a), (_, o_next) = tensors
        return encode(self.space, o), encode(self.action_space, a), encode(self.space, o_next)
