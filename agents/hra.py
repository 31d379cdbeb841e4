"""Hybrid Reward Architecture (van Seijen et al., 2017): one Q head per reward component.

The reward is split into components, ``R = sum_k R_k``; head ``k`` learns ``Q_k(s, a)`` from
``R_k`` alone, with its own target, and the agent acts greedily (epsilon-greedily while
training) on the weighted sum ``sum_k w_k Q_k(s, a)``. With a single head on the env's own
reward (``components=["extrinsic"]``) this is plain DQN, so HRA and DQN compare as one
implementation.

The whole algorithm reads top to bottom in ``HRA.learn``: act, step, store, train, log.
The details that decide whether it works are written out where they happen:

- which components the heads learn (``components=``, ``reward_components=``): by default
  every component the env reports except ``"extrinsic"`` when those add up to the reward
  (they decompose it, as ``fruit_0`` .. ``fruit_9`` do in FruitCollection), else all of them
  (``"extrinsic"`` alone on a plain env; ``"extrinsic"`` and ``"shaping"`` under a shaping
  wrapper). The heads must add up to the reward the agent is trained on: this is checked on
  the first step (a ``ValueError`` naming the components and the gap) and on every later step
  (the largest gap is kept on the device and read at each log);
- per-head targets ``r_k + gamma * (1 - terminated) * B_k(s')`` with ``B_k`` the max over
  actions of the target head (``bootstrap="max"``, Q-learning on each head) or the mean
  (``bootstrap="mean"``, the value of the uniformly random policy, the paper's best setting
  on fruit collection); truncated episodes bootstrap from ``info["final_obs"]``, the true
  last observation, not the reset one;
- the heads are separate small networks run together as batched matrix products, the hidden
  units of ``net_arch`` split evenly over them (250 units over 10 heads: 25 each, the paper's
  setting), so that HRA and a one-head DQN with the same ``net_arch`` have the same capacity;
  or one shared torso with a linear output per head (``shared_torso=True``);
- ``feature_masks``: each head sees only its own features (the paper's "HRA+1"), by masking
  its first layer's inputs;
- the env, the networks and the replay buffer share one device, and nothing crosses to numpy
  in the loop: statistics stay on the device until a log point reads them all at once.

Example::

    from rewardlab import envs
    from rewardlab.agents import HRA

    env = envs.make("FruitCollection-v0", num_envs=32, seed=0)
    model = HRA(env, bootstrap="mean", feature_masks=env.feature_masks(), seed=0)
    model.learn(100_000)
    actions, _ = model.predict(env.reset()[0])
    dqn = HRA(env, components=["extrinsic"], seed=0)  # plain DQN, same capacity
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch
from torch import nn

from rewardlab.agents.base import Learner, clipped_gradient_step
from rewardlab.agents.common import (
    HyperparameterCheck,
    LearnerConfig,
    check_batched,
    steps_bar,
)
from rewardlab.agents.logger import TensorBoardLogger
from rewardlab.common.networks import mlp
from rewardlab.common.threads import at_own_threads

EXTRINSIC = "extrinsic"
BOOTSTRAPS = ("max", "mean")

ComponentFunction = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Mapping[str, Any]],
    Mapping[str, torch.Tensor],
]


def select_components(
    available: Mapping[str, torch.Tensor],
    reward: torch.Tensor,
    requested: Sequence[str] | None = None,
) -> list[str]:
    """The components HRA gives a head each, checked to add up to ``reward``.

    :param available: the components of one batched step, ``name -> (N,)``.
    :param reward: the reward of that step, ``(N,)``.
    :param requested: the names asked for; None: every component but ``"extrinsic"`` if those
        add up to the reward (they decompose it), else every component.
    :raises ValueError: a requested name is not available, or the chosen components do not
        add up to the reward (the message names them and the gap).
    """
    if requested is None:
        decomposing = [name for name in available if name != EXTRINSIC]
        gap = component_gap(available, decomposing, reward) if decomposing else None
        adds_up = gap is not None and bool((gap.abs() <= sum_tolerance(reward)).all())
        names = decomposing if adds_up else list(available)
    else:
        missing = [name for name in requested if name not in available]
        if missing:
            raise ValueError(
                f"components {missing} are not reported (the reward components are "
                f"{list(available)}); name some of those, or pass reward_components= to "
                "compute them"
            )
        names = list(requested)
    gap = component_gap(available, names, reward)
    if bool((gap.abs() > sum_tolerance(reward)).any()):
        raise ValueError(components_sum_error(names, float(gap.abs().max()), list(available)))
    return names


def component_gap(
    components: Mapping[str, torch.Tensor], names: Sequence[str], reward: torch.Tensor
) -> torch.Tensor:
    """The sum of the named components minus the reward, per env ``(N,)``.

    :param components: ``name -> (N,)``.
    :param names: the components to add.
    :param reward: ``(N,)``.
    """
    return sum(components[name].to(reward.dtype) for name in names) - reward


def sum_tolerance(reward: torch.Tensor) -> torch.Tensor:
    """How far components may miss the reward (float rounding): ``1e-4 * (1 + |reward|)``.

    :param reward: ``(N,)``.
    """
    return 1e-4 * (1.0 + reward.abs())


def components_sum_error(names: Sequence[str], gap: float, reported: Sequence[str]) -> str:
    """The message of the ``ValueError`` raised when the heads' components miss the reward.

    :param names: the heads' components.
    :param gap: the largest ``|sum - reward|`` seen.
    :param reported: the components available.
    """
    return (
        f"the reward components {list(names)} do not add up to the reward: they differ from it "
        f"by up to {gap:.6g}. HRA's heads must decompose the reward the agent is trained on "
        f"(components available: {list(reported)}). Pass components=[...] naming components "
        "that add up to it, or reward_components=fn(obs, actions, next_obs, reward, info) -> "
        "{name: (N,) tensor} computing them"
    )


class MultiHeadQNetwork(nn.Module):
    """Q values of every head, ``(B, num_heads, num_actions)``, from flat observations.

    Separate heads (the default) are ``num_heads`` MLPs with ReLU, each with
    ``size // num_heads`` units in each hidden layer of ``hidden_sizes``, held as stacked
    weights and run together as batched matrix products. A shared torso is one MLP of
    ``hidden_sizes`` with a linear output of ``num_actions`` per head. Layers start as
    ``nn.Linear``'s default (uniform in ``+-1/sqrt(fan_in)``).

    :param obs_dim: number of observation features.
    :param num_actions: number of discrete actions.
    :param num_heads: number of heads.
    :param hidden_sizes: hidden units per layer, in total over the heads.
    :param shared_torso: one torso for all heads instead of one network per head.
    :param input_masks: ``(num_heads, obs_dim)`` bool, the features each head sees (separate
        heads only); None: all.
    """

    def __init__(
        self,
        obs_dim: int,
        num_actions: int,
        num_heads: int,
        hidden_sizes: Sequence[int],
        shared_torso: bool = False,
        input_masks: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.num_heads, self.num_actions, self.shared_torso = num_heads, num_actions, shared_torso
        if shared_torso:
            self.torso = mlp(obs_dim, hidden_sizes, num_heads * num_actions, activation="relu", init="default")
            return
        widths = [obs_dim, *(max(size // num_heads, 1) for size in hidden_sizes), num_actions]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(widths[:-1], widths[1:]):
            bound = 1.0 / math.sqrt(fan_in)
            self.weights.append(nn.Parameter(torch.empty(num_heads, fan_in, fan_out)))
            self.biases.append(nn.Parameter(torch.empty(num_heads, 1, fan_out)))
            nn.init.uniform_(self.weights[-1], -bound, bound)
            nn.init.uniform_(self.biases[-1], -bound, bound)
        if input_masks is None:
            input_masks = torch.ones(num_heads, obs_dim, dtype=torch.bool)
        self.register_buffer("input_masks", input_masks.to(torch.float32).unsqueeze(-1))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q values ``(B, num_heads, num_actions)``.

        :param obs: ``(B, obs_dim)`` float32.
        """
        if self.shared_torso:
            return self.torso(obs).view(-1, self.num_heads, self.num_actions)
        # All heads read the same input, so their first layers are one matrix product with
        # the heads side by side: (B, in) @ (in, H * out). Masking the first layer's weights
        # is masking each head's inputs.
        first = (self.weights[0] * self.input_masks).permute(1, 0, 2).flatten(1)
        x = torch.addmm(self.biases[0].flatten(), obs, first)
        x = x.view(len(obs), self.num_heads, -1).transpose(0, 1)  # (H, B, out)
        # Later layers: (H, B, in) @ (H, in, out), every head in one batched product.
        for weight, bias in zip(self.weights[1:], self.biases[1:]):
            x = torch.baddbmm(bias, torch.relu(x), weight)
        return x.transpose(0, 1)


