"""PPO's networks: the actor-critic and the rollout's step of the policy."""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium
import numpy as np
import torch
from torch import nn

from rewardlab.common.networks import mlp
from rewardlab.common.running_stats import whiten


class ImageEncoder(nn.Module):
    """A small CNN over an image observation given flat or as ``(height, width, channels)``:
    MiniGrid's encoder in torch-ac and RLeXplore (2x2 convolutions of 16, 32 and 64 channels
    with ReLUs, a 2x2 max-pool after the first), flattened.

    :param image_shape: ``(height, width, channels)`` of one observation.
    """

    def __init__(self, image_shape: Sequence[int]) -> None:
        super().__init__()
        self.image_shape = tuple(int(size) for size in image_shape)
        height, width, channels = self.image_shape
        self.layers = nn.Sequential(
            nn.Conv2d(channels, 16, 2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 2), nn.ReLU(), nn.Conv2d(32, 64, 2), nn.ReLU(), nn.Flatten(),
        )
        with torch.no_grad():
            self.out_features = int(self.layers(torch.zeros(1, channels, height, width)).shape[1])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        images = obs.reshape(obs.shape[0], *self.image_shape).permute(0, 3, 1, 2)
        return self.layers(images)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs; the critic has one output per value head.

    Discrete actions: a categorical over logits. Box actions: a diagonal Gaussian with a
    state-independent log-std (SB3's and CleanRL's default); samples are not squashed,
    and the env is given them clipped to the action bounds.

    :param observation_space: one env's observation space (a ``Box``).
    :param action_space: one env's action space (``Discrete`` or 1-D ``Box``).
    :param pi_sizes: hidden sizes of the actor.
    :param vf_sizes: hidden sizes of the critic.
    :param num_heads: number of value heads.
    :param activation: ``"tanh"`` or ``"relu"``.
    :param log_std_init: initial log-std of the Gaussian.
    :param image_shape: observations are images of this ``(height, width, channels)``: the
        actor and the critic each read them through an :class:`ImageEncoder` of their own
        before their MLP. None: the MLPs read the flattened observation.
    """

    def __init__(
        self,
        observation_space: gymnasium.spaces.Box,
        action_space: gymnasium.spaces.Space,
        pi_sizes: Sequence[int],
        vf_sizes: Sequence[int],
        num_heads: int,
        activation: str,
        log_std_init: float,
        image_shape: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        obs_dim = int(np.prod(observation_space.shape))
        self.discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        action_dim = int(action_space.n) if self.discrete else int(action_space.shape[0])

        if image_shape is not None and int(np.prod(image_shape)) != obs_dim:
            raise ValueError(
                f"image_shape={list(image_shape)} holds {int(np.prod(image_shape))} values, the "
                f"observations {obs_dim} (shape {observation_space.shape}); give the image's "
                "(height, width, channels)"
            )

        def reader() -> tuple[list[nn.Module], int]:
            """The layers that read an observation for one network, and their output width."""
            if image_shape is not None:
                encoder = ImageEncoder(image_shape)
                return [encoder], encoder.out_features
            return ([nn.Flatten()] if len(observation_space.shape) > 1 else []), obs_dim

        layers, width = reader()
        self.actor = nn.Sequential(*layers, mlp(width, pi_sizes, action_dim, activation, output_gain=0.01))
        layers, width = reader()
        self.critic = nn.Sequential(*layers, mlp(width, vf_sizes, num_heads, activation, output_gain=1.0))
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Values of each head, ``(B, num_heads)``.

        :param obs: normalised observations ``(B, *obs_shape)``.
        """
        return self.critic(obs)

    def act(
        self,
        obs: torch.Tensor,
        generator: torch.Generator | None,
        deterministic: bool = False,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Sample actions (or take the mode when ``deterministic``).

        :param obs: normalised observations ``(B, *obs_shape)``.
        :param generator: the random stream to sample from (None: torch's global one).
        :param deterministic: take the most likely action.
        :param noise: the sample's noise drawn beforehand (:meth:`draw_noise`), as the
            compiled rollout passes it; None: drawn here from ``generator``.
        """
        out = self.actor(obs)
        if deterministic:
            return out.argmax(dim=-1) if self.discrete else out
        if noise is None:
            noise = self.draw_noise(out.shape, generator, out.device)
        return self._sample(out, noise)

    def sample(self, obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the rollout keeps of each step: actions sampled with ``noise``
        (:meth:`draw_noise`) and their log-probability under this policy, the behaviour
        policy of PPO's ratio (from the same forward pass).

        :param obs: normalised observations ``(B, *obs_shape)``.
        :param noise: the sample's noise.
        :return: ``(actions, log_prob)``, log-probabilities ``(B,)``.
        """
        out = self.actor(obs)
        actions = self._sample(out, noise)
        return actions, self._log_prob(out, actions)

    def _sample(self, out: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            # Gumbel-max: argmax(logits + Gumbel noise) samples the categorical, in 4 cheap ops
            # (Gumbel noise is -log(E) with E ~ Exponential(1)).
            return (out - noise.log()).argmax(dim=-1)
        return out + self.log_std.exp() * noise

    def draw_noise(
        self, shape: torch.Size | tuple[int, ...], generator: torch.Generator | None, device: torch.device
    ) -> torch.Tensor:
        """What :meth:`act` samples with, for outputs of ``shape``: Exponential(1) draws for
        the categorical's Gumbel-max, standard normal ones for the Gaussian."""
        if self.discrete:
            # -log(1 - U), U uniform on [0, 1): Exponential(1), finite, several times faster
            # than exponential_ on a CPU (one-off timing of a CartPole rollout's draw: 75 us
            # against 16 us)
            uniform = torch.rand(shape, generator=generator, device=device)
            return uniform.neg_().log1p_().neg_()
        return torch.randn(shape, generator=generator, device=device)

    def forward(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, values)`` of ``actions`` at ``obs``: what PPO's loss needs.

        :param obs: normalised observations ``(B, *obs_shape)``.
        :param actions: actions as sampled.
        """
        log_prob, entropy = self.log_prob_and_entropy(obs, actions)
        return log_prob, entropy, self.value(obs)

    def log_prob_and_entropy(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability of ``actions`` and the policy's entropy, both ``(B,)``.

        :param obs: normalised observations ``(B, *obs_shape)``.
        :param actions: actions as sampled (unclipped for Box actions).
        """
        out = self.actor(obs)
        return self._log_prob(out, actions), self._entropy(out)

    def _entropy(self, out: torch.Tensor) -> torch.Tensor:
        """The entropy of the distribution the actor's output ``out`` makes, ``(B,)``."""
        if self.discrete:
            log_probs = out.log_softmax(dim=-1)
            return -(log_probs.exp() * log_probs).sum(dim=-1)
        return (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std.expand_as(out)).sum(dim=-1)

    def _log_prob(self, out: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of ``actions`` under the distribution the actor's output ``out`` makes."""
        if self.discrete:
            return out.log_softmax(dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        log_std = self.log_std.expand_as(out)
        z = (actions - out) * torch.exp(-log_std)
        return (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)


class Sampler(nn.Module):
    """The rollout's step of the policy as a module of ``(obs, noise, mean, inv_std)``, and
    the memory ``state`` of a :class:`RecurrentActorCritic`: the observation normalisation
    (``RunningMeanStd.normalize``'s :func:`whiten`) and the policy's ``sample``, the function
    ``compile=True`` traces and compiles. It returns ``(actions, log_prob)``, and the memory
    after the step for a recurrent policy."""

    def __init__(self, policy: ActorCritic, normalize: bool, clip: float) -> None:
        super().__init__()
        self.policy, self.normalize, self.clip = policy, normalize, clip

    def forward(
        self, obs: torch.Tensor, noise: torch.Tensor, mean: torch.Tensor, inv_std: torch.Tensor,
        *state: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        if self.normalize:
            obs = whiten(obs, mean, inv_std, self.clip)
        return self.policy.sample(obs, noise, *state)


#: the recurrent cores PPO offers (``recurrent=``), by name
RECURRENT_CORES = ("gru", "lstm")


class RecurrentActorCritic(ActorCritic):
    """An actor-critic with memory: one feature reader (the flattened observation, or
    :class:`ImageEncoder` for images), a GRU or LSTM cell over the reader's features, and
    the actor's and critic's MLPs on the cell's output (CleanRL's ``ppo_atari_lstm``: one core
    shared by both).

    The memory is one tensor a row, ``(B, state_size)``: the GRU's hidden state, or the
    LSTM's hidden and cell states side by side (``[h, c]``); a row's output is its first
    ``hidden_size`` values either way. Zeros are the start of an episode.

    :param recurrent: ``"gru"`` or ``"lstm"``.
    :param hidden_size: the cell's width.
    Other parameters as :class:`ActorCritic`'s.
    """

    def __init__(
        self,
        observation_space: gymnasium.spaces.Box,
        action_space: gymnasium.spaces.Space,
        pi_sizes: Sequence[int],
        vf_sizes: Sequence[int],
        num_heads: int,
        activation: str,
        log_std_init: float,
        image_shape: Sequence[int] | None = None,
        recurrent: str = "gru",
        hidden_size: int = 128,
    ) -> None:
        nn.Module.__init__(self)
        if recurrent not in RECURRENT_CORES:
            raise ValueError(f"recurrent={recurrent!r} is not one of {list(RECURRENT_CORES)}")
        obs_dim = int(np.prod(observation_space.shape))
        self.discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        action_dim = int(action_space.n) if self.discrete else int(action_space.shape[0])
        if image_shape is not None:
            self.reader: nn.Module = ImageEncoder(image_shape)
            width = self.reader.out_features
        else:
            self.reader, width = nn.Flatten(), obs_dim
        self.kind, self.hidden_size = recurrent, int(hidden_size)
        self.core = (nn.GRUCell if recurrent == "gru" else nn.LSTMCell)(width, self.hidden_size)
        # CleanRL's initialisation of the core: orthogonal weights, zero biases
        for name, parameter in self.core.named_parameters():
            (nn.init.orthogonal_ if "weight" in name else nn.init.zeros_)(parameter)
        self.state_size = self.hidden_size * (1 if recurrent == "gru" else 2)
        self.actor = mlp(self.hidden_size, pi_sizes, action_dim, activation, output_gain=0.01)
        self.critic = mlp(self.hidden_size, vf_sizes, num_heads, activation, output_gain=1.0)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def initial_state(self, batch: int, device: torch.device | str) -> torch.Tensor:
        """The memory at the start of an episode: zeros ``(batch, state_size)``."""
        return torch.zeros((batch, self.state_size), device=device)

    def step(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The memory after reading one observation a row (``(B, state_size)``; its first
        ``hidden_size`` values are what the actor and critic read).

        :param obs: normalised observations ``(B, *obs_shape)``.
        :param state: the memory before them.
        """
        return self._cell(self.reader(obs), state)

    def _cell(self, features: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        if self.kind == "gru":
            return self.core(features, state)
        h, c = self.core(features, (state[:, : self.hidden_size], state[:, self.hidden_size :]))
        return torch.cat([h, c], dim=-1)

    def unroll(
        self, obs: torch.Tensor, state: torch.Tensor, ended: torch.Tensor
    ) -> torch.Tensor:
        """The memory after each step of a rollout, re-run from its start as the rollout ran
        it: step ``t`` reads ``obs[t]``, and where an episode ended at ``t`` the memory is
        zeroed before step ``t + 1`` (so nothing crosses an episode end; gradients flow
        back through the whole rollout: truncated backpropagation over its length).

        :param obs: normalised observations, time-major ``(T, B, *obs_shape)``.
        :param state: the memory before ``obs[0]``, ``(B, state_size)``.
        :param ended: bool ``(T, B)``, the episodes that ended at each step.
        :return: ``(T, B, state_size)``, each step's memory before any reset.
        """
        steps, batch = obs.shape[:2]
        features = self.reader(obs.reshape(steps * batch, *obs.shape[2:]))
        features = features.reshape(steps, batch, -1)
        keeps = (~ended).unsqueeze(-1).to(features.dtype)
        states = []
        for t in range(steps):
            state = self._cell(features[t], state)
            states.append(state)
            state = state * keeps[t]
        return torch.stack(states)

    def output(self, state: torch.Tensor) -> torch.Tensor:
        """What the actor and critic read of a memory ``(..., state_size)``."""
        return state[..., : self.hidden_size]

    def sample(  # type: ignore[override]
        self, obs: torch.Tensor, noise: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`ActorCritic.sample` with memory: ``(actions, log_prob, state)``, the
        memory after reading ``obs``.

        :param obs: normalised observations ``(B, *obs_shape)``.
        :param noise: the sample's noise.
        :param state: the memory before ``obs``.
        """
        state = self.step(obs, state)
        out = self.actor(self.output(state))
        actions = self._sample(out, noise)
        return actions, self._log_prob(out, actions), state

    def act(  # type: ignore[override]
        self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Actions and the memory after ``obs``: ``(actions, state)``.

        :param obs: normalised observations ``(B, *obs_shape)``.
        :param state: the memory before ``obs``.
        :param deterministic: take the most likely action.
        :param generator: the random stream to sample from (None: torch's global one).
        """
        state = self.step(obs, state)
        out = self.actor(self.output(state))
        if deterministic:
            return (out.argmax(dim=-1) if self.discrete else out), state
        return self._sample(out, self.draw_noise(out.shape, generator, out.device)), state

    def forward(  # type: ignore[override]
        self, obs: torch.Tensor, actions: torch.Tensor, state: torch.Tensor, ended: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, values)`` of a rollout's sequences, re-run from their start
        (:meth:`unroll`), flattened time-major to ``T * B`` rows: what PPO's loss needs.

        :param obs: normalised observations ``(T, B, *obs_shape)``.
        :param actions: actions as sampled, ``(T, B, ...)``.
        :param state: the memory before ``obs[0]``.
        :param ended: bool ``(T, B)``.
        """
        hidden = self.output(self.unroll(obs, state, ended)).flatten(0, 1)
        out = self.actor(hidden)
        return self._log_prob(out, actions.flatten(0, 1)), self._entropy(out), self.critic(hidden)
