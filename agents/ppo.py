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
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import gymnasium
import numpy as np
import torch
from torch import nn

from rewardlab.agents.base import Learner, clipped_gradient_step, predict_in_form
from rewardlab.agents.common import check_batched, steps_bar
from rewardlab.agents.fused import PPOCompiled
from rewardlab.agents.logger import TensorBoardLogger
from rewardlab.agents.networks import ActorCritic, RecurrentActorCritic, Sampler
from rewardlab.agents.ppo_config import (
    INTRINSIC_COMPONENT,
    MUJOCO_CONFIG,
    MUJOCO_NUM_ENVS,
    PPOConfig,
    ValueHead,
    check_intrinsic,
    check_spaces,
    default_n_steps,
    parse_value_heads,
    space_from_dict,
    space_to_dict,
    split_net_arch,
)
from rewardlab.agents.rollout import Rollout, episode_sums
from rewardlab.common.running_stats import RunningMeanStd
from rewardlab.common.threads import at_own_threads
from rewardlab.envs.core import carried_steps
from rewardlab.intrinsic.base import IntrinsicModule

__all__ = [
    "MUJOCO_CONFIG", "MUJOCO_NUM_ENVS", "PPO", "ActorCritic", "MinibatchLosses", "PPOConfig",
    "ValueHead", "compute_gae", "default_n_steps", "episode_sums", "explained_variance",
]  # fmt: skip


#: ``reward_fn(obs, actions, next_obs, terminated, env_reward) -> (reward, components)``
#: on a rollout's transitions (see :class:`PPO`)
RolloutReward = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    tuple[torch.Tensor, Mapping[str, torch.Tensor]],
]


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


#: the most steps one compiled call of the rollout runs: a graph of more steps compiles for
#: longer (its first compile grows faster than its length: one-off trials on Pendulum-v1, 8
#: steps about twice 1 step's time, 16 steps several times) and saves little more
MAX_FUSED_STEPS = 8


def fused_steps(n_steps: int) -> int:
    """Steps per compiled call of a rollout of ``n_steps``: its largest divisor up to
    :data:`MAX_FUSED_STEPS`, so that every call runs the same compiled graph."""
    return max(k for k in range(1, min(n_steps, MAX_FUSED_STEPS) + 1) if n_steps % k == 0)


class SteppedRollout(NamedTuple):
    """What one call of the rollout's steps (:class:`_RolloutSteps`) returns: where the env
    is after its last step, then each step's tensors stacked over its steps, ``(steps, N, ...)``."""

    next_obs: torch.Tensor  # the observation after the last step
    carry: tuple[torch.Tensor, ...]  # the env's state after the last step
    obs: torch.Tensor  # the observations acted on
    actions: torch.Tensor  # as sampled
    log_prob: torch.Tensor  # the behaviour policy's log-probability of the actions
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor  # the state each step led to (the true last obs where an episode ended)
    done: torch.Tensor
    components: torch.Tensor  # the env's reward components, (steps, C, N)

    @classmethod
    def of(cls, flat: Sequence[torch.Tensor], carry_size: int) -> SteppedRollout:
        """The fields of :meth:`_RolloutSteps.forward`'s flat tuple (as a compiled call
        returns it)."""
        return cls(flat[0], tuple(flat[1 : 1 + carry_size]), *flat[1 + carry_size :])