class ReplayBuffer:
    """A circular buffer of transitions on one device, written a batch of envs at a time.

    :param capacity: transitions kept (the oldest are overwritten).
    :param obs_dim: number of observation features.
    :param num_heads: number of reward components per transition.
    :param device: where the storage lives.
    """

    def __init__(self, capacity: int, obs_dim: int, num_heads: int, device: torch.device) -> None:
        self.capacity, self.size, self.position = capacity, 0, 0
        self.obs = torch.zeros((capacity, obs_dim), device=device)
        self.next_obs = torch.zeros((capacity, obs_dim), device=device)
        self.actions = torch.zeros(capacity, dtype=torch.int64, device=device)
        self.rewards = torch.zeros((capacity, num_heads), device=device)
        self.terminated = torch.zeros(capacity, dtype=torch.bool, device=device)
        self._arange = torch.arange(capacity, device=device)

    def add(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None:
        """Store one transition per env.

        :param obs: ``(N, obs_dim)``.
        :param actions: ``(N,)``.
        :param rewards: ``(N, num_heads)``, the components.
        :param next_obs: ``(N, obs_dim)``, the true next observations (``final_obs``).
        :param terminated: ``(N,)`` bool.
        """
        count = len(actions)
        rows = (self._arange[:count] + self.position) % self.capacity
        self.obs[rows] = obs
        self.actions[rows] = actions
        self.rewards[rows] = rewards
        self.next_obs[rows] = next_obs
        self.terminated[rows] = terminated
        self.position = (self.position + count) % self.capacity
        self.size = min(self.size + count, self.capacity)

    def sample(
        self, batch_size: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``batch_size`` transitions drawn uniformly with replacement.

        :param batch_size: how many.
        :param generator: the random stream to draw from.
        :return: ``(obs, actions, rewards, next_obs, terminated)``.
        """
        rows = torch.randint(self.size, (batch_size,), generator=generator, device=self.obs.device)
        return (
            self.obs[rows], self.actions[rows], self.rewards[rows], self.next_obs[rows],
            self.terminated[rows],
        )  # fmt: skip


@dataclass(frozen=True)
class HRAConfig(LearnerConfig):
    """HRA's hyperparameters, named once (SB3's DQN names and defaults where they apply).

    Checked when made (a bad value raises ``ValueError`` naming it); saved with the model
    as plain data (:meth:`to_dict`, :meth:`from_dict`). ``HRA(env, **changes)`` and
    ``HRA(env, config=..., **changes)`` start from the defaults or from ``config``.

    :param bootstrap: ``"max"`` (Q-learning on each head; with one head, DQN) or ``"mean"``
        (each head learns the value of the uniformly random policy: the paper's best setting
        on fruit collection).
    :param shared_torso: one MLP torso with a linear output per head, instead of a separate
        network per head.
    :param net_arch: hidden units per layer in total: split evenly over separate heads, or
        the torso's sizes.
    :param learning_rate: Adam's step size.
    :param buffer_size: transitions the replay buffer keeps.
    :param learning_starts: transitions of uniformly random actions before training starts.
    :param batch_size: transitions per gradient step.
    :param gamma: discount of every head.
    :param train_freq: calls of ``env.step`` between training rounds.
    :param gradient_steps: gradient steps per training round.
    :param target_update_interval: transitions between target-network updates.
    :param tau: target update ``target <- tau * online + (1 - tau) * target`` (1: copy).
    :param exploration_fraction: the part of each ``learn`` call over which epsilon falls
        linearly from ``exploration_initial_eps`` to ``exploration_final_eps``.
    :param exploration_initial_eps: epsilon at the start.
    :param exploration_final_eps: epsilon at the end of the schedule and after.
    :param max_grad_norm: clip of the global gradient norm.
    :param log_interval: transitions between log points (TensorBoard, ``ep_info_buffer``,
        the component check and the callback).
    """

    learner: ClassVar[str] = "HRA"

    bootstrap: str = "max"
    shared_torso: bool = False
    net_arch: Sequence[int] = (250,)
    learning_rate: float = 1e-3
    buffer_size: int = 100_000
    learning_starts: int = 1_000
    batch_size: int = 256
    gamma: float = 0.99
    train_freq: int = 1
    gradient_steps: int = 1
    target_update_interval: int = 1_000
    tau: float = 1.0
    exploration_fraction: float = 0.1
    exploration_initial_eps: float = 1.0
    exploration_final_eps: float = 0.05
    max_grad_norm: float = 10.0
    log_interval: int = 1_000

    def __post_init__(self) -> None:
        _check_config(self)
        object.__setattr__(self, "net_arch", list(self.net_arch))  # plain data, for saving


def _check_config(config: HRAConfig) -> None:
    """Check every hyperparameter, naming the one that is wrong."""
    check = HyperparameterCheck(config)
    hp, fail, number, integer = check.values, check.fail, check.number, check.integer
    if hp["bootstrap"] not in BOOTSTRAPS:
        fail("bootstrap", f"one of {BOOTSTRAPS}")
    for name in ("buffer_size", "batch_size", "train_freq", "gradient_steps",
                 "target_update_interval", "log_interval"):  # fmt: skip
        if not integer(name) or hp[name] < 1:
            fail(name, "a positive integer")
    if not integer("learning_starts") or hp["learning_starts"] < 0:
        fail("learning_starts", "an integer >= 0")
    for name in ("gamma", "exploration_fraction", "exploration_initial_eps",
                 "exploration_final_eps"):  # fmt: skip
        if not number(name) or not 0.0 <= hp[name] <= 1.0:
            fail(name, "a number in [0, 1]")
    if not number("tau") or not 0.0 < hp["tau"] <= 1.0:
        fail("tau", "a number in (0, 1]")
    if not number("learning_rate") or hp["learning_rate"] <= 0:
        fail("learning_rate", "a positive number")
    if not (isinstance(hp["max_grad_norm"], int | float) and hp["max_grad_norm"] > 0):
        fail("max_grad_norm", "a positive number (math.inf: no clipping)")
    if not isinstance(hp["shared_torso"], bool):
        fail("shared_torso", "True or False")
    if isinstance(hp["net_arch"], str | bytes) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in hp["net_arch"]
    ):
        fail("net_arch", "a list of positive layer sizes (may be empty: linear heads)")


class HRA(Learner):
    """Hybrid Reward Architecture: a DQN with one Q head per reward component.

    Hyperparameters keep SB3's DQN names. Steps count transitions summed over the batched
    envs (``num_timesteps``), except ``train_freq``, which counts calls of ``env.step``.

    The constructor resets the env and takes one step (action 0 everywhere) to read the
    reward components it reports; ``learn`` resets it again with ``seed``.

    :param env: a batched env following ``docs/batched_envs.md`` with ``Discrete`` actions and
        a ``Box`` observation space.
    :param components: the reward components to give a head each (names in
        ``info["reward_components"]`` or in the dict ``reward_components`` returns); they
        must add up to the reward. None: of the components ``reward_components`` returns if
        given, else of those the env reports, every one but ``"extrinsic"`` if those add up
        to the reward, else all of them. ``["extrinsic"]``: plain DQN.
    :param reward_components: a function ``(obs, actions, next_obs, reward, info) -> {name:
        (N,) tensor}`` giving the components of each batched step (``next_obs`` is the true
        next observation); None: read ``info["reward_components"]``. Any dict source fits,
        e.g. a reward program's components.
    :param seed: seeds the networks, the exploration, the replay sampling and the env's
        first reset.
    :param device: where the networks live; must be the env's device (default: the env's).
    :param config: the hyperparameters (:class:`HRAConfig`); None: the defaults.
    :param head_weights: ``{name: weight}`` of each head in the action choice (default 1);
        change them later with :meth:`set_head_weights`.
    :param feature_masks: ``{name: bool mask shaped like one observation}``, the features the
        head of ``name`` sees (heads not named see all); separate heads only.
    :param tensorboard_log: folder for TensorBoard runs; None: no logging.
    :param threads: torch's intra-op threads while :meth:`learn` runs, on a CPU: 1 (the
        default; these networks and batched steps gain little from a second thread and lose
        many times their time where other work shares the cores), or None for torch's own
        setting. The caller's count is restored when ``learn`` returns; change it later as
        ``model.threads``.
    :param hyperparameters: changes to ``config`` by name (``HRA(env, gamma=0.9)``), as
        :meth:`HRAConfig.replace` takes them.
    """

    learner: ClassVar[str] = "HRA"
    sb3_alternative: ClassVar[str] = "DQN"
    file_format: ClassVar[str] = "rewardlab.agents.HRA/1"

    def __init__(
        self,
        env: Any,
        components: Sequence[str] | None = None,
        reward_components: ComponentFunction | None = None,
        seed: int = 0,
        device: torch.device | str | None = None,
        *,
        config: HRAConfig | None = None,
        head_weights: Mapping[str, float] | None = None,
        feature_masks: Mapping[str, Any] | None = None,
        tensorboard_log: str | os.PathLike[str] | None = None,
        threads: int | None = 1,
        **hyperparameters: Any,
    ) -> None:
        check_batched(env, "HRA", "DQN")
        self.threads = threads
        if device is not None and torch.device(device) != torch.device(env.device):
            raise ValueError(
                f"device={device!r} but the env lives on {env.device}; the env and the "
                "network must share one device (make the env there, or leave device=None)"
            )
        if reward_components is not None and not callable(reward_components):
            raise TypeError(
                "reward_components must be a function (obs, actions, next_obs, reward, info) -> "
                f"{{name: (N,) tensor}}, got {type(reward_components).__name__}"
            )
        if components is not None and (
            isinstance(components, str)
            or not isinstance(components, Sequence)
            or not components
            or len(set(components)) != len(components)
        ):
            raise ValueError(
                f"components must be None or a non-empty list of distinct names, got "
                f"components={components!r}"
            )
        _check_spaces(env.single_observation_space, env.single_action_space)
        self.reward_components = reward_components
        reward, reported, computed = _probe(env, reward_components, seed)
        if components is None:
            heads = select_components(computed if computed is not None else reported, reward)
        else:
            heads = select_components({**reported, **(computed or {})}, reward, components)
        if tensorboard_log is not None and not isinstance(tensorboard_log, str | os.PathLike):
            raise ValueError(f"tensorboard_log must be None or a folder path, got {tensorboard_log!r}")
        config = (config if config is not None else HRAConfig()).replace(**hyperparameters)
        masks = _checked_masks(feature_masks, heads, env.single_observation_space, config.shared_torso)
        self._build(
            env.single_observation_space, env.single_action_space, env.device, seed, heads,
            config, masks,
        )  # fmt: skip
        self.tensorboard_log = None if tensorboard_log is None else os.fspath(tensorboard_log)
        if head_weights is not None:
            self.set_head_weights(head_weights)
        self._check_env(env)
        self._attach(env, reward, reported, computed)

    def _build(
        self,
        observation_space: gymnasium.spaces.Space,
        action_space: gymnasium.spaces.Space,
        device: torch.device | str,
        seed: int,
        heads: list[str],
        config: HRAConfig,
        feature_masks: dict[str, torch.Tensor] | None,
    ) -> None:
        """Make the networks, optimiser and generator for ``config``."""
        _check_spaces(observation_space, action_space)
        self.config = config
        self.heads = list(heads)
        self.seed = seed
        self.device = torch.device(device)
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_shape = tuple(observation_space.shape)
        self.obs_dim = int(np.prod(self.obs_shape))
        self.num_actions = int(action_space.n)
        self.feature_masks = feature_masks

        torch.manual_seed(seed)
        self._generator = torch.Generator(self.device).manual_seed(seed)
        input_masks = None
        if feature_masks is not None:
            input_masks = torch.stack(
                [feature_masks.get(h, torch.ones(self.obs_dim, dtype=torch.bool)) for h in heads]
            )
        self.q_network = MultiHeadQNetwork(
            self.obs_dim, self.num_actions, len(heads), self.config.net_arch, self.config.shared_torso,
            input_masks,
        ).to(self.device)  # fmt: skip
        self.target_network = copy.deepcopy(self.q_network).requires_grad_(False)
        self.optimizer = torch.optim.Adam(
            self.q_network.parameters(), lr=self.config.learning_rate, fused=True
        )
        self._head_weights = torch.ones(len(heads), device=self.device)

        self.num_timesteps = 0
        self.exploration_rate = self.config.exploration_initial_eps
        self.ep_info_buffer: deque[dict[str, float]] = deque(maxlen=100)
        self.env: Any = None
        self._n_updates = 0
        self._last_obs: torch.Tensor | None = None
        self.replay_buffer: ReplayBuffer | None = None

    @property
    def head_weights(self) -> dict[str, float]:
        """The weight of each head in the action choice, ``{name: weight}``."""
        return dict(zip(self.heads, self._head_weights.tolist()))

    def set_head_weights(self, weights: Mapping[str, float] | Sequence[float]) -> None:
        """Change how much each head counts when choosing actions (training and ``predict``).

        :param weights: ``{name: weight}`` (heads not named keep theirs) or one weight per
            head, in the order of ``heads``.
        :raises ValueError: unknown head names, a wrong count or non-finite weights.
        """
        new = self._head_weights.clone()
        if isinstance(weights, Mapping):
            unknown = [name for name in weights if name not in self.heads]
            if unknown:
                raise ValueError(
                    f"set_head_weights: {unknown} are not heads; the heads are {self.heads}"
                )
            for name, weight in weights.items():
                new[self.heads.index(name)] = float(weight)
        else:
            values = [float(w) for w in weights]
            if len(values) != len(self.heads):
                raise ValueError(
                    f"set_head_weights got {len(values)} weights for {len(self.heads)} heads "
                    f"{self.heads}"
                )
            new = torch.tensor(values, device=self.device)
        if not bool(torch.isfinite(new).all()):
            raise ValueError(f"head weights must be finite numbers, got {weights!r}")
        self._head_weights = new

    def set_env(self, env: Any) -> None:
        """Attach a batched env (spaces and device must match the model's; the heads' components
        must be reported and add up to its reward, which one probing step checks); the next
        ``learn`` starts by resetting it. The replay buffer starts empty.

        :param env: a batched env, as for the constructor.
        """
        self._check_env(env)
        self._attach(env, *_probe(env, self.reward_components, self.seed))

    def _check_env(self, env: Any) -> None:
        """Check the env's kind, device and spaces against the model (:meth:`Learner.check_env`),
        and that one step of it fits the replay buffer."""
        self.check_env(env)
        if self.config.buffer_size < env.num_envs:
            raise ValueError(
                f"buffer_size={self.config.buffer_size} is smaller than one step of the env's "
                f"{env.num_envs} copies"
            )

    def _attach(
        self,
        env: Any,
        reward: torch.Tensor,
        reported: dict[str, torch.Tensor],
        computed: dict[str, torch.Tensor] | None,
    ) -> None:
        """Check the heads against a probed step of ``env`` and make the replay buffer."""
        available = {**reported, **(computed or {})}
        select_components(available, reward, self.heads)
        self.env = env
        self._last_obs = None
        # Logged as reward/<c> and episode/<c>: the env's components, then those the
        # reward_components function adds.
        self._logged_components = list(reported) + [n for n in available if n not in reported]
        self.replay_buffer = ReplayBuffer(
            self.config.buffer_size, self.obs_dim, len(self.heads), self.device
        )

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """Every head's Q values, ``(B, num_heads, num_actions)``, heads in the order of ``heads``.

        :param obs: ``(B, *obs_shape)`` on the model's device.
        """
        with torch.no_grad():
            return self.q_network(obs.reshape(len(obs), -1).to(torch.float32))

    @at_own_threads
    def learn(
        self,
        total_timesteps: int,
        callback: Callable[[dict[str, Any]], bool | None] | None = None,
        progress_bar: bool = False,
        tb_log_name: str = "HRA",
        reset_num_timesteps: bool = True,
    ) -> HRA:
        """Train for at least ``total_timesteps`` transitions (whole calls of ``env.step``).

        :param total_timesteps: transitions to train for, summed over the batched envs.
        :param callback: called as ``callback(locals())`` at every log point (each
            ``log_interval`` transitions), with ``learn``'s local variables: ``self``,
            ``iteration``, ``num_iterations`` and ``logged`` (the values written to
            TensorBoard, also without a log folder), among others. Returning False stops
            training.
        :param progress_bar: show a tqdm bar over transitions.
        :param tb_log_name: run-folder prefix under ``tensorboard_log``.
        :param reset_num_timesteps: start the step count (and the TensorBoard run) afresh
            and reset the env; False continues both (the replay buffer is kept either way).
        :return: self.
        """
        self._check_learn(total_timesteps, callback)
        env, buffer = self.env, self.replay_buffer
        num_envs, device, num_heads = env.num_envs, self.device, len(self.heads)
        if reset_num_timesteps:
            self.num_timesteps = 0
        if reset_num_timesteps or self._last_obs is None:
            self._last_obs, _ = env.reset(seed=self.seed)
            # Each env's running sums of the logged components and its episode length.
            self._episode_sums = torch.zeros(
                (num_envs, len(self._logged_components) + 1), device=device
            )
        obs = self._last_obs
        logger = (
            TensorBoardLogger(self.tensorboard_log, tb_log_name, new_run=reset_num_timesteps)
            if self.tensorboard_log is not None
            else None
        )
        bar = steps_bar(total_timesteps) if progress_bar else None

        num_iterations = math.ceil(total_timesteps / num_envs)
        log_every = max(self.config.log_interval // num_envs, 1)
        target_every = max(self.config.target_update_interval // num_envs, 1)
        # SB3's schedule: epsilon falls over a fraction of all steps, counting earlier calls.
        schedule_steps = self.config.exploration_fraction * (total_timesteps + self.num_timesteps)
        window = _Window(log_every, self._episode_sums, num_heads)
        start_time, start_timesteps = time.perf_counter(), self.num_timesteps
        for iteration in range(1, num_iterations + 1):
            # Act: epsilon-greedy on the weighted sum of the heads (uniform before learning_starts).
            progress = min(self.num_timesteps / schedule_steps, 1.0) if schedule_steps > 0 else 1.0
            self.exploration_rate = self.config.exploration_initial_eps + progress * (
                self.config.exploration_final_eps - self.config.exploration_initial_eps
            )
            random_actions = torch.randint(
                self.num_actions, (num_envs,), generator=self._generator, device=device
            )
            if self.num_timesteps < self.config.learning_starts:
                actions = random_actions
            else:
                with torch.no_grad():
                    greedy = self._greedy(self.q_network(obs.reshape(num_envs, -1)))
                explore = (
                    torch.rand(num_envs, generator=self._generator, device=device)
                    < self.exploration_rate
                )
                actions = torch.where(explore, random_actions, greedy)

            next_obs, reward, terminated, truncated, info = env.step(actions)
            final_obs = info["final_obs"]  # the true next observation where an episode ended
            components = info["reward_components"]
            if self.reward_components is not None:
                components = components | self.reward_components(
                    obs, actions, final_obs, reward, info
                )
            head_rewards = torch.stack([components[h] for h in self.heads], dim=1).float()
            logged_values = torch.stack(
                [components[name] for name in self._logged_components], dim=1
            ).float()
            window.record(
                head_rewards.sum(dim=1) - reward, reward, logged_values, terminated | truncated
            )
            buffer.add(
                obs.reshape(num_envs, -1), actions, head_rewards,
                final_obs.reshape(num_envs, -1), terminated,
            )  # fmt: skip
            obs = next_obs
            self.num_timesteps += num_envs

            # Train each head on its own component, with its own bootstrapped target.
            if self.num_timesteps >= self.config.learning_starts and iteration % self.config.train_freq == 0:
                for _ in range(self.config.gradient_steps):
                    window.record_training(*self._train_step())
            if iteration % target_every == 0:
                self._update_target()

            if iteration % log_every == 0 or iteration == num_iterations:
                self._last_obs = obs
                logged = self._log_point(window, start_time, start_timesteps)
                if logger is not None:
                    logger.record(logged, self.num_timesteps)
                if bar is not None:
                    bar.update(min(self.num_timesteps - start_timesteps, total_timesteps) - bar.n)
                if callback is not None and callback(locals()) is False:
                    break
        self._last_obs = obs
        if logger is not None:
            logger.close()
        if bar is not None:
            bar.close()
        return self

    def _greedy(self, q: torch.Tensor) -> torch.Tensor:
        """The action maximising the weighted sum of the heads, ``(B,)``, from ``(B, H, A)``."""
        return torch.einsum("bha,h->ba", q, self._head_weights).argmax(dim=-1)

    def _train_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One gradient step on a replay batch; returns the per-head losses and mean Q values."""
        obs, actions, rewards, next_obs, terminated = self.replay_buffer.sample(
            self.config.batch_size, self._generator
        )
        with torch.no_grad():
            next_q = self.target_network(next_obs)  # (B, H, A)
            # max: each head's own greedy value (Q-learning per head); mean: the uniformly
            # random policy's value. Terminated transitions have no future; truncated ones
            # bootstrap from the true last observation stored as next_obs.
            next_values = next_q.amax(dim=-1) if self.config.bootstrap == "max" else next_q.mean(dim=-1)
            targets = rewards + self.config.gamma * (~terminated).unsqueeze(1) * next_values
        q = self.q_network(obs)
        taken = actions.view(-1, 1, 1).expand(-1, q.shape[1], 1)
        q_taken = q.gather(2, taken).squeeze(2)  # (B, H)
        losses = nn.functional.smooth_l1_loss(q_taken, targets, reduction="none").mean(dim=0)
        clipped_gradient_step(self.optimizer, losses.sum(), self.config.max_grad_norm)
        self._n_updates += 1
        return losses.detach(), q_taken.detach().mean(dim=0)

    def _update_target(self) -> None:
        """``target <- tau * online + (1 - tau) * target``."""
        with torch.no_grad():
            for target, online in zip(
                self.target_network.parameters(), self.q_network.parameters()
            ):
                target.lerp_(online, self.config.tau)

    def _log_point(
        self, window: _Window, start_time: float, start_timesteps: int
    ) -> dict[str, float]:
        """Read the window's statistics (one host sync), check the components, fill
        ``ep_info_buffer`` and return the values to log."""
        excess, max_gap, step_means, finished, losses, q_means = window.read()
        if excess > 0:
            raise ValueError(components_sum_error(self.heads, max_gap, self._logged_components))
        names = self._logged_components
        logged: dict[str, float] = {f"reward/{n}": step_means[i] for i, n in enumerate(names)}
        if finished:
            means = np.mean(finished, axis=0)
            logged |= {f"episode/{n}": float(means[i]) for i, n in enumerate(names)}
            extrinsic = names.index(EXTRINSIC)
            now = time.perf_counter()
            for row in finished[-self.ep_info_buffer.maxlen :]:
                self.ep_info_buffer.append({"r": row[extrinsic], "l": int(row[-1]), "t": now})
        if losses is not None:
            logged |= {f"train/loss_{h}": losses[i] for i, h in enumerate(self.heads)}
            logged |= {f"train/q_{h}": q_means[i] for i, h in enumerate(self.heads)}
            logged["train/loss"] = float(sum(losses))
        logged["train/n_updates"] = self._n_updates
        logged["train/learning_rate"] = self.config.learning_rate
        logged["rollout/exploration_rate"] = self.exploration_rate
        if self.ep_info_buffer:
            logged["rollout/ep_rew_mean"] = float(np.mean([e["r"] for e in self.ep_info_buffer]))
            logged["rollout/ep_len_mean"] = float(np.mean([e["l"] for e in self.ep_info_buffer]))
        elapsed = time.perf_counter() - start_time
        logged["time/fps"] = int((self.num_timesteps - start_timesteps) / max(elapsed, 1e-9))
        window.clear()
        return logged

    def _act(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """Greedy on the weighted sum of the heads; ``deterministic=False`` takes a uniformly
        random action with probability ``exploration_rate`` (:meth:`Learner.predict` is the
        public side)."""
        actions = self._greedy(self.q_values(obs))
        if not deterministic:
            explore = torch.rand(len(obs), device=self.device) < self.exploration_rate
            random_actions = torch.randint(self.num_actions, (len(obs),), device=self.device)
            actions = torch.where(explore, random_actions, actions)
        return actions

    def _saved_state(self) -> dict[str, Any]:
        """Heads, weights, masks, networks, optimiser and exploration rate; the replay buffer
        and a ``reward_components`` function are not saved: pass the function again to
        ``HRA.load(path, env, reward_components=...)``."""
        return {
            "heads": self.heads,
            "head_weights": self._head_weights.cpu(),
            "feature_masks": (
                None
                if self.feature_masks is None
                else {n: m.cpu() for n, m in self.feature_masks.items()}
            ),
            "observation_space": {
                "low": torch.as_tensor(self.observation_space.low),
                "high": torch.as_tensor(self.observation_space.high),
            },
            "num_actions": self.num_actions,
            "q_network": self.q_network.state_dict(),
            "target_network": self.target_network.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "exploration_rate": self.exploration_rate,
        }

    def _restore(
        self,
        data: dict[str, Any],
        device: torch.device | str,
        reward_components: ComponentFunction | None = None,
    ) -> None:
        """Rebuild from a saved file, with the components function the model was trained
        with, if any."""
        space = data["observation_space"]
        observation_space = gymnasium.spaces.Box(
            space["low"].numpy(), space["high"].numpy(), dtype=np.float32
        )
        self.reward_components = reward_components
        self._build(
            observation_space, gymnasium.spaces.Discrete(data["num_actions"]), device,
            data["seed"], data["heads"], HRAConfig.from_dict(data["hyperparameters"]),
            data["feature_masks"],
        )  # fmt: skip
        self.q_network.load_state_dict(data["q_network"])
        self.target_network.load_state_dict(data["target_network"])
        self.optimizer.load_state_dict(data["optimizer"])
        self._head_weights = data["head_weights"].to(self.device)
        self.exploration_rate = data["exploration_rate"]


class _Window:
    """On-device statistics between two log points, read back all at once.

    Per env step: the largest gap between the heads' sum and the reward (and how far it
    exceeds the tolerance), the sums of the logged components, and each env's running
    episode sums (components and length), kept at the steps where episodes end. Per gradient
    step: per-head losses and mean Q values of the actions taken.

    :param length: env steps between log points.
    :param episode_sums: ``(N, C + 1)`` running sums, updated in place (they carry over from
        one window, and one ``learn`` call, to the next).
    :param num_heads: number of heads.
    """

    def __init__(self, length: int, episode_sums: torch.Tensor, num_heads: int) -> None:
        device, (num_envs, width) = episode_sums.device, episode_sums.shape
        self.t, self.train_steps, self.num_envs = 0, 0, num_envs
        self.episode_sums = episode_sums
        self.excess = torch.full((), -math.inf, device=device)
        self.max_gap = torch.zeros((), device=device)
        self.step_sums = torch.zeros(width - 1, device=device)
        self.at_episode_end = torch.zeros((length, num_envs, width), device=device)
        self.ended = torch.zeros((length, num_envs), dtype=torch.bool, device=device)
        self.loss_sums = torch.zeros(num_heads, device=device)
        self.q_sums = torch.zeros(num_heads, device=device)

    def record(
        self, gap: torch.Tensor, reward: torch.Tensor, values: torch.Tensor, ended: torch.Tensor
    ) -> None:
        """Add one env step.

        :param gap: ``(N,)`` the heads' components' sum minus the reward.
        :param reward: ``(N,)`` the reward.
        :param values: ``(N, C)`` the logged components.
        :param ended: ``(N,)`` bool, episodes that ended at this step.
        """
        excess = (gap.abs() - sum_tolerance(reward)).max()
        torch.maximum(self.excess, excess, out=self.excess)
        torch.maximum(self.max_gap, gap.abs().max(), out=self.max_gap)
        self.step_sums += values.sum(dim=0)
        self.episode_sums[:, :-1] += values
        self.episode_sums[:, -1] += 1.0
        self.at_episode_end[self.t] = self.episode_sums
        self.ended[self.t] = ended
        self.episode_sums.mul_((~ended).unsqueeze(1))
        self.t += 1

    def record_training(self, losses: torch.Tensor, q_means: torch.Tensor) -> None:
        """Add one gradient step's per-head losses and mean Q values, ``(H,)`` each."""
        self.loss_sums += losses
        self.q_sums += q_means
        self.train_steps += 1

    def read(
        self,
    ) -> tuple[float, float, list[float], list[list[float]], list[float] | None, list[float]]:
        """``(excess, max_gap, per-step means, finished episodes' sums in time order, mean
        losses or None without training, mean Qs)``, in one host sync."""
        finished = self.at_episode_end[: self.t][self.ended[: self.t]]
        steps, train = max(self.t * self.num_envs, 1), max(self.train_steps, 1)
        packed = torch.cat(
            [
                self.excess.view(1), self.max_gap.view(1), self.step_sums / steps,
                self.loss_sums / train, self.q_sums / train, finished.flatten(),
            ]
        ).tolist()  # fmt: skip
        sizes = [1, 1, len(self.step_sums), len(self.loss_sums), len(self.q_sums)]
        parts, offset = [], 0
        for size in sizes:
            parts.append(packed[offset : offset + size])
            offset += size
        width = self.episode_sums.shape[1]
        rows = [packed[i : i + width] for i in range(offset, len(packed), width)]
        losses = parts[3] if self.train_steps else None
        return parts[0][0], parts[1][0], parts[2], rows, losses, parts[4]

    def clear(self) -> None:
        """Start the next window."""
        self.t, self.train_steps = 0, 0
        self.excess.fill_(-math.inf)
        self.max_gap.zero_()
        self.step_sums.zero_()
        self.loss_sums.zero_()
        self.q_sums.zero_()


def _probe(
    env: Any, reward_components: ComponentFunction | None, seed: int
) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor] | None]:
    """Reset ``env`` and take one step of action 0.

    :return: ``(reward, info["reward_components"], what reward_components computed or None)``.
    """
    obs, _ = env.reset(seed=seed)
    actions = torch.zeros(env.num_envs, dtype=torch.int64, device=env.device)
    _, reward, _, _, info = env.step(actions)
    reported = info.get("reward_components")
    if not isinstance(reported, Mapping) or EXTRINSIC not in reported:
        raise ValueError(
            f"the env reports no 'extrinsic' reward component (info['reward_components'] is "
            f"{reported!r}); batched envs must put their own reward there (docs/batched_envs.md)"
        )
    if reward_components is None:
        return reward, dict(reported), None
    computed = reward_components(obs, actions, info["final_obs"], reward, info)
    if not isinstance(computed, Mapping) or not computed:
        raise ValueError(
            f"reward_components must return a non-empty dict name -> ({env.num_envs},) tensor, "
            f"got {computed!r}"
        )
    bad = {
        name: tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        for name, value in computed.items()
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != (env.num_envs,)
    }
    if bad:
        raise ValueError(
            f"reward_components must return tensors of shape ({env.num_envs},), one value per "
            f"env; got {bad}"
        )
    return reward, dict(reported), dict(computed)


