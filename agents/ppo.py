"""Proximal Policy Optimisation on batched torch environments, with a decomposed critic.

The whole algorithm reads top to bottom in ``PPO.learn``: collect a rollout (actions and
their behaviour log-probabilities), score it (values, intrinsic rewards), turn rewards into
advantages per value head, update, log. Every detail that decides whether PPO works is written out
where it happens:

- the env and the networks live on one device and nothing crosses to numpy in the loop;
  the rollout loop does the least it can per step (normalise, act, step, store) and
  everything else is batched over the whole rollout afterwards;
- truncated episodes bootstrap from ``info["final_obs"]`` (the true last observation of
  an episode that a same-step autoreset replaced): ``delta = r + gamma * V(final_obs)``
  when truncated, ``r`` alone when terminated;
- one value head per reward component (``value_heads=``), each with its own GAE and
  discount; the policy follows the weighted sum of the heads' advantages. With heads
  ``extrinsic`` (episodic) and ``intrinsic`` (non-episodic) this is RND's two-stream critic;
- running observation normalisation, frozen during a rollout and its update (so the
  behaviour log-probabilities stay exact) and refreshed after;
- reward scaling by the running std of the discounted return, per head (SB3's
  ``VecNormalize``); advantage normalisation per minibatch; SB3's clipped value loss;
  linear learning-rate annealing; gradient-norm clipping; early stop on target KL.

Example::

    from rewardlab import envs
    from rewardlab.agents import PPO

    env = envs.make("CartPole-v1", num_envs=64, device="cpu", seed=0)
    model = PPO(env, seed=0, n_steps=32, learning_rate=1e-3, gamma=0.98, gae_lambda=0.8)
    model.learn(100_000)
    actions, _ = model.predict(env.reset()[0])
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch
from torch import nn

from rewardlab.agents.base import Learner
from rewardlab.agents.common import (
    HyperparameterCheck,
    LearnerConfig,
    check_batched,
    steps_bar,
)
from rewardlab.agents.logger import TensorBoardLogger
from rewardlab.common.networks import mlp
from rewardlab.common.running_stats import RunningMeanStd, whiten
from rewardlab.envs.core import Batched
from rewardlab.intrinsic.base import IntrinsicModule

HEAD_OPTIONS = ("gamma", "weight", "episodic")
SUMMED_REWARD_HEAD = "reward"
INTRINSIC_COMPONENT = "intrinsic"



#: ``reward_fn(obs, actions, next_obs, terminated, env_reward) -> (reward, components)``
#: on a rollout's transitions (see :class:`PPO`)
RolloutReward = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    tuple[torch.Tensor, Mapping[str, torch.Tensor]],
]


@dataclass(frozen=True)
class ValueHead:
    """One value head of the critic: the reward component it predicts and how.

    :param component: name of the reward component (``SUMMED_REWARD_HEAD`` for the env's reward).
    :param gamma: its discount.
    :param weight: its advantage's weight in the policy loss.
    :param episodic: whether its returns stop at episode ends (False: RND's intrinsic stream).
    """

    component: str
    gamma: float
    weight: float = 1.0
    episodic: bool = True


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    episode_ended: torch.Tensor,
    gamma: float | torch.Tensor,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over a rollout, bootstrapping truncated episodes.

    ``next_values[t]`` is the value of the state that step ``t`` really led to: for an env
    whose episode ended at ``t`` that is ``V(info["final_obs"])``, not the value of the
    reset observation. Then::

        delta[t] = rewards[t] + gamma * next_values[t] * (1 - terminated[t]) - values[t]
        A[t]     = delta[t] + gamma * gae_lambda * (1 - episode_ended[t]) * A[t + 1]

    so a terminated step adds no future, a truncated step adds ``gamma * V(final_obs)``
    (what SB3 adds to its reward), and no advantage leaks across an episode end. For a
    non-episodic stream pass the next rollout value as ``next_values`` and all-False flags.

    :param rewards: ``(T, N, ...)``.
    :param values: ``V(obs[t])``, same shape.
    :param next_values: the value of the state reached at each step, same shape.
    :param terminated: bool, broadcastable to ``rewards``.
    :param episode_ended: bool (terminated or truncated), broadcastable to ``rewards``.
    :param gamma: discount, a float or a tensor broadcastable to one step (per value head).
    :param gae_lambda: GAE's lambda.
    :return: ``(advantages, returns)`` with ``returns = advantages + values``.
    """
    not_terminated = (~terminated).to(rewards.dtype)
    continues = gamma * gae_lambda * (~episode_ended).to(rewards.dtype)
    deltas = rewards + gamma * next_values * not_terminated - values
    advantages = torch.empty_like(deltas)
    running = torch.zeros_like(deltas[0])
    for t in reversed(range(deltas.shape[0])):
        # A[t] = delta[t] + gamma * lambda * (1 - ended[t]) * A[t + 1], one operator a step
        running = torch.addcmul(deltas[t], continues[t], running, out=advantages[t])
    return advantages, advantages + values


def episode_sums(
    per_step: torch.Tensor, running: torch.Tensor, episode_ended: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sums of per-step values over each episode, at every step of a rollout.

    :param per_step: ``(T, N, K)``: K values per step and env (rewards, a 1 to count steps).
    :param running: ``(N, K)``, the sums of the episodes under way when the rollout began.
    :param episode_ended: bool ``(T, N)``.
    :return: ``(sums, running)``: ``sums[t]`` the sums of each env's episode up to and
        including step ``t`` (its total where the episode ended at ``t``), ``running`` the
        sums to carry into the next rollout.
    """
    continues = (~episode_ended).unsqueeze(-1).to(per_step.dtype)
    sums = torch.empty_like(per_step)
    previous, keeps = running, torch.ones_like(continues[0])
    for t in range(per_step.shape[0]):
        # sums[t] = per_step[t] + sums[t - 1] while the episode goes on, one operator a step
        previous = torch.addcmul(per_step[t], previous, keeps, out=sums[t])
        keeps = continues[t]
    return sums, previous * keeps


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
    ) -> None:
        super().__init__()
        obs_dim = int(np.prod(observation_space.shape))
        self.discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        action_dim = int(action_space.n) if self.discrete else int(action_space.shape[0])
        flatten: list[nn.Module] = [nn.Flatten()] if len(observation_space.shape) > 1 else []
        self.actor = nn.Sequential(*flatten, mlp(obs_dim, pi_sizes, action_dim, activation, output_gain=0.01))
        self.critic = nn.Sequential(*flatten, mlp(obs_dim, vf_sizes, num_heads, activation, output_gain=1.0))
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
        if self.discrete:
            log_probs = out.log_softmax(dim=-1)
            entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
        else:
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std.expand_as(out)).sum(dim=-1)
        return self._log_prob(out, actions), entropy

    def _log_prob(self, out: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of ``actions`` under the distribution the actor's output ``out`` makes."""
        if self.discrete:
            return out.log_softmax(dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        log_std = self.log_std.expand_as(out)
        z = (actions - out) * torch.exp(-log_std)
        return (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)


class _Sampler(nn.Module):
    """The rollout's step of the policy as a module of ``(obs, noise, mean, inv_std)``: the
    observation normalisation (``RunningMeanStd.normalize``'s :func:`whiten`) and
    :meth:`ActorCritic.sample`, the function ``compile=True`` traces and compiles."""

    def __init__(self, policy: ActorCritic, normalize: bool, clip: float) -> None:
        super().__init__()
        self.policy, self.normalize, self.clip = policy, normalize, clip

    def forward(
        self, obs: torch.Tensor, noise: torch.Tensor, mean: torch.Tensor, inv_std: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.normalize:
            obs = whiten(obs, mean, inv_std, self.clip)
        return self.policy.sample(obs, noise)


#: the most steps one compiled call of the rollout runs: a graph of more steps compiles for
#: longer (its first compile grows faster than its length: one-off trials on Pendulum-v1, 8
#: steps about twice 1 step's time, 16 steps several times) and saves little more
MAX_FUSED_STEPS = 8


def fused_steps(n_steps: int) -> int:
    """Steps per compiled call of a rollout of ``n_steps``: its largest divisor up to
    :data:`MAX_FUSED_STEPS`, so that every call runs the same compiled graph."""
    return max(k for k in range(1, min(n_steps, MAX_FUSED_STEPS) + 1) if n_steps % k == 0)


class _RolloutSteps(nn.Module):
    """``steps`` steps of the rollout, the env's own included, as one module of tensors:
    what ``compile=True`` compiles for an env whose step is pure tensor math
    (:meth:`BatchedEnv.advance_carried`, through any wrappers that carry it), so that a
    rollout is a few calls of compiled code instead of two a step. Each step is
    :meth:`PPO._collect_rollout`'s: the policy acts (:class:`_Sampler`), the env takes the
    actions (clipped to the bounds) and steps, and the step's tensors and reward components
    are kept; the steps' tensors come back stacked, after the observation and the carry."""

    def __init__(self, sampler: _Sampler, env: Any, steps: int, bounds: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        super().__init__()
        self.sampler, self.env, self.steps, self.bounds = sampler, env, steps, bounds

    def forward(
        self, obs: torch.Tensor, fresh: torch.Tensor, noise: torch.Tensor, mean: torch.Tensor,
        inv_std: torch.Tensor, *carry: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        num_envs, kept = obs.shape[0], []
        for t in range(self.steps):
            actions, log_prob = self.sampler(obs, noise[t], mean, inv_std)
            taken = actions if self.bounds is None else torch.clamp(actions, *self.bounds)
            carry, step, components = self.env.advance_carried(
                carry, taken, fresh[:, t * num_envs : (t + 1) * num_envs]
            )
            next_obs, reward, terminated, truncated, done, final_obs = step
            kept.append((obs, actions, log_prob, reward, terminated, truncated, final_obs, done, *components))
            obs = next_obs
        return (obs, *carry, *(torch.stack(column) for column in zip(*kept, strict=True)))


@dataclass
class _Rollout:
    """Preallocated on-device storage for one rollout of ``n_steps`` x ``num_envs``."""

    obs: torch.Tensor  # raw observations the policy acted on, (T, N, *obs_shape)
    final_obs: torch.Tensor  # the state each step led to (true last obs where an episode ended)
    actions: torch.Tensor  # (T, N) or (T, N, action_dim), as sampled
    log_prob: torch.Tensor  # the behaviour policy's log-probability of the actions, (T, N)
    rewards: torch.Tensor  # the env's (summed) reward, (T, N)
    terminated: torch.Tensor  # bool (T, N)
    truncated: torch.Tensor  # bool (T, N)
    components: torch.Tensor | None = None  # (C, T, N), allocated at the first step


#: the rollout size (n_steps * num_envs) that the default n_steps aims at
ROLLOUT_TARGET = 2048


def default_n_steps(num_envs: int) -> int:
    """Steps per env per rollout when ``n_steps`` is None: about :data:`ROLLOUT_TARGET`
    transitions per rollout, at least 16 steps (GAE needs some horizon)."""
    return max(16, round(ROLLOUT_TARGET / num_envs))


@dataclass(frozen=True)
class PPOConfig(LearnerConfig):
    """PPO's hyperparameters, named once: SB3's names and, where they still make sense for
    hundreds of batched envs, SB3's defaults. ``n_steps`` is per env, so a rollout has
    ``n_steps * env.num_envs`` transitions; by default it is chosen for about
    :data:`ROLLOUT_TARGET` transitions whatever the number of envs (many envs, short
    rollouts), and the learning rate is 1e-3 rather than SB3's 3e-4: with these defaults
    PPO solves CartPole-v1 and Acrobot-v1 within 100,000 steps on 16 and on 64 envs
    (``benchmarks/ppo_defaults.py``).

    Checked when made (a bad value raises ``ValueError`` naming it); saved with the model
    as plain data (:meth:`to_dict`, :meth:`from_dict`). ``PPO(env, **changes)`` and
    ``PPO(env, config=..., **changes)`` start from the defaults or from ``config``.

    Example::

        config = PPOConfig(n_steps=64, learning_rate=1e-3)
        faster = config.replace(n_epochs=4)

    :param learning_rate: Adam's step size.
    :param anneal_lr: decay the learning rate linearly to 0 over each ``learn`` call.
    :param n_steps: steps per env per rollout; None: :func:`default_n_steps` of the env's
        ``num_envs`` (2048 / num_envs rounded, at least 16).
    :param batch_size: minibatch size; None: a quarter of the rollout.
    :param n_epochs: passes over each rollout.
    :param gamma: discount (the default for every value head).
    :param gae_lambda: GAE's lambda.
    :param clip_range: PPO's ratio clip.
    :param clip_range_vf: clip of the value prediction around its rollout value (SB3's:
        the clipped prediction replaces the unclipped one); None: no clipping.
    :param normalize_advantage: normalise the (weighted) advantages per minibatch.
    :param ent_coef: entropy bonus coefficient.
    :param vf_coef: value-loss coefficient (the value loss sums the heads' MSEs).
    :param max_grad_norm: clip of the global gradient norm.
    :param target_kl: stop an update's epochs once a minibatch's approximate KL exceeds
        ``1.5 * target_kl`` (SB3's rule; reading the KL costs a host sync per minibatch);
        None: never stop early.
    :param normalize_obs: whiten observations with running statistics.
    :param normalize_reward: scale each head's reward by the running std of its discounted
        return (each head is scaled on its own, as RND does with its intrinsic stream).
    :param clip_obs: bound on normalised observations.
    :param clip_reward: bound on scaled rewards.
    :param net_arch: hidden sizes shared by actor and critic, or ``{"pi": [...], "vf": [...]}``.
    :param activation: ``"tanh"`` or ``"relu"``.
    :param log_std_init: initial log-std of the Gaussian policy (Box actions).
    :param intrinsic_coef: with an ``intrinsic`` module and ``value_heads=None``, the weight
        of the intrinsic head's advantage (the env's reward head has weight 1).
    :param intrinsic_gamma: that intrinsic head's discount.
    :param value_heads: None: one head on the env's summed reward, and with an ``intrinsic``
        module a second, non-episodic one on its bonus (RND's two-stream critic: intrinsic
        returns run on through episode ends; ``intrinsic_coef``, ``intrinsic_gamma``). Otherwise the reward
        components to give a head each, as a list of names or a dict ``name -> {"gamma":
        float, "weight": float, "episodic": bool}`` (defaults: ``gamma``, 1.0, True).
        Names must be in ``info["reward_components"]`` or be ``"intrinsic"`` when an
        ``intrinsic`` module is given. Reward not covered by a head is not learned from.
    :param compile: run each minibatch's update (forward, loss, backward, gradient
        clipping, Adam) as one function compiled ahead of time (``rewardlab.agents.fused``),
        and so the rollout's step of the policy and its values (the same numbers up to float
        rounding). On a batched env stepped by ``BatchedEnv``'s own step, bare or under
        wrappers whose steps are tensor math (``BatchedPotentialShaping`` with this
        package's potentials), the rollout runs :data:`MAX_FUSED_STEPS` steps of the policy
        and the env in one compiled call (``docs/batched_envs.md``, "Steps compiled by a
        caller"). The first run with given networks, minibatch size
        and loss settings compiles for tens of seconds and caches the result on disk
        (``$REWARDLAB_CACHE``); later processes load it in about a second. Pays for long
        runs: ``benchmarks/ppo_speed.py`` measures it.
    """

    learner: ClassVar[str] = "PPO"

    learning_rate: float = 1e-3
    anneal_lr: bool = False
    n_steps: int | None = None
    batch_size: int | None = None
    n_epochs: int = 10
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    clip_range_vf: float | None = None
    normalize_advantage: bool = True
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    normalize_obs: bool = False
    normalize_reward: bool = False
    clip_obs: float = 10.0
    clip_reward: float = 10.0
    net_arch: Sequence[int] | Mapping[str, Sequence[int]] = (64, 64)
    activation: str = "tanh"
    log_std_init: float = 0.0
    intrinsic_coef: float = 1.0
    intrinsic_gamma: float = 0.99
    value_heads: Sequence[str] | Mapping[str, Mapping[str, Any]] | None = None
    compile: bool = False

    def __post_init__(self) -> None:
        _check_config(self)
        # plain lists and dicts, so the config saves as data torch.load(weights_only=True) reads
        object.__setattr__(self, "net_arch", _plain_net_arch(self.net_arch))
        object.__setattr__(self, "value_heads", _plain_value_heads(self.value_heads))

    def discount(self, component: str) -> float:
        """The discount of the value head that learns ``component`` (its own ``gamma`` in
        ``value_heads``), else ``gamma``.

        :param component: a reward component's name (``"shaping"``).
        """
        for head in _parse_value_heads(self.value_heads, self.gamma):
            if head.component == component:
                return float(head.gamma)
        return float(self.gamma)


def _check_config(config: PPOConfig) -> None:
    """Check every hyperparameter, naming the one that is wrong."""
    check = HyperparameterCheck(config)
    hp, fail, number = check.values, check.fail, check.number

    for name in ("n_steps", "n_epochs"):
        if name == "n_steps" and hp[name] is None:
            continue  # chosen from the env's num_envs (default_n_steps)
        if not isinstance(hp[name], int) or isinstance(hp[name], bool) or hp[name] < 1:
            fail(name, "a positive integer" + (" or None (chosen from num_envs)" if name == "n_steps" else ""))
    if hp["batch_size"] is not None:
        smallest = 2 if hp["normalize_advantage"] else 1
        if not isinstance(hp["batch_size"], int) or hp["batch_size"] < smallest:
            fail(
                "batch_size",
                f"None or an integer >= {smallest} (advantages are normalised per minibatch)",
            )
    for name in ("gamma", "gae_lambda", "intrinsic_gamma"):
        if not number(name) or not 0.0 <= hp[name] <= 1.0:
            fail(name, "a number in [0, 1]")
    for name in ("learning_rate", "clip_range", "clip_obs", "clip_reward"):
        if not number(name) or hp[name] <= 0:
            fail(name, "a positive number")
    if not (isinstance(hp["max_grad_norm"], int | float) and hp["max_grad_norm"] > 0):
        fail("max_grad_norm", "a positive number (math.inf: no clipping)")
    for name in ("clip_range_vf", "target_kl"):
        if hp[name] is not None and (not number(name) or hp[name] <= 0):
            fail(name, "None or a positive number")
    for name in ("ent_coef", "vf_coef", "intrinsic_coef"):
        if not number(name) or hp[name] < 0:
            fail(name, "a number >= 0")
    if not number("log_std_init"):
        fail("log_std_init", "a finite number")
    for name in ("anneal_lr", "normalize_advantage", "normalize_obs", "normalize_reward", "compile"):
        if not isinstance(hp[name], bool):
            fail(name, "True or False")
    if hp["activation"] not in ("tanh", "relu"):
        fail("activation", "'tanh' or 'relu'")
    _split_net_arch(hp["net_arch"])


def _split_net_arch(net_arch: Any) -> tuple[list[int], list[int]]:
    """``(pi_sizes, vf_sizes)`` from a list of sizes or ``{"pi": [...], "vf": [...]}``."""

    def sizes(value: Any) -> list[int]:
        if (
            isinstance(value, str | bytes)
            or not isinstance(value, Sequence)
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        ):
            raise ValueError(
                "net_arch must be a list of positive layer sizes or {'pi': [...], 'vf': [...]}, "
                f"got net_arch={net_arch!r}"
            )
        return list(value)

    if isinstance(net_arch, Mapping):
        if set(net_arch) != {"pi", "vf"}:
            raise ValueError(
                f"net_arch as a dict needs exactly the keys 'pi' and 'vf', got net_arch={net_arch!r}"
            )
        return sizes(net_arch["pi"]), sizes(net_arch["vf"])
    return sizes(net_arch), sizes(net_arch)


def _plain_net_arch(arch: Any) -> Any:
    return {k: list(v) for k, v in arch.items()} if isinstance(arch, Mapping) else list(arch)


def _plain_value_heads(heads: Any) -> Any:
    if heads is None:
        return None
    return {n: dict(o) for n, o in heads.items()} if isinstance(heads, Mapping) else list(heads)


# Settings for Gymnasium's MuJoCo locomotion tasks (envs.make("Hopper-v5", num_envs=
# MUJOCO_NUM_ENVS), then PPO(env, config=MUJOCO_CONFIG)), chosen with
# benchmarks/mujoco_ppo.py. PPO's own defaults suit classic control with many envs; these are
# the PPO paper's MuJoCo settings spread over 16 envs (rollouts of 2048 steps, normalised
# observations and rewards, annealed learning rate), with minibatches of 128 instead of 64:
# as sample-efficient in short trials and quicker per update.
MUJOCO_NUM_ENVS = 16
MUJOCO_CONFIG = PPOConfig(
    n_steps=128, batch_size=128, n_epochs=10, learning_rate=3e-4, anneal_lr=True, gamma=0.99,
    gae_lambda=0.95, normalize_obs=True, normalize_reward=True, log_std_init=0.0, ent_coef=0.0,
)  # fmt: skip


class PPO(Learner):
    """PPO for batched torch environments (``rewardlab.envs.make`` and wrappers around them).

    Hyperparameters keep SB3's names and, where they still make sense for hundreds of
    batched envs, SB3's defaults; they are one :class:`PPOConfig` (``model.config``).

    :param env: a batched env following ``docs/batched_envs.md`` (``num_envs``, ``device``,
        ``single_observation_space``, ``single_action_space``, same-step autoreset with
        ``info["final_obs"]`` and ``info["reward_components"]``).
    :param seed: seeds the network initialisation, the action sampling, the minibatch
        shuffling and the env's first reset.
    :param device: where the networks live; must be the env's device (default: the env's).
    :param config: the hyperparameters (:class:`PPOConfig`); None: the defaults.
    :param intrinsic: a :class:`rewardlab.intrinsic.IntrinsicModule`, called on each whole
        rollout as ``compute(obs, actions, next_obs, dones)`` and ``update(obs, actions,
        next_obs)`` (raw observations, time-major rows; ``next_obs`` is the true last
        observation where an episode ended, ``dones`` marks those rows). Its bonus is
        component ``"intrinsic"``, learnt by the ``intrinsic`` value head (by default a
        non-episodic one, see :class:`PPOConfig`); a fusion's modules are logged each as
        ``reward/intrinsic/<fusion>/<name>``.
    :param tensorboard_log: folder for TensorBoard runs; None: no logging.
    :param reward_fn: the reward to learn from in place of the env's, computed once per
        rollout, after it is collected (the reward does not change how a rollout is
        collected): ``reward_fn(obs, actions, next_obs, terminated, env_reward) -> (reward,
        components)`` on the rollout's ``n_steps * num_envs`` transitions, time-major rows
        (``next_obs`` the true last observation where an episode ended, ``actions`` as the
        env took them, ``env_reward`` the env's summed reward), returning a float ``(B,)``
        tensor and a dict of named ``(B,)`` tensors. The env's own reward stays component
        ``"extrinsic"`` (so ``ep_info_buffer`` and ``rollout/ep_rew_mean`` keep the true
        return) and each returned component is logged as ``reward/<name>`` and
        ``episode/<name>``. A learned reward model or a reward program takes the whole
        rollout in one call this way. None: the env's reward.
    :param hyperparameters: changes to ``config`` by name (``PPO(env, n_steps=64)``), as
        :meth:`PPOConfig.replace` takes them.

    After training, ``num_timesteps`` counts env steps, ``ep_info_buffer`` holds the last
    100 finished episodes as SB3 does (``{"r": extrinsic return, "l": length}``),
    ``policy`` is the :class:`ActorCritic`, ``heads`` its value heads in output order, and
    ``obs_rms`` / ``reward_rms`` the running statistics.
    """

    learner: ClassVar[str] = "PPO"
    sb3_alternative: ClassVar[str] = "PPO"
    file_format: ClassVar[str] = "rewardlab.agents.PPO/1"

    def __init__(
        self,
        env: Any,
        seed: int = 0,
        device: torch.device | str | None = None,
        *,
        config: PPOConfig | None = None,
        intrinsic: IntrinsicModule | None = None,
        tensorboard_log: str | os.PathLike[str] | None = None,
        reward_fn: RolloutReward | None = None,
        **hyperparameters: Any,
    ) -> None:
        check_batched(env, "PPO", "PPO")
        if reward_fn is not None and not callable(reward_fn):
            raise TypeError(f"reward_fn must be a function (obs, actions, next_obs, terminated, env_reward) -> "
                            f"(reward, components), got {type(reward_fn).__name__}")
        #: the reward learnt from in place of the env's, per rollout (see the class's reward_fn)
        self.reward_fn = reward_fn
        if device is not None and torch.device(device) != torch.device(env.device):
            raise ValueError(
                f"device={device!r} but the env lives on {env.device}; the env and the "
                "network must share one device (make the env there, or leave device=None)"
            )
        if tensorboard_log is not None and not isinstance(tensorboard_log, str | os.PathLike):
            raise ValueError(f"tensorboard_log must be None or a folder path, got {tensorboard_log!r}")
        config = (config if config is not None else PPOConfig()).replace(**hyperparameters)
        self._build(
            env.single_observation_space, env.single_action_space, env.device, seed, config,
            intrinsic,
        )  # fmt: skip
        self.tensorboard_log = None if tensorboard_log is None else os.fspath(tensorboard_log)
        self.set_env(env)

    def _build(
        self,
        observation_space: gymnasium.spaces.Space,
        action_space: gymnasium.spaces.Space,
        device: torch.device | str,
        seed: int,
        config: PPOConfig,
        intrinsic: IntrinsicModule | None,
    ) -> None:
        """Make the networks, optimiser and statistics for ``config``."""
        _check_spaces(observation_space, action_space)
        _check_intrinsic(intrinsic, config.value_heads)
        self.heads = _parse_value_heads(config.value_heads, config.gamma)
        if intrinsic is not None and config.value_heads is None:
            self.heads.append(ValueHead(
                INTRINSIC_COMPONENT, config.intrinsic_gamma, config.intrinsic_coef, episodic=False
            ))  # fmt: skip
        self.config = config
        self.seed = seed
        self.device = torch.device(device)
        self.observation_space = observation_space
        self.action_space = action_space
        self.intrinsic = intrinsic

        torch.manual_seed(seed)
        self._generator = torch.Generator(self.device).manual_seed(seed)
        pi_sizes, vf_sizes = _split_net_arch(self.config.net_arch)
        self.policy = ActorCritic(
            observation_space, action_space, pi_sizes, vf_sizes, len(self.heads),
            self.config.activation, self.config.log_std_init,
        ).to(self.device)  # fmt: skip
        self._parameters = list(self.policy.parameters())  # listed once, not per minibatch
        self.optimizer = torch.optim.Adam(
            self._parameters, lr=self.config.learning_rate, eps=1e-5, fused=True
        )
        self.obs_rms = RunningMeanStd(observation_space.shape, device=self.device)
        self.reward_rms = RunningMeanStd((len(self.heads),), device=self.device)
        self._head_gammas = torch.tensor([h.gamma for h in self.heads], device=self.device)
        self._head_weights = torch.tensor([h.weight for h in self.heads], device=self.device)
        self._head_episodic = torch.tensor([h.episodic for h in self.heads], device=self.device)
        if not self.policy.discrete:
            self._action_low = torch.as_tensor(action_space.low, device=self.device)
            self._action_high = torch.as_tensor(action_space.high, device=self.device)

        self.num_timesteps = 0
        self.ep_info_buffer: deque[dict[str, float]] = deque(maxlen=100)
        self.env: Any = None
        self._n_updates = 0
        self._last_obs: torch.Tensor | None = None
        self._fused: Any = None  # the compiled minibatch update (config.compile)
        self._compiled_calls: dict[str, Any] = {}  # the compiled rollout sampling and scoring

    def set_env(self, env: Any) -> None:
        """Attach a batched env (spaces and device must match the model's); the next
        ``learn`` starts by resetting it.

        :param env: a batched env, as for the constructor.
        """
        self.check_env(env)
        #: steps per env per rollout: the config's, or chosen from num_envs
        self.n_steps = self.config.n_steps or default_n_steps(env.num_envs)
        rollout_size = self.n_steps * env.num_envs
        if self.config.batch_size is not None and self.config.batch_size > rollout_size:
            raise ValueError(
                f"batch_size={self.config.batch_size} exceeds the rollout size n_steps * num_envs = "
                f"{self.n_steps} * {env.num_envs} = {rollout_size}"
            )
        # An intrinsic module reads a rollout as time-major rows of num_envs envs (its
        # return filter and episodic counts depend on it): tell it how many.
        if self.intrinsic is not None:
            self.intrinsic.set_num_envs(env.num_envs)
        self.env = env
        self._last_obs = None
        T, N, obs_shape = self.n_steps, env.num_envs, tuple(self.observation_space.shape)
        if self.policy.discrete:
            actions = torch.zeros((T, N), dtype=torch.int64, device=self.device)
        else:
            actions = torch.zeros((T, N, *self.action_space.shape), device=self.device)
        self._rollout = _Rollout(
            obs=torch.zeros((T, N, *obs_shape), device=self.device),
            final_obs=torch.zeros((T, N, *obs_shape), device=self.device),
            actions=actions,
            log_prob=torch.zeros((T, N), device=self.device),
            rewards=torch.zeros((T, N), device=self.device),
            terminated=torch.zeros((T, N), dtype=torch.bool, device=self.device),
            truncated=torch.zeros((T, N), dtype=torch.bool, device=self.device),
        )
        self._component_names: list[str] | None = None
        #: the components reward_fn returns, after the env's in the rollout's storage
        self._relabelled_names: list[str] | None = None
        # compiled for the previous env's shapes (compile=True): made again at first use
        self._fused, self._compiled_calls = None, {}
        # A batched env stepped by BatchedEnv's own step (bare, or under wrappers whose
        # steps are tensor math on it): the rollout takes its reset states ahead, and with
        # compile runs its steps (advance_carried) inside PPO's compiled steps
        # (_RolloutSteps) where they are known to trace. Other wrappers and envs with a
        # step of their own run eagerly between compiled steps of the policy.
        self._env_steps_ahead = isinstance(env, Batched) and env.steps_by_advance
        self._env_steps_compile = self._env_steps_ahead and env.advance_traces

    def learn(
        self,
        total_timesteps: int,
        callback: Callable[[dict[str, Any]], bool | None] | None = None,
        progress_bar: bool = False,
        tb_log_name: str = "PPO",
        reset_num_timesteps: bool = True,
    ) -> PPO:
        """Train for at least ``total_timesteps`` env steps (whole rollouts).

        :param total_timesteps: env steps to train for, summed over the batched envs.
        :param callback: called as ``callback(locals())`` after each rollout and its update,
            with ``learn``'s local variables: ``self``, ``iteration``, ``num_iterations``
            and ``logged`` (the dict of values written to TensorBoard, also without a log
            folder), among others. Returning False stops training. SB3 callback objects
            are not supported: wrap the check in a function.
        :param progress_bar: show a tqdm bar over env steps.
        :param tb_log_name: run-folder prefix under ``tensorboard_log``.
        :param reset_num_timesteps: start the step count (and the TensorBoard run) afresh
            and reset the env; False continues both.
        :return: self.
        """
        if not isinstance(total_timesteps, int | np.integer) or total_timesteps < 1:
            raise ValueError(f"total_timesteps must be a positive integer, got {total_timesteps!r}")
        if callback is not None and not callable(callback):
            raise TypeError(
                f"callback must be a function callback(locals_dict) -> bool | None, got "
                f"{type(callback).__name__}"
            )
        if self.env is None:
            raise ValueError("this model has no env: pass env= to PPO.load or call set_env(env)")
        env, rollout = self.env, self._rollout
        if reset_num_timesteps:
            self.num_timesteps = 0
        if reset_num_timesteps or self._last_obs is None:
            first_reset = self._component_names is None
            self._last_obs, _ = env.reset(seed=self.seed if first_reset else None)
            num_heads, num_envs = len(self.heads), env.num_envs
            self._discounted_returns = torch.zeros((num_envs, num_heads), device=self.device)
            self._episode_sums: torch.Tensor | None = None
        logger = (
            TensorBoardLogger(self.tensorboard_log, tb_log_name, new_run=reset_num_timesteps)
            if self.tensorboard_log is not None
            else None
        )
        bar = steps_bar(total_timesteps) if progress_bar else None

        rollout_size = self.n_steps * env.num_envs
        batch_size = self.config.batch_size or max(rollout_size // 4, 1)
        num_iterations = math.ceil(total_timesteps / rollout_size)
        start_time, start_timesteps = time.perf_counter(), self.num_timesteps
        for iteration in range(1, num_iterations + 1):
            # Learning-rate annealing (CleanRL): linear from learning_rate to 0 over this call.
            progress_remaining = 1.0 - (iteration - 1) / num_iterations
            learning_rate = self.config.learning_rate * (progress_remaining if self.config.anneal_lr else 1.0)
            for group in self.optimizer.param_groups:
                group["lr"] = learning_rate

            self._collect_rollout()
            if self.reward_fn is not None:
                self._relabel_rollout()
            self.num_timesteps += rollout_size

            # The rollout kept each action's log-probability; the values V(obs[t]), t = 0..T
            # (the observation after the last step too), in one batch, with the observation
            # statistics the policy acted on (but for a fresh model's first rollout, below).
            T, N = self.n_steps, env.num_envs
            raw_obs = rollout.obs.reshape(T * N, *rollout.obs.shape[2:])
            flat_actions = rollout.actions.reshape(T * N, *rollout.actions.shape[2:])
            behaviour_log_prob = rollout.log_prob.reshape(T * N)
            seeding_stats = self.config.normalize_obs and self._obs_stats_empty()
            if seeding_stats:
                # A fresh model's statistics have seen nothing, so its first rollout was acted
                # on unwhitened observations: learning from them would spend the rollout
                # fitting inputs on another scale from every later one (MountainCar's velocity,
                # a hundred times smaller than its position). Fold the rollout in first and
                # take the behaviour log-probabilities again on the whitened observations:
                # the initial policy's output layer is scaled by 0.01, so its action
                # distribution barely depends on its inputs' scale.
                self.obs_rms.update(raw_obs)
            flat_obs = self._normalize_obs(raw_obs)
            if seeding_stats:
                with torch.no_grad():
                    behaviour_log_prob, _ = self.policy.log_prob_and_entropy(flat_obs, flat_actions)
            values = self._values(torch.cat([flat_obs, self._normalize_obs(self._last_obs)]))
            values = values.reshape(T + 1, N, -1)

            # Intrinsic reward on the whole rollout, flattened time-major (row t * N + env);
            # next_obs is the true successor (final_obs where an episode ended).
            episode_ended = rollout.terminated | rollout.truncated
            intrinsic_reward = None
            if self.intrinsic is not None:
                raw_next = rollout.final_obs.reshape(raw_obs.shape)
                with torch.no_grad():
                    intrinsic_reward = self.intrinsic.compute(
                        raw_obs, flat_actions, raw_next, episode_ended.reshape(-1)
                    )
                intrinsic_reward = _checked_intrinsic_reward(
                    intrinsic_reward, T * N, self.intrinsic
                )
                intrinsic_reward = intrinsic_reward.reshape(T, N)
                self.intrinsic.update(raw_obs, flat_actions, raw_next)

            stats = self._episode_statistics(intrinsic_reward, episode_ended)

            # Rewards per head: a component, or the summed reward (plus any intrinsic bonus).
            head_rewards = self._head_rewards(intrinsic_reward)
            if self.config.normalize_reward:
                head_rewards = self._scale_rewards(head_rewards, episode_ended)

            # GAE per head. Each step bootstraps from the value of the state it led to,
            # V(obs[t + 1]); where the time limit cut an episode short, the autoreset replaced
            # that state, and episodic heads bootstrap from V(final_obs), its true last
            # observation, instead (at other steps final_obs is obs[t + 1], or the episode
            # terminated and adds no future). Non-episodic heads run on through resets.
            episodic = self._head_episodic
            next_values = values[1:]
            if rollout.truncated.any():  # a host sync, and a forward pass of the few cut steps
                cut = rollout.truncated
                final_values = self._values(self._normalize_obs(rollout.final_obs[cut]))
                next_values = next_values.clone()
                next_values[cut] = torch.where(episodic, final_values, next_values[cut])
            terminated = rollout.terminated.unsqueeze(-1) & episodic
            ended = episode_ended.unsqueeze(-1) & episodic
            advantages, returns = compute_gae(
                head_rewards, values[:-1], next_values, terminated, ended,
                self._head_gammas, self.config.gae_lambda,
            )  # fmt: skip

            stats |= self._update(
                flat_obs, flat_actions, behaviour_log_prob, advantages.reshape(T * N, -1),
                returns.reshape(T * N, -1), values[:-1].reshape(T * N, -1), batch_size,
                learning_rate,
            )  # fmt: skip
            if self.config.normalize_obs and not seeding_stats:
                self.obs_rms.update(raw_obs)

            # One host sync for all statistics of this iteration.
            values_read = torch.stack(list(stats.values())).tolist()
            logged: dict[str, float] = dict(zip(stats, values_read, strict=True))
            logged["train/learning_rate"] = learning_rate
            logged["train/clip_range"] = self.config.clip_range
            logged["train/n_updates"] = self._n_updates
            logged["time/fps"] = int(
                (self.num_timesteps - start_timesteps) / (time.perf_counter() - start_time)
            )
            if self.ep_info_buffer:
                logged["rollout/ep_rew_mean"] = float(
                    np.mean([e["r"] for e in self.ep_info_buffer])
                )
                logged["rollout/ep_len_mean"] = float(
                    np.mean([e["l"] for e in self.ep_info_buffer])
                )
            if logger is not None:
                logger.record(logged, self.num_timesteps)
            if bar is not None:
                bar.update(rollout_size)
            if callback is not None and callback(locals()) is False:
                break
        if logger is not None:
            logger.close()
        if bar is not None:
            bar.close()
        return self

    def warm_up(self) -> float:
        """Compile the minibatch update, the rollout's step of the policy and its values now
        (or load them from the cache), so that the first ``learn`` does not pay for it;
        nothing is trained and no random number drawn. A no-op without ``compile``.

        :return: the seconds it took.
        """
        if self.env is None:
            raise ValueError("this model has no env: pass env= to PPO.load or call set_env(env)")
        start = time.perf_counter()
        if self.config.compile and self._fused is None:
            # the rollout's own buffers as examples: only their shapes and dtypes matter
            rollout, size = self._rollout, self.n_steps * self.env.num_envs
            obs = rollout.obs.reshape(size, *rollout.obs.shape[2:])
            actions = rollout.actions.reshape(size, *rollout.actions.shape[2:])
            rows = self.config.batch_size or max(size // 4, 1)
            vector = torch.zeros(size, device=self.device)
            per_head = torch.zeros((size, len(self.heads)), device=self.device)
            idx = torch.arange(rows, device=self.device)
            self._fused_update((obs, actions, vector, vector, per_head, per_head, idx))
            if not (self._env_steps_compile and self._rollout_steps() is not None):
                self._sampler()
            self._values(torch.zeros((size + self.env.num_envs, *obs.shape[1:]), device=self.device))
        return time.perf_counter() - start

    def _collect_rollout(self) -> None:
        """Step the env ``n_steps`` times, storing each step's observation, action, its
        log-probability and what the env returned.

        Only acting and copying happen here; values and episode statistics are computed
        afterwards over the whole rollout, so this loop has no host syncs and few ops per step.
        """
        env, rollout, obs = self.env, self._rollout, self._last_obs
        # The reset states of the rollout's episode ends, drawn ahead where the env keeps them
        # (a batched env stepped by its own step): the compiled rollout takes them as an
        # input, and the eager one then takes the same states, so both run the same episodes.
        fresh = env.reset_states_ahead(self.n_steps) if self._env_steps_ahead else None
        # the sampling noise of the whole rollout in one draw (one operator, not one a step)
        noise = self.policy.draw_noise((self.n_steps, *self._noise_shape()), self._generator, self.device)
        compiled = self._rollout_steps() if self.config.compile and self._env_steps_compile else None
        if compiled is not None:
            self._collect_compiled(compiled, fresh, noise)
            return
        sample = self._sampler()
        # Each step's tensors are kept as they come (a tensor an env hands out is the
        # caller's, docs/batched_envs.md) and stacked into the buffers after the last step:
        # one copy a buffer, not one a buffer and step.
        steps = []
        with torch.no_grad():
            for t in range(self.n_steps):
                actions, log_prob = sample(obs, noise[t])
                next_obs, reward, terminated, truncated, info = env.step(self._taken(actions))
                components = info["reward_components"]
                if self._component_names is None:
                    self._first_step_checks(reward, components)
                steps.append((
                    obs, actions, log_prob, reward, terminated, truncated, info["final_obs"],
                    *(components[name] for name in self._component_names),
                ))  # fmt: skip
                obs = next_obs
            buffers = (
                rollout.obs, rollout.actions, rollout.log_prob, rollout.rewards, rollout.terminated,
                rollout.truncated, rollout.final_obs, *rollout.components[: len(self._component_names)],
            )  # fmt: skip
            for buffer, column in zip(buffers, zip(*steps, strict=True), strict=True):
                torch.stack(column, out=buffer)
        self._last_obs = obs

    def _collect_compiled(
        self, call: Callable[..., Sequence[torch.Tensor]], fresh: torch.Tensor, noise: torch.Tensor
    ) -> None:
        """:meth:`_collect_rollout`'s steps, the env's included, as compiled calls of
        :class:`_RolloutSteps`, each running :func:`fused_steps` steps; then the env takes
        the last carry as its own."""
        env, rollout, obs = self.env, self._rollout, self._last_obs
        steps, rms = fused_steps(self.n_steps), self.obs_rms
        carry = env.carried()
        chunks, width = [], steps * env.num_envs
        with torch.no_grad():
            for start in range(0, self.n_steps, steps):
                obs, *out = call(
                    obs, fresh[:, start * env.num_envs : start * env.num_envs + width],
                    noise[start : start + steps], rms._mean32, rms._inv_std32, *carry,
                )  # fmt: skip
                carry, kept = out[: len(carry)], out[len(carry) :]
                chunks.append(kept)
            # the columns _RolloutSteps keeps: these buffers', each step's done, its components
            buffers = (
                rollout.obs, rollout.actions, rollout.log_prob, rollout.rewards, rollout.terminated,
                rollout.truncated, rollout.final_obs,
            )  # fmt: skip
            columns = list(zip(*chunks, strict=True))
            done, components = columns[len(buffers)], columns[len(buffers) + 1 :]
            for buffer, column in zip(buffers, columns[: len(buffers)], strict=True):
                torch.cat(column, out=buffer)
            if self._component_names is None:
                first = {name: column[0][0] for name, column in zip(env.component_names, components, strict=True)}
                self._first_step_checks(rollout.rewards[0], first)
            assert rollout.components is not None and self._component_names is not None
            for buffer, column in zip(rollout.components[: len(self._component_names)], components, strict=True):
                torch.cat(column, out=buffer)
            env.commit_carried(carry, torch.cat(done), self._taken(rollout.actions[-1]))
        self._last_obs = obs

    def _taken(self, actions: torch.Tensor) -> torch.Tensor:
        """The actions the env is given: Box actions clipped to the bounds (the rollout keeps
        them as sampled), discrete ones as they are."""
        if self.policy.discrete:
            return actions
        return torch.maximum(torch.minimum(actions, self._action_high), self._action_low)

    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)`` per head, ``(B, H)``, of normalised observations; with ``compile``, the
        critic compiled for the rollout's ``(n_steps + 1) * num_envs`` rows (other batches,
        the few truncated steps', run eagerly)."""
        rows = (self.n_steps + 1) * self.env.num_envs
        with torch.no_grad():
            if not self.config.compile or obs.shape[0] != rows:
                return self.policy.value(obs)
            return self._compiled("score", lambda: self.policy.critic, (obs,))(obs)[0]

    def _compiled(
        self, name: str, build: Callable[[], nn.Module], example: Sequence[torch.Tensor], recipe: str | None = None
    ) -> Any:
        """The module ``build()`` makes, compiled for ``example``'s shapes, once per model and
        env; ``recipe`` names what it is made of (default: :meth:`_recipe`)."""
        from rewardlab.agents.fused import CompiledCall

        if name not in self._compiled_calls:
            self._compiled_calls[name] = CompiledCall(build(), example, f"ppo-{name}", recipe or self._recipe())
        return self._compiled_calls[name]

    def _recipe(self) -> str:
        """What the compiled graphs are made of besides rewardlab's code: the network's
        structure, the spaces and the settings (with ``compile``, a process that finds
        them in the cache loads the libraries without tracing the graphs again)."""
        return repr((
            type(self).__name__, repr(self.policy), repr(self.observation_space),
            repr(self.action_space), sorted(self.config.to_dict().items()),
        ))  # fmt: skip

    def _sampler(self) -> Callable[[torch.Tensor, torch.Tensor], Sequence[torch.Tensor]]:
        """The rollout's step of the policy, ``sample(obs, noise) -> (actions, log_prob)``
        (:class:`_Sampler`, compiled with ``compile``), the noise drawn by
        :meth:`ActorCritic.draw_noise`."""
        rms = self.obs_rms
        sampler = _Sampler(self.policy, self.config.normalize_obs, self.config.clip_obs)
        call: Callable[..., Sequence[torch.Tensor]] = sampler
        if self.config.compile:
            noise = torch.ones(self._noise_shape(), device=self.device)
            example = (self._rollout.obs[0], noise, rms._mean32, rms._inv_std32)
            call = self._compiled("act", lambda: sampler, example)

        def sample(obs: torch.Tensor, noise: torch.Tensor) -> Sequence[torch.Tensor]:
            return call(obs, noise, rms._mean32, rms._inv_std32)

        return sample

    def _rollout_steps(self) -> Callable[..., Sequence[torch.Tensor]] | None:
        """:class:`_RolloutSteps` of :func:`fused_steps` steps, compiled (or loaded) for
        this env at first use; None, with a warning, where the env's step does not compile
        (the rollout then steps the env eagerly).

        The env's step is part of the graph, so the recipe that names the compiled graph
        holds the env's (:meth:`BatchedEnv.step_fingerprint`) besides the model's."""
        if "rollout" not in self._compiled_calls:
            try:
                self._compile_rollout_steps()
            except Exception as error:  # the env's step does not trace or compile
                self._compiled_calls["rollout"] = None
                warnings.warn(
                    f"{self.env}'s step could not be compiled into PPO's rollout "
                    f"({type(error).__name__}: {str(error)[:300]}); the rollout steps the env "
                    "eagerly, between compiled steps of the policy",
                    stacklevel=3,
                )
        return self._compiled_calls["rollout"]

    def _compile_rollout_steps(self) -> None:
        env, steps = self.env, fused_steps(self.n_steps)
        # examples of the inputs' shapes and dtypes (the env may not be reset yet)
        carry = env.carried_example()
        fresh = carry[0].repeat(1, steps)  # reset states: the state's rows, one column an env
        bounds = None if self.policy.discrete else (self._action_low, self._action_high)
        sampler = _Sampler(self.policy, self.config.normalize_obs, self.config.clip_obs)
        rms = self.obs_rms
        noise = torch.ones((steps, *self._noise_shape()), device=self.device)
        example = (self._rollout.obs[0], fresh, noise, rms._mean32, rms._inv_std32, *carry)
        recipe = repr((self._recipe(), steps, env.step_fingerprint()))
        self._compiled("rollout", lambda: _RolloutSteps(sampler, env, steps, bounds), example, recipe)

    def _noise_shape(self) -> tuple[int, int]:
        width = int(self.action_space.n) if self.policy.discrete else int(self.action_space.shape[0])
        return (self.env.num_envs, width)

    def _first_step_checks(
        self, reward: torch.Tensor, components: Mapping[str, torch.Tensor]
    ) -> None:
        """Check the reward components against the value heads and allocate their storage."""
        names = list(components)
        if "extrinsic" not in components:
            raise ValueError(
                f"the env reports no 'extrinsic' reward component (it reports {names}); "
                "batched envs must put their own reward in info['reward_components']['extrinsic']"
            )
        from_intrinsic_module = {INTRINSIC_COMPONENT} if self.intrinsic is not None else set()
        missing = [
            h.component for h in self.heads
            if h.component not in (*names, SUMMED_REWARD_HEAD, *from_intrinsic_module)
        ]  # fmt: skip
        if missing:
            raise ValueError(
                f"value_heads names {missing}, which the env does not report in "
                f"info['reward_components'] (it reports {names}); add the wrapper that "
                "produces them, pass intrinsic= for 'intrinsic', or drop those heads"
            )
        headed = [h.component for h in self.heads if h.component in components]
        if headed and not torch.allclose(sum(components[c] for c in headed), reward, atol=1e-5):
            uncovered = [c for c in names if c not in headed]
            warnings.warn(
                f"the value heads {headed} do not add up to the env's reward; the rest "
                f"(components {uncovered}) is not learned from. Give it a head if it should be.",
                stacklevel=4,
            )
        self._component_names = names
        T, N = self.n_steps, self.env.num_envs
        self._rollout.components = torch.zeros((len(names), T, N), device=self.device)

    def _all_component_names(self) -> list[str]:
        """The names of the rollout's components: the env's, then reward_fn's."""
        return [*(self._component_names or []), *(self._relabelled_names or [])]

    def _relabel_rollout(self) -> None:
        """Replace the rollout's rewards with ``reward_fn``'s on its transitions, and store
        its components after the env's (their storage made at the first call)."""
        rollout, T, N = self._rollout, self.n_steps, self.env.num_envs
        assert rollout.components is not None and self._component_names is not None
        rows = T * N

        def flat(values: torch.Tensor) -> torch.Tensor:
            return values.reshape(rows, *values.shape[2:])

        with torch.no_grad():
            result = self.reward_fn(  # type: ignore[misc]
                flat(rollout.obs), flat(self._taken(rollout.actions)), flat(rollout.final_obs),
                flat(rollout.terminated), flat(rollout.rewards),
            )  # fmt: skip
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping)):
            raise TypeError(f"reward_fn must return (reward, components), got {type(result).__name__}")
        reward, components = result
        for what, value in (("the reward", reward), *((f"component {k!r}", v) for k, v in components.items())):
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != (rows,) or not value.is_floating_point():
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"reward_fn returned {what} as {shape}; it must be a float tensor of shape "
                                 f"({rows},), one value per transition of the rollout (n_steps * num_envs)")
        if self._relabelled_names is None:
            clash = [name for name in components if name in self._component_names]
            if clash:
                raise ValueError(f"reward_fn returned components {clash} that the env reports too; rename them")
            self._relabelled_names = list(components)
            extra = torch.zeros((len(components), T, N), device=self.device)
            rollout.components = torch.cat([rollout.components, extra])
        elif list(components) != self._relabelled_names:
            raise ValueError(f"reward_fn returned the components {list(components)} after {self._relabelled_names}; "
                             "it must return the same ones every time")
        rollout.rewards.copy_(reward.reshape(T, N))
        first = len(self._component_names)
        for index, value in enumerate(components.values()):
            rollout.components[first + index].copy_(value.reshape(T, N))

    def _obs_stats_empty(self) -> bool:
        """Whether the observation statistics have seen no observation (a fresh model's)."""
        return float(self.obs_rms.count) < 1  # its initial count is RunningMeanStd's epsilon

    def _normalize_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """Whiten observations with the running statistics, if ``normalize_obs``."""
        if not self.config.normalize_obs:
            return obs
        return self.obs_rms.normalize(obs, self.config.clip_obs)

    def _episode_statistics(
        self, intrinsic_reward: torch.Tensor | None, episode_ended: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Per-step means and finished-episode sums of every component; fills ``ep_info_buffer``.

        Episode sums carry over from one rollout to the next; reading the finished
        episodes is this method's one host sync.
        """
        rollout, names = self._rollout, self._all_component_names()
        assert rollout.components is not None
        columns = [rollout.components[i] for i in range(len(names))]
        if intrinsic_reward is not None:
            names.append(f"intrinsic/{self.intrinsic.name}")
            columns.append(intrinsic_reward)
            # a fusion's modules, each under its own name (raw, before the fusion), as the SB3
            # integration logs them
            for part, bonus in getattr(self.intrinsic, "last_parts", {}).items():
                names.append(f"intrinsic/{self.intrinsic.name}/{part}")
                columns.append(bonus.to(intrinsic_reward.device).reshape(intrinsic_reward.shape))
        columns.append(torch.ones_like(rollout.rewards))  # episode length
        per_step = torch.stack(columns, dim=-1)  # (T, N, C + 1)

        running = (
            self._episode_sums if self._episode_sums is not None else torch.zeros_like(per_step[0])
        )
        at_step, self._episode_sums = episode_sums(per_step, running, episode_ended)
        finished = at_step[episode_ended]  # (E, C + 1), in time order

        stats = {f"reward/{name}": per_step[..., i].mean() for i, name in enumerate(names)}
        if len(finished):
            means = finished.mean(dim=0)
            stats |= {f"episode/{name}": means[i] for i, name in enumerate(names)}
            extrinsic = names.index("extrinsic")
            for row in finished[-self.ep_info_buffer.maxlen :].tolist():
                self.ep_info_buffer.append({"r": row[extrinsic], "l": int(row[-1])})
        return stats

    def _head_rewards(self, intrinsic_reward: torch.Tensor | None) -> torch.Tensor:
        """The reward each value head learns from, ``(T, N, H)``."""
        rollout, names = self._rollout, self._all_component_names()
        assert rollout.components is not None
        per_head = []
        for head in self.heads:
            if head.component == SUMMED_REWARD_HEAD:
                per_head.append(rollout.rewards)  # an intrinsic bonus has a head of its own
            elif head.component == INTRINSIC_COMPONENT and intrinsic_reward is not None:
                per_head.append(intrinsic_reward)
            else:
                per_head.append(rollout.components[names.index(head.component)])
        return torch.stack(per_head, dim=-1)

    def _scale_rewards(
        self, head_rewards: torch.Tensor, episode_ended: torch.Tensor
    ) -> torch.Tensor:
        """Divide each head's reward by the running std of its discounted return, then clip.

        As SB3's ``VecNormalize``: ``R = gamma * R + r``, reset at episode ends (episodic
        heads only), its variance tracked over all steps, rewards not centred.
        """
        keeps = ~(episode_ended.unsqueeze(-1) & self._head_episodic)
        running = self._discounted_returns
        discounted = torch.empty_like(head_rewards)
        for t in range(head_rewards.shape[0]):
            running = running * self._head_gammas + head_rewards[t]
            discounted[t] = running
            running = running * keeps[t]
        self._discounted_returns = running
        self.reward_rms.update(discounted.reshape(-1, discounted.shape[-1]))
        return self.reward_rms.scale(head_rewards).clamp(-self.config.clip_reward, self.config.clip_reward)

    def _update(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        old_log_prob: torch.Tensor,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        old_values: torch.Tensor,
        batch_size: int,
        learning_rate: float,
    ) -> dict[str, torch.Tensor]:
        """``n_epochs`` passes of clipped-surrogate minibatch updates over the rollout.

        Each minibatch's step is ``loss.backward()``, gradient clipping and Adam, or, with
        ``compile``, the same step as one compiled function (``rewardlab.agents.fused``).

        :return: the ``train/*`` statistics as 0-d tensors (read once by the caller).
        """
        size = obs.shape[0]
        # The policy follows the weighted sum of the heads' advantages.
        policy_advantages = (advantages * self._head_weights).sum(dim=-1)
        rollout = (obs, actions, old_log_prob, policy_advantages, returns, old_values)
        # each minibatch step's (loss, pg_loss, value_loss, entropy_loss, approx_kl,
        # clip_fraction), a row a step, in tables; a step that target_kl stops adds its last two
        done: list[torch.Tensor] = []
        stopped: list[torch.Tensor] = []
        # with compile, the full minibatches' compiled step (a shorter last one runs eagerly)
        target_kl = self.config.target_kl
        full = self._fused_update((*rollout, torch.arange(batch_size, device=self.device))) if self.config.compile else None
        for _ in range(self.config.n_epochs):
            stop = False
            permutation = torch.randperm(size, generator=self._generator, device=self.device)
            minibatches = [permutation[start : start + batch_size] for start in range(0, size, batch_size)]
            if full is not None and target_kl is None:
                # nothing is looked at between steps: the full minibatches' compiled steps run
                # one after another, the parameters written once after the last
                chained = [idx for idx in minibatches if idx.shape[0] == batch_size]
                if chained:
                    done.append(full.steps(rollout, chained, learning_rate))
                minibatches = minibatches[len(chained) :]
            for idx in minibatches:
                batch = (*rollout, idx)
                fused = full if full is not None and idx.shape[0] == batch_size else None
                if fused is not None:
                    new_state, parts = fused(batch, learning_rate, checked=True)
                else:
                    loss, parts = self._minibatch_loss(None, batch)
                    parts = torch.stack((loss, *parts)).detach()
                approx_kl = parts[4]
                if target_kl is not None and approx_kl.item() > 1.5 * target_kl:
                    stopped.append(parts[4:].unsqueeze(0))
                    stop = True
                    break

                if fused is not None:
                    fused.commit(new_state)
                else:
                    self.optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    nn.utils.clip_grad_norm_(self._parameters, self.config.max_grad_norm, foreach=True)
                    self.optimizer.step()
                done.append(parts.unsqueeze(0))
            self._n_updates += 1
            if stop:
                break

        # means over the steps (NaN where none ran); the KL and clip fraction also of the step
        # that target_kl stopped
        nan = torch.full((1, 6), math.nan, device=obs.device)
        loss, pg_loss, value_loss, entropy_loss, _, _ = torch.cat(done or [nan]).mean(dim=0)
        kl_rows = [table[:, 4:] for table in done] + stopped
        approx_kl, clip_fraction = torch.cat(kl_rows or [nan[:, 4:]]).mean(dim=0)
        weighted_values = (old_values * self._head_weights).sum(dim=-1)
        weighted_returns = (returns * self._head_weights).sum(dim=-1)
        stats = {
            "train/policy_gradient_loss": pg_loss,
            "train/value_loss": value_loss,
            "train/entropy_loss": entropy_loss,
            "train/loss": loss,
            "train/approx_kl": approx_kl,
            "train/clip_fraction": clip_fraction,
            "train/explained_variance": explained_variance(weighted_values, weighted_returns),
        }
        if not self.policy.discrete:
            stats["train/std"] = self.policy.log_std.detach().exp().mean()
        return stats

    def _minibatch_loss(
        self, parameters: dict[str, torch.Tensor] | None, batch: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """PPO's loss on one minibatch with the policy's ``parameters`` (by name).

        A function of the parameters so that the compiled update can differentiate it with
        ``torch.func``; the eager update passes None (the policy's own parameters).

        :param batch: the rollout's observations, actions, behaviour log-probabilities,
            the policy's (weighted) advantages, returns and values per head, then the
            minibatch's row indices.
        :return: ``(loss, (pg_loss, value_loss, entropy_loss, approx_kl, clip_fraction))``,
            the last two detached.
        """
        *rollout, idx = batch
        obs, actions, old_log_prob, advantages, returns, old_values = (c[idx] for c in rollout)
        if parameters is None:
            log_prob, entropy, new_values = self.policy(obs, actions)
        else:
            log_prob, entropy, new_values = torch.func.functional_call(
                self.policy, parameters, (obs, actions)
            )
        log_ratio = log_prob - old_log_prob
        ratio = log_ratio.exp()
        if self.config.normalize_advantage and advantages.shape[0] > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        pg_loss = -torch.min(
            advantages * ratio,
            advantages * ratio.clamp(1 - self.config.clip_range, 1 + self.config.clip_range),
        ).mean()

        if self.config.clip_range_vf is not None:
            new_values = old_values + (new_values - old_values).clamp(
                -self.config.clip_range_vf, self.config.clip_range_vf
            )
        value_loss = (returns - new_values).square().mean(dim=0).sum()  # sum over heads
        entropy_loss = -entropy.mean()
        loss = pg_loss + self.config.ent_coef * entropy_loss + self.config.vf_coef * value_loss

        log_ratio, ratio = log_ratio.detach(), ratio.detach()
        approx_kl = ((ratio - 1) - log_ratio).mean()  # the low-variance k3 estimator
        clip_fraction = ((ratio - 1).abs() > self.config.clip_range).float().mean()
        return loss, (pg_loss, value_loss, entropy_loss, approx_kl, clip_fraction)

    def _fused_update(self, batch: Sequence[torch.Tensor]) -> Any:
        """The compiled update for this minibatch size (compiled or loaded at first use);
        None for a shorter last minibatch, which runs eagerly."""
        from rewardlab.agents.fused import FusedUpdate

        if self._fused is None:
            self._fused = FusedUpdate(
                self.policy, self.optimizer, self._minibatch_loss, self.config.max_grad_norm, batch,
                self._recipe(),
            )  # fmt: skip
        return self._fused if self._fused.fits(batch) else None

    def _act(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """The policy's actions on a batch (its mean or a sample), Box actions clipped to the
        action bounds (:meth:`Learner.predict` is the public side)."""
        actions = self.policy.act(self._normalize_obs(obs), None, deterministic)
        if not self.policy.discrete:
            actions = torch.maximum(torch.minimum(actions, self._action_high), self._action_low)
        return actions

    def _saved_state(self) -> dict[str, Any]:
        """Spaces, networks, optimiser and statistics; the intrinsic module and ``reward_fn``
        are not saved: pass them again to ``PPO.load(path, env, intrinsic=..., reward_fn=...)``."""
        return {
            "observation_space": _space_to_dict(self.observation_space),
            "action_space": _space_to_dict(self.action_space),
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "obs_rms": self.obs_rms.state_dict(),
            "reward_rms": self.reward_rms.state_dict(),
        }

    def _restore(
        self,
        data: dict[str, Any],
        device: torch.device | str,
        intrinsic: IntrinsicModule | None = None,
        reward_fn: RolloutReward | None = None,
    ) -> None:
        """Rebuild from a saved file, with the intrinsic module and per-rollout reward the
        model was trained with, if any."""
        self._build(
            _space_from_dict(data["observation_space"]), _space_from_dict(data["action_space"]),
            device, data["seed"], PPOConfig.from_dict(data["hyperparameters"]), intrinsic,
        )  # fmt: skip
        self.reward_fn = reward_fn
        self.policy.load_state_dict(data["policy"])
        self.optimizer.load_state_dict(data["optimizer"])
        self.obs_rms.load_state_dict(data["obs_rms"])
        self.reward_rms.load_state_dict(data["reward_rms"])


def explained_variance(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``1 - Var[targets - predictions] / Var[targets]`` (NaN when the targets are constant).

    :param predictions: predicted values.
    :param targets: the returns they predict.
    """
    var_targets = targets.var()
    return 1 - (targets - predictions).var() / var_targets


def _check_spaces(
    observation_space: gymnasium.spaces.Space, action_space: gymnasium.spaces.Space
) -> None:
    if not isinstance(observation_space, gymnasium.spaces.Box):
        raise ValueError(f"PPO needs a Box observation space, got {observation_space}")
    if isinstance(action_space, gymnasium.spaces.Discrete):
        if int(action_space.start) != 0:
            raise ValueError(f"PPO needs Discrete actions starting at 0, got {action_space}")
    elif not (isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1):
        raise ValueError(f"PPO supports Discrete and 1-D Box action spaces, got {action_space}")


def _parse_value_heads(value_heads: Any, gamma: float) -> list[ValueHead]:
    """The value heads from ``value_heads=``: None, a list of names, or names -> options."""
    if value_heads is None:
        return [ValueHead(SUMMED_REWARD_HEAD, gamma)]
    if (
        isinstance(value_heads, str)
        or not isinstance(value_heads, Sequence | Mapping)
        or not value_heads
    ):
        raise ValueError(
            "value_heads must be None, a non-empty list of reward component names, or a dict "
            f"name -> {{'gamma', 'weight', 'episodic'}}, got value_heads={value_heads!r}"
        )
    items = (
        value_heads.items() if isinstance(value_heads, Mapping) else [(n, {}) for n in value_heads]
    )
    heads, seen = [], set()
    for name, options in items:
        if not isinstance(name, str) or not name or name == SUMMED_REWARD_HEAD or name in seen:
            raise ValueError(
                f"value_heads names must be distinct reward component names (not "
                f"{SUMMED_REWARD_HEAD!r}, the summed reward), got {name!r} in value_heads={value_heads!r}"
            )
        seen.add(name)
        if not isinstance(options, Mapping) or set(options) - set(HEAD_OPTIONS):
            raise ValueError(
                f"value_heads[{name!r}] must be a dict with keys among {HEAD_OPTIONS}, got {options!r}"
            )
        head = ValueHead(
            name,
            gamma=options.get("gamma", gamma),
            weight=options.get("weight", 1.0),
            episodic=options.get("episodic", True),
        )
        if not isinstance(head.gamma, int | float) or not 0.0 <= head.gamma <= 1.0:
            raise ValueError(
                f"value_heads[{name!r}]['gamma'] must be in [0, 1], got {head.gamma!r}"
            )
        if not isinstance(head.weight, int | float) or not math.isfinite(head.weight):
            raise ValueError(
                f"value_heads[{name!r}]['weight'] must be a finite number, got {head.weight!r}"
            )
        if not isinstance(head.episodic, bool):
            raise ValueError(
                f"value_heads[{name!r}]['episodic'] must be True or False, got {head.episodic!r}"
            )
        heads.append(head)
    return heads


def _check_intrinsic(intrinsic: Any, value_heads: Any) -> None:
    if intrinsic is None:
        return
    if not isinstance(intrinsic, IntrinsicModule):
        raise TypeError(
            f"intrinsic={intrinsic!r} is not a rewardlab.intrinsic.IntrinsicModule; subclass it "
            "(compute(obs, actions, next_obs, dones) -> (B,) and update(obs, actions, next_obs))"
        )
    names = list(value_heads) if value_heads is not None else [INTRINSIC_COMPONENT]
    if INTRINSIC_COMPONENT not in names:
        raise ValueError(
            f"value_heads={names} has no 'intrinsic' head for the bonus of "
            f"intrinsic={intrinsic.name!r}; add one (e.g. {{'intrinsic': {{'gamma': 0.99, "
            "'episodic': False}}) or leave value_heads=None for a non-episodic intrinsic head"
        )


def _checked_intrinsic_reward(reward: Any, size: int, module: IntrinsicModule) -> torch.Tensor:
    if not isinstance(reward, torch.Tensor) or tuple(reward.shape) != (size,):
        shape = tuple(reward.shape) if isinstance(reward, torch.Tensor) else type(reward).__name__
        raise ValueError(
            f"intrinsic module {module.name!r}.compute returned {shape}; expected a tensor of "
            f"shape ({size},), one bonus per transition of the flattened rollout"
        )
    return reward.to(torch.float32)


def _space_to_dict(space: gymnasium.spaces.Space) -> dict[str, Any]:
    if isinstance(space, gymnasium.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n)}
    return {
        "type": "Box",
        "low": torch.as_tensor(space.low),
        "high": torch.as_tensor(space.high),
        "dtype": str(np.dtype(space.dtype)),
    }


def _space_from_dict(data: dict[str, Any]) -> gymnasium.spaces.Space:
    if data["type"] == "Discrete":
        return gymnasium.spaces.Discrete(data["n"])
    dtype = np.dtype(data["dtype"])
    return gymnasium.spaces.Box(data["low"].numpy(), data["high"].numpy(), dtype=dtype)