class _RolloutSteps(nn.Module):
    """``steps`` steps of the rollout as one function of tensors: PPO's only rollout code,
    run eagerly, or compiled with ``compile=True`` (the env's step inside the graph where it
    is pure tensor math, :meth:`BatchedEnv.advance_carried` through any wrappers that carry
    it; an env with a step of its own is stepped through its adapter,
    :func:`rewardlab.envs.core.carried_steps`, eagerly).
    Each step: the policy acts (:class:`Sampler`), the env takes the actions (clipped to
    the bounds) and steps, and the step's tensors and reward components are kept. It returns
    a :class:`SteppedRollout` flattened to a tuple of tensors (as a compiled graph returns).
    A ``recurrent`` policy's memory rides first in the carry, before the env's state, and is
    zeroed where an episode ended (the next step starts a fresh one)."""

    def __init__(self, sampler: Callable[..., Sequence[torch.Tensor]], env: Any, steps: int,
                 bounds: tuple[torch.Tensor, torch.Tensor] | None, recurrent: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.sampler, self.env, self.steps, self.bounds = sampler, env, steps, bounds
        self.recurrent = recurrent

    def forward(
        self, obs: torch.Tensor, fresh: torch.Tensor, noise: torch.Tensor, mean: torch.Tensor,
        inv_std: torch.Tensor, *carry: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        num_envs, kept = obs.shape[0], []
        memory, carry = (carry[:1], carry[1:]) if self.recurrent else ((), carry)
        for t in range(self.steps):
            actions, log_prob, *memory = self.sampler(obs, noise[t], mean, inv_std, *memory)
            taken = actions if self.bounds is None else torch.clamp(actions, *self.bounds)
            carry, step, components = self.env.advance_carried(
                carry, taken, fresh[:, t * num_envs : (t + 1) * num_envs]
            )
            next_obs, reward, terminated, truncated, done, final_obs = step
            memory = [state * (~done).unsqueeze(-1) for state in memory]
            kept.append((obs, actions, log_prob, reward, terminated, truncated, final_obs, done,
                         torch.stack(components)))  # fmt: skip
            obs = next_obs
        stacked = (torch.stack(column) for column in zip(*kept, strict=True))
        return (obs, *memory, *carry, *stacked)


class MinibatchLosses(NamedTuple):
    """PPO's loss on one minibatch and its terms, 0-d tensors (the last two detached)."""

    loss: torch.Tensor  # pg_loss + ent_coef * entropy_loss + vf_coef * value_loss
    pg_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy_loss: torch.Tensor
    approx_kl: torch.Tensor
    clip_fraction: torch.Tensor

    def detached(self) -> MinibatchLosses:
        """The same values, out of the autograd graph."""
        return MinibatchLosses(*(term.detach() for term in self))


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
    :param threads: torch's intra-op threads while :meth:`learn` runs, on a CPU: 1 (the
        default; these networks and batched steps gain little from a second thread and lose
        many times their time where other work shares the cores), or None for torch's own
        setting. The caller's count is restored when ``learn`` returns; change it later as
        ``model.threads``.
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
        threads: int | None = 1,
        **hyperparameters: Any,
    ) -> None:
        check_batched(env, "PPO", "PPO")
        self.threads = threads
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
        check_spaces(observation_space, action_space)
        check_intrinsic(intrinsic, config.value_heads)
        self.heads = parse_value_heads(config.value_heads, config.gamma)
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
        pi_sizes, vf_sizes = split_net_arch(self.config.net_arch)
        network = (self.config.activation, self.config.log_std_init, self.config.image_shape)
        if self.config.recurrent is None:
            self.policy = ActorCritic(
                observation_space, action_space, pi_sizes, vf_sizes, len(self.heads), *network
            ).to(self.device)
        else:
            self.policy = RecurrentActorCritic(
                observation_space, action_space, pi_sizes, vf_sizes, len(self.heads), *network,
                self.config.recurrent, self.config.recurrent_hidden_size,
            ).to(self.device)  # fmt: skip
        self._parameters = list(self.policy.parameters())
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
        self._compiled = PPOCompiled(self.policy, self.optimizer, self._recipe)

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
        if self.config.recurrent is not None and (self.config.batch_size or 0) % self.n_steps:
            raise ValueError(
                f"batch_size={self.config.batch_size} is not a multiple of n_steps={self.n_steps}: "
                f"a recurrent policy's minibatches are whole env sequences of n_steps steps; pass "
                f"batch_size={max(self.config.batch_size // self.n_steps, 1) * self.n_steps} or None"
            )
        # An intrinsic module reads a rollout as time-major rows of num_envs envs (its
        # return filter and episodic counts depend on it): tell it how many.
        if self.intrinsic is not None:
            self.intrinsic.set_num_envs(env.num_envs)
        self.env = env
        self._last_obs = None
        #: a recurrent policy's memory of each env's episode under way, and the memory the
        #: last rollout started from (its update re-runs the rollout from there)
        self._memory: torch.Tensor | None = None
        self._rollout_memory: torch.Tensor | None = None
        action_shape = None if self.policy.discrete else tuple(self.action_space.shape)
        self._rollout = Rollout.empty(
            self.n_steps, env.num_envs, tuple(self.observation_space.shape), action_shape, self.device
        )
        # compiled for the previous env's shapes (compile=True): made again at first use
        self._compiled = PPOCompiled(self.policy, self.optimizer, self._recipe)
        # The env's steps as the rollout runs them: its own carried steps where it steps by
        # BatchedEnv's (bare, or under wrappers whose steps are tensor math on it), else
        # its step adapted. With compile, the carried steps run inside PPO's compiled
        # steps (_RolloutSteps) where they are known to trace; others run eagerly between
        # compiled steps of the policy.
        self._env_steps = carried_steps(env)
        self._env_steps_compile = self._env_steps is env and env.advance_traces

    def warm_up(self) -> float:
        """Compile the minibatch step, the rollout's steps and the values now (or load them
        from the cache), so that the first ``learn`` does not pay for it; nothing is
        trained and no random number drawn. A no-op without ``compile``.

        :return: the seconds it took.
        """
        if self.env is None:
            raise ValueError("this model has no env: pass env= to PPO.load or call set_env(env)")
        start = time.perf_counter()
        if self.config.compile:
            # the rollout's own buffers as examples: only their shapes and dtypes matter
            rollout, size = self._rollout, self.n_steps * self.env.num_envs
            obs = rollout.obs.reshape(size, *rollout.obs.shape[2:])
            actions = rollout.actions.reshape(size, *rollout.actions.shape[2:])
            batch_size = self.config.batch_size or max(size // 4, 1)
            vector = torch.zeros(size, device=self.device)
            per_head = torch.zeros((size, len(self.heads)), device=self.device)
            rollout_tensors = (obs, actions, vector, vector, per_head, per_head)
            if self.config.recurrent is None:
                batch = (*rollout_tensors, torch.arange(batch_size, device=self.device))
            else:  # as _update passes them: time-major, episode ends, start memory, env indices
                T, N = self.n_steps, self.env.num_envs
                sequences = (c.reshape(T, N, *c.shape[1:]) for c in rollout_tensors)
                ended = torch.zeros((T, N), dtype=torch.bool, device=self.device)
                envs = torch.arange(max(batch_size // T, 1), device=self.device)
                batch = (*sequences, ended, *self._memory_example(), envs)
            self._compiled.update(batch, self._loss, self.config.max_grad_norm)
            self._rollout_steps()
            if self.config.recurrent is None:  # a recurrent policy's values are re-run eagerly
                rows = size + self.env.num_envs
                self._values(torch.zeros((rows, *obs.shape[1:]), device=self.device))
        return time.perf_counter() - start

    @at_own_threads
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
        self._check_learn(total_timesteps, callback)
        env, rollout = self.env, self._rollout
        if reset_num_timesteps:
            self.num_timesteps = 0
        if reset_num_timesteps or self._last_obs is None:
            first_reset = self._rollout.component_names is None
            self._last_obs, _ = env.reset(seed=self.seed if first_reset else None)
            if self.config.recurrent is not None:
                self._memory = self.policy.initial_state(env.num_envs, self.device)
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

            self._collect_rollout()
            if self.reward_fn is not None:
                rollout.relabel(self.reward_fn, self._taken(rollout.actions))
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
            episode_ended = rollout.terminated | rollout.truncated
            all_obs = torch.cat([flat_obs, self._normalize_obs(self._last_obs)])
            memories = None
            if self.config.recurrent is None:
                if seeding_stats:
                    with torch.no_grad():
                        behaviour_log_prob, _ = self.policy.log_prob_and_entropy(flat_obs, flat_actions)
                values = self._values(all_obs)
            else:
                # A recurrent policy's memory at each step (and one step on, at the observation
                # after the last), re-run from the rollout's start as the update re-runs it.
                with torch.no_grad():
                    ended = torch.cat([episode_ended, torch.zeros_like(episode_ended[:1])])
                    memories = self.policy.unroll(
                        all_obs.reshape(T + 1, N, *all_obs.shape[1:]), self._rollout_memory, ended
                    )
                    values = self.policy.critic(self.policy.output(memories))
                    if seeding_stats:
                        behaviour_log_prob, _, _ = self.policy(
                            flat_obs.reshape(T, N, *flat_obs.shape[1:]),
                            rollout.actions, self._rollout_memory, episode_ended,
                        )  # fmt: skip
            values = values.reshape(T + 1, N, -1)

            # Intrinsic reward on the whole rollout, flattened time-major (row t * N + env);
            # next_obs is the true successor (final_obs where an episode ended).
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

            # episode statistics of every component, and of the intrinsic bonus (a fusion's
            # modules each under its own name, raw, as the SB3 integration logs them)
            extra = {}
            if intrinsic_reward is not None:
                extra[f"intrinsic/{self.intrinsic.name}"] = intrinsic_reward
                for part, bonus in getattr(self.intrinsic, "last_parts", {}).items():
                    extra[f"intrinsic/{self.intrinsic.name}/{part}"] = bonus.to(self.device).reshape(T, N)
            stats, self._episode_sums = rollout.episode_statistics(
                extra, self._episode_sums, episode_ended, self.ep_info_buffer
            )

            # Rewards per head: a component, or the summed reward (plus any intrinsic bonus).
            head_rewards = rollout.head_rewards(self.heads, intrinsic_reward)
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
                final_obs = self._normalize_obs(rollout.final_obs[cut])
                if memories is None:
                    final_values = self._values(final_obs)
                else:  # read on from the memory of the episode's last step
                    with torch.no_grad():
                        memory = self.policy.step(final_obs, memories[:-1][cut])
                        final_values = self.policy.critic(self.policy.output(memory))
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

    def _collect_rollout(self) -> None:
        """Step the env ``n_steps`` times, storing each step's observation, action, its
        log-probability and what the env returned: calls of :class:`_RolloutSteps` of
        :func:`fused_steps` steps each (compiled with ``compile``), then the env takes the
        last carry as its own.

        Only acting and copying happen here; values and episode statistics are computed
        afterwards over the whole rollout, so the steps have no host syncs and few ops.
        """
        env, rollout, obs = self._env_steps, self._rollout, self._last_obs
        steps, rms = fused_steps(self.n_steps), self.obs_rms
        # The reset states of the rollout's episode ends, drawn ahead where the env keeps
        # them, so that eager and compiled rollouts run the same episodes from one seed.
        fresh = env.reset_states_ahead(self.n_steps)
        # the sampling noise of the whole rollout in one draw (one operator, not one a step)
        noise = self.policy.draw_noise((self.n_steps, *self._noise_shape()), self._generator, self.device)
        call = self._rollout_steps()
        # a recurrent policy's memory rides first in the carry (see _RolloutSteps)
        memory = () if self._memory is None else (self._memory,)
        self._rollout_memory = self._memory
        carry = (*memory, *env.carried())
        chunks: list[SteppedRollout] = []
        num_envs = self.env.num_envs
        with torch.no_grad():
            for start in range(0, self.n_steps, steps):
                out = call(
                    obs, fresh[:, start * num_envs : (start + steps) * num_envs],
                    noise[start : start + steps], *rms.whitening, *carry,
                )  # fmt: skip
                chunks.append(SteppedRollout.of(out, len(carry)))
                obs, carry = chunks[-1].next_obs, chunks[-1].carry
            if memory:
                self._memory, carry = carry[0], carry[1:]
            stored = ("obs", "actions", "log_prob", "rewards", "terminated", "truncated", "final_obs")
            for name in stored:
                torch.cat([getattr(chunk, name) for chunk in chunks], out=getattr(rollout, name))
            if rollout.component_names is None:
                first = dict(zip(env.component_names, chunks[0].components[0], strict=True))
                rollout.check_first_step(rollout.rewards[0], first, self.heads, self.intrinsic is not None)
            assert rollout.components is not None and rollout.component_names is not None
            # (steps, C, N) a call, into the rollout's (C, T, N)
            env_components = rollout.components[: len(rollout.component_names)]
            columns = [chunk.components.transpose(0, 1) for chunk in chunks]
            torch.cat(columns, dim=1, out=env_components)
            done = torch.cat([chunk.done for chunk in chunks])
            env.commit_carried(carry, done, self._taken(rollout.actions[-1]))
        self._last_obs = obs

    def _taken(self, actions: torch.Tensor) -> torch.Tensor:
        """The actions the env is given: Box actions clipped to the bounds (the rollout keeps
        them as sampled), discrete ones as they are."""
        if self.policy.discrete:
            return actions
        return torch.maximum(torch.minimum(actions, self._action_high), self._action_low)

    def _rollout_steps(self) -> Callable[..., Sequence[torch.Tensor]]:
        """The rollout's steps (:class:`_RolloutSteps`), eager; compiled with ``compile``."""
        sampler = Sampler(self.policy, self.config.normalize_obs, self.config.clip_obs)
        if not self.config.compile:
            return self._make_rollout_steps(sampler, self._env_steps)
        noise = torch.ones(self._noise_shape(), device=self.device)
        example = (self._rollout.obs[0], noise, *self.obs_rms.whitening, *self._memory_example())
        return self._compiled.rollout_steps(
            self._make_rollout_steps, sampler, self._env_steps, example, self._env_steps_compile
        )

    def _memory_example(self) -> tuple[torch.Tensor, ...]:
        """A recurrent policy's memory as the rollout's steps take it (``()`` without one)."""
        if self.config.recurrent is None:
            return ()
        return (self.policy.initial_state(self.env.num_envs, self.device),)

    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)`` per head, ``(B, H)``, of normalised observations; with ``compile``, the
        critic compiled for the rollout's ``(n_steps + 1) * num_envs`` rows (other batches,
        the few truncated steps', run eagerly)."""
        with torch.no_grad():
            if self.config.compile and obs.shape[0] == (self.n_steps + 1) * self.env.num_envs:
                return self._compiled.values(obs)
            return self.policy.value(obs)

    def _make_rollout_steps(self, policy_step: Callable[..., Sequence[torch.Tensor]], env: Any) -> _RolloutSteps:
        bounds = None if self.policy.discrete else (self._action_low, self._action_high)
        recurrent = self.config.recurrent is not None
        return _RolloutSteps(policy_step, env, fused_steps(self.n_steps), bounds, recurrent)

    def _recipe(self) -> str:
        """What the compiled graphs are made of besides rewardlab's code (``compile``'s cache
        key): the network's structure, the spaces and the settings."""
        return repr((
            type(self).__name__, repr(self.policy), repr(self.observation_space),
            repr(self.action_space), sorted(self.config.to_dict().items()),
        ))  # fmt: skip

    def _noise_shape(self) -> tuple[int, int]:
        width = int(self.action_space.n) if self.policy.discrete else int(self.action_space.shape[0])
        return (self.env.num_envs, width)

    def _obs_stats_empty(self) -> bool:
        """Whether the observation statistics have seen no observation (a fresh model's)."""
        return float(self.obs_rms.count) < 1  # its initial count is RunningMeanStd's epsilon

    def _normalize_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """Whiten observations with the running statistics, if ``normalize_obs``."""
        if not self.config.normalize_obs:
            return obs
        return self.obs_rms.normalize(obs, self.config.clip_obs)

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
        """``n_epochs`` passes of clipped-surrogate minibatch steps over the rollout
        (:meth:`_minibatch_step`), stopped early where the KL passes ``1.5 * target_kl``.

        :return: the ``train/*`` statistics as 0-d tensors (read once by the caller).
        """
        size = obs.shape[0]
        # The policy follows the weighted sum of the heads' advantages.
        policy_advantages = (advantages * self._head_weights).sum(dim=-1)
        rollout = (obs, actions, old_log_prob, policy_advantages, returns, old_values)
        if self.config.recurrent is not None:
            # Minibatches of whole env sequences (CleanRL's ppo_atari_lstm): the rollout
            # time-major (T, N, ...), with each step's episode ends and the memory it started
            # from, shuffled over the N envs, batch_size // T of them a minibatch.
            T, N = self.n_steps, self.env.num_envs
            rollout = tuple(c.reshape(T, N, *c.shape[1:]) for c in rollout)
            ended = self._rollout.terminated | self._rollout.truncated
            rollout = (*rollout, ended, self._rollout_memory)
            size, batch_size = N, max(batch_size // T, 1)
        # the losses of the steps taken, and of the step target_kl stopped (if one did)
        taken: list[torch.Tensor] = []
        stopped: list[torch.Tensor] = []
        for _ in range(self.config.n_epochs):
            permutation = torch.randperm(size, generator=self._generator, device=self.device)
            for start in range(0, size, batch_size):
                batch = (*rollout, permutation[start : start + batch_size])
                losses, stepped = self._minibatch_step(batch, learning_rate)
                (taken if stepped else stopped).append(torch.stack(losses))
                if not stepped:
                    break
            self._n_updates += 1
            if stopped:
                break

        # means over the steps taken (NaN where none was); the KL and clip fraction also of the
        # step that target_kl stopped
        nan = torch.full((len(MinibatchLosses._fields),), math.nan, device=obs.device)
        means = MinibatchLosses(*(torch.stack(taken).mean(dim=0) if taken else nan))
        all_steps = taken + stopped
        seen = MinibatchLosses(*(torch.stack(all_steps).mean(dim=0) if all_steps else nan))
        weighted_values = (old_values * self._head_weights).sum(dim=-1)
        weighted_returns = (returns * self._head_weights).sum(dim=-1)
        stats = {
            "train/policy_gradient_loss": means.pg_loss,
            "train/value_loss": means.value_loss,
            "train/entropy_loss": means.entropy_loss,
            "train/loss": means.loss,
            "train/approx_kl": seen.approx_kl,
            "train/clip_fraction": seen.clip_fraction,
            "train/explained_variance": explained_variance(weighted_values, weighted_returns),
        }
        if not self.policy.discrete:
            stats["train/std"] = self.policy.log_std.detach().exp().mean()
        return stats

    def _minibatch_step(
        self, batch: Sequence[torch.Tensor], learning_rate: float
    ) -> tuple[MinibatchLosses, bool]:
        """One minibatch's step: PPO's loss (:meth:`_loss`), then, unless the KL passes
        ``1.5 * target_kl`` (SB3's early stop), ``loss.backward()``, the gradients' global
        norm clipped to ``max_grad_norm`` and Adam's step at ``learning_rate``.

        With ``compile``, a minibatch of the compiled shapes takes the same step as one
        compiled call (:class:`rewardlab.agents.fused.CompiledUpdate`), committed after the
        KL's check.

        :param batch: the rollout's tensors, then the minibatch's row indices (see :meth:`_loss`).
        :param learning_rate: Adam's step size (annealed over ``learn``).
        :return: the minibatch's losses, and whether the step was taken.
        """
        target_kl = self.config.target_kl
        compiled = None
        if self.config.compile:
            compiled = self._compiled.update(batch, self._loss, self.config.max_grad_norm)
        if compiled is None:
            losses = self._loss(batch)
            if target_kl is not None and losses.approx_kl.item() > 1.5 * target_kl:
                return losses.detached(), False
            self.optimizer.param_groups[0]["lr"] = learning_rate
            clipped_gradient_step(self.optimizer, losses.loss, self.config.max_grad_norm)
            return losses.detached(), True

        new_state, terms = compiled(batch, learning_rate)
        losses = MinibatchLosses(*terms)
        if target_kl is not None and losses.approx_kl.item() > 1.5 * target_kl:
            return losses, False
        compiled.commit(new_state)
        return losses, True

    def _loss(
        self, batch: Sequence[torch.Tensor], parameters: dict[str, torch.Tensor] | None = None
    ) -> MinibatchLosses:
        """PPO's loss on one minibatch: the clipped surrogate, the (clipped) value loss
        summed over the heads, the entropy bonus.

        :param batch: the rollout's observations, actions, behaviour log-probabilities,
            the policy's (weighted) advantages, returns and values per head, then the
            minibatch's row indices; for a recurrent policy, each of them time-major
            ``(T, N, ...)``, then the episode ends ``(T, N)`` and the memory the rollout
            started from ``(N, state_size)``, then the minibatch's env indices.
        :param parameters: the policy's parameters by name, in place of its own (the
            compiled step differentiates the loss as a function of them).
        """
        *rollout, idx = batch
        if self.config.recurrent is None:
            obs, actions, old_log_prob, advantages, returns, old_values = (c[idx] for c in rollout)
            inputs: tuple[torch.Tensor, ...] = (obs, actions)
        else:
            # the envs idx's whole sequences, re-run from the memory the rollout started from
            *sequences, ended, memory = rollout
            obs, actions, *steps = (c[:, idx] for c in sequences)
            old_log_prob, advantages, returns, old_values = (c.flatten(0, 1) for c in steps)
            inputs = (obs, actions, memory[idx], ended[:, idx])
        if parameters is None:
            log_prob, entropy, new_values = self.policy(*inputs)
        else:
            log_prob, entropy, new_values = torch.func.functional_call(self.policy, parameters, inputs)
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
        return MinibatchLosses(loss, pg_loss, value_loss, entropy_loss, approx_kl, clip_fraction)

    def _act(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """The policy's actions on a batch (its mean or a sample), Box actions clipped to the
        action bounds (:meth:`Learner.predict` is the public side)."""
        return self._taken(self.policy.act(self._normalize_obs(obs), None, deterministic))

    def predict(
        self,
        observation: np.ndarray | torch.Tensor,
        state: np.ndarray | torch.Tensor | None = None,
        episode_start: np.ndarray | torch.Tensor | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray | torch.Tensor, Any]:
        """Actions for one observation or a batch, returned in the form given, as
        :meth:`Learner.predict`; a recurrent policy (``recurrent=``) also takes and returns
        its memory, as SB3-contrib's ``RecurrentPPO.predict`` does::

            state, starts = None, np.ones(num_envs, dtype=bool)
            while ...:
                actions, state = model.predict(obs, state=state, episode_start=starts)
                obs, reward, terminated, truncated, info = env.step(actions)
                starts = terminated | truncated

        :param observation: ``obs_shape`` or ``(B, *obs_shape)``.
        :param state: a recurrent policy's memory of each row, ``(B, state_size)`` (or
            ``(state_size,)`` for one observation) as the last call returned it; None: the
            start of an episode. Ignored (returned as is) by a policy without memory.
        :param episode_start: bool per row: that row's episode starts here (its memory is
            zeroed first); None: none does.
        :param deterministic: the policy's best action instead of a sample.
        :return: ``(actions, state)``, the memory after ``observation`` in the form of the
            observation (numpy or a tensor on the model's device).
        """
        if self.config.recurrent is None:
            return super().predict(observation, state, episode_start, deterministic)
        after: list[torch.Tensor] = []

        def act(obs: torch.Tensor) -> torch.Tensor:
            memory = self.policy.initial_state(obs.shape[0], self.device)
            if state is not None:
                memory = torch.as_tensor(state, dtype=torch.float32, device=self.device)
                if memory.numel() != memory.new_empty(obs.shape[0], self.policy.state_size).numel():
                    raise ValueError(
                        f"state has shape {tuple(memory.shape)}; a recurrent policy's memory is "
                        f"({obs.shape[0]}, {self.policy.state_size}) for these observations, as "
                        "predict returned it (or None at the start of the episodes)"
                    )
                memory = memory.reshape(obs.shape[0], self.policy.state_size)
            if episode_start is not None:
                starts = torch.as_tensor(episode_start, device=self.device).reshape(-1, 1)
                memory = memory * ~starts.bool()
            actions, memory = self.policy.act(self._normalize_obs(obs), memory, deterministic)
            after.append(memory)
            return self._taken(actions)

        with torch.no_grad():
            actions = predict_in_form(observation, tuple(self.observation_space.shape), act,
                                      self.device, torch.float32)  # fmt: skip
        as_numpy = not isinstance(observation, torch.Tensor)
        shape = np.shape(observation) if as_numpy else observation.shape
        memory = after[0][0] if tuple(shape) == tuple(self.observation_space.shape) else after[0]
        return actions, memory.cpu().numpy() if as_numpy else memory

    def _saved_state(self) -> dict[str, Any]:
        """Spaces, networks, optimiser and statistics; the intrinsic module and ``reward_fn``
        are not saved: pass them again to ``PPO.load(path, env, intrinsic=..., reward_fn=...)``."""
        return {
            "observation_space": space_to_dict(self.observation_space),
            "action_space": space_to_dict(self.action_space),
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
            space_from_dict(data["observation_space"]), space_from_dict(data["action_space"]),
            device, data["seed"], PPOConfig.from_dict(data["hyperparameters"]), intrinsic,
        )  # fmt: skip
        self.reward_fn = reward_fn
        self.policy.load_state_dict(data["policy"])
        # the saved state and settings, stepped by this optimiser's implementation (a file
        # saved before PPO's Adam was fused has fused=None)
        saved = data["optimizer"]
        groups = [{**group, "fused": True, "foreach": None} for group in saved["param_groups"]]
        self.optimizer.load_state_dict({**saved, "param_groups": groups})
        self.obs_rms.load_state_dict(data["obs_rms"])
        self.reward_rms.load_state_dict(data["reward_rms"])


def explained_variance(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``1 - Var[targets - predictions] / Var[targets]`` (NaN when the targets are constant).

    :param predictions: predicted values.
    :param targets: the returns they predict.
    """
    var_targets = targets.var()
    return 1 - (targets - predictions).var() / var_targets

def _checked_intrinsic_reward(reward: Any, size: int, module: IntrinsicModule) -> torch.Tensor:
    if not isinstance(reward, torch.Tensor) or tuple(reward.shape) != (size,):
        shape = tuple(reward.shape) if isinstance(reward, torch.Tensor) else type(reward).__name__
        raise ValueError(
            f"intrinsic module {module.name!r}.compute returned {shape}; expected a tensor of "
            f"shape ({size},), one bonus per transition of the flattened rollout"
        )
    return reward.to(torch.float32)