def _check_spaces(
    observation_space: gymnasium.spaces.Space, action_space: gymnasium.spaces.Space
) -> None:
    if not isinstance(observation_space, gymnasium.spaces.Box):
        raise ValueError(f"HRA needs a Box observation space, got {observation_space}")
    if not isinstance(action_space, gymnasium.spaces.Discrete) or int(action_space.start) != 0:
        raise ValueError(f"HRA needs Discrete actions starting at 0, got {action_space}")


def _checked_masks(
    feature_masks: Mapping[str, Any] | None,
    heads: Sequence[str],
    observation_space: gymnasium.spaces.Space,
    shared_torso: bool,
) -> dict[str, torch.Tensor] | None:
    """The feature masks as flat bool CPU tensors, checked against the heads and the space."""
    if feature_masks is None:
        return None
    if not isinstance(feature_masks, Mapping):
        raise ValueError(
            f"feature_masks must be a dict head name -> bool mask, got {type(feature_masks).__name__}"
        )
    if shared_torso:
        raise ValueError(
            "feature_masks need separate heads (each head's network sees its own features); "
            "use shared_torso=False"
        )
    unknown = [name for name in feature_masks if name not in heads]
    if unknown:
        raise ValueError(
            f"feature_masks names {unknown}, which are not heads; the heads are {list(heads)}"
        )
    obs_shape = tuple(observation_space.shape)
    masks = {}
    for name, mask in feature_masks.items():
        mask = torch.as_tensor(np.asarray(mask.cpu() if isinstance(mask, torch.Tensor) else mask))
        if mask.dtype != torch.bool or tuple(mask.shape) != obs_shape:
            raise ValueError(
                f"feature_masks[{name!r}] must be a bool mask of shape {obs_shape} (one "
                f"observation), got dtype {mask.dtype} and shape {tuple(mask.shape)}"
            )
        if not bool(mask.any()):
            raise ValueError(f"feature_masks[{name!r}] selects no feature")
        masks[name] = mask.flatten()
    return masks


