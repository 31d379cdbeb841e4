"""An LLM as the policy: acts through ``predict`` like our other agents, one chat request per env.

The policy takes a chat client and a text codec as plain objects (``rewardlab.agents``
imports nothing of ``rewardlab.llm_reward``); :func:`rewardlab.llm_reward.clients.make_client`
and :func:`rewardlab.agents.llm_policy.codec_for` make them. Because it acts through ``predict``, it
runs inside the same wrapper stack as an RL agent (shaping, intrinsic rewards, reward
programs); :meth:`LLMPolicy.record_step` hands it the reward components of each step, so the
shaping term reaches the LLM as the same dense feedback an RL agent gets.

Example::

    from rewardlab import envs
    from rewardlab.agents.llm_policy import LLMPolicy, codec_for
    from rewardlab.llm_reward.clients import make_client
    from rewardlab.shaping import BatchedPotentialShaping, potentials

    env = BatchedPotentialShaping(envs.make("MountainCar-v0", num_envs=4, seed=0),
                                  potentials.for_env("MountainCar-v0"), gamma=LLMPolicy.gamma)
    policy = LLMPolicy(make_client("ollama:qwen2.5:7b"), codec_for("MountainCar-v0"), history=4)
    obs, info = env.reset()
    for _ in range(200):
        actions, _ = policy.predict(obs)
        obs, reward, terminated, truncated, info = env.step(actions)
        policy.record_step(info["reward_components"], terminated | truncated)
    print(policy.stats())
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from rewardlab.agents.base import predict_in_form

DEFAULT_SYSTEM_PROMPT = (
    "You choose the actions of an agent, one step at a time. After each step you are told the "
    "rewards it earned: 'extrinsic' is the task's own reward; any other component (e.g. "
    "'shaping') is a hint that points toward more task reward. Maximise the task's total reward."
)


@dataclass(frozen=True)
class _Step:
    observation: str
    action: str
    rewards: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class _Answer:
    action: Any
    invalid: bool
    failed: bool
    latency_s: float


class LLMPolicy:
    """Asks an LLM for each env's action, with a bounded history of what its steps earned.

    Each request is one system message (``system_prompt`` and the codec's task, actions and
    answer format) and one user message: the last ``history`` steps of that env's episode
    (observation, action and every reward component of the step, the shaping term
    included) and the current observation. A batch of envs is served by concurrent requests,
    at most ``max_concurrency`` at a time.

    An answer that names no valid action, a request that raises, and one not answered
    within ``step_timeout_s`` all give ``default_action``; each kind is counted
    (:meth:`stats`), as are tokens, cost and latency.

    The client needs ``complete(messages) -> completion`` with ``completion.text``,
    ``completion.usage.prompt_tokens`` / ``completion_tokens`` and ``completion.cost_usd``
    (``None``: unknown), as :class:`rewardlab.llm_reward.clients.ChatClient` has. The codec needs
    ``observation_shape``, ``default_action``, ``system_text()``,
    ``observation_text(obs)``, ``action_text(action)`` and ``parse_action(text)`` (``None``
    for an invalid answer), as :class:`rewardlab.agents.llm_policy.TextCodec` has.

    :param client: the chat client.
    :param codec: the env's text codec.
    :param history: how many past steps of the current episode each prompt shows (0: none).
    :param max_concurrency: the most requests in flight at once (the thread pool's size).
    :param default_action: the fallback action (default: the codec's).
    :param system_prompt: the instructions before the codec's task text.
    :param step_timeout_s: the longest a ``predict`` call waits for its answers; late ones
        give the default action (``None``: wait for all; the client's own timeout applies).
    :param fatal_errors: exception types that are raised instead of falling back (e.g. an
        unreachable endpoint, where every request would fail).
    """

    #: the discount of the return the policy is asked to maximise: the task's total reward,
    #: undiscounted (``DEFAULT_SYSTEM_PROMPT``). Shaping for it uses this discount, at which
    #: an episode's shaping terms sum to ``phi(s_T) - phi(s_0)`` (``phi(s_T) = 0`` when terminated).
    gamma: ClassVar[float] = 1.0

    def __init__(
        self,
        client: Any,
        codec: Any,
        history: int = 4,
        max_concurrency: int = 8,
        default_action: Any = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        step_timeout_s: float | None = None,
        fatal_errors: tuple[type[BaseException], ...] = (),
    ) -> None:
        if not callable(getattr(client, "complete", None)):
            raise ValueError(f"client={type(client).__name__} has no complete(messages) method")
        for name in ("observation_shape", "system_text", "observation_text", "action_text", "parse_action"):
            if not hasattr(codec, name):
                raise ValueError(f"codec={type(codec).__name__} has no {name!r}; use rewardlab.agents.llm_policy.codec_for")
        if isinstance(history, bool) or not isinstance(history, int) or history < 0:
            raise ValueError(f"history={history!r} must be a non-negative int")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError(f"max_concurrency={max_concurrency!r} must be a positive int")
        if step_timeout_s is not None and step_timeout_s <= 0:
            raise ValueError(f"step_timeout_s={step_timeout_s!r} must be positive or None")
        self.client = client
        self.codec = codec
        self.history = history
        self.max_concurrency = max_concurrency
        self.default_action = codec.default_action if default_action is None else default_action
        self.system_prompt = system_prompt
        self.step_timeout_s = step_timeout_s
        self.fatal_errors = fatal_errors
        self.observation_shape = tuple(codec.observation_shape)
        self._system = f"{system_prompt}\n\n{codec.system_text()}" if system_prompt else codec.system_text()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_concurrency, "llm-policy")
        self._lock = threading.Lock()  # guards the token and cost counters the workers add to
        self._histories: list[deque[_Step]] = []
        self._pending: list[tuple[str, str] | None] = []
        self.last_error: str | None = None
        self.reset_stats()

    def reset_stats(self) -> None:
        """Set every counter to zero."""
        self.requests = 0
        self.invalid_answers = 0
        self.failures = 0
        self.timeouts = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.cost_known = True
        self.latencies_s: list[float] = []

    def reset(self, indices: Sequence[int] | None = None) -> None:
        """Forget the history of some envs (all when ``None``), as at an episode's start.

        :param indices: the envs whose episodes restart.
        """
        for i in range(len(self._histories)) if indices is None else indices:
            self._histories[i].clear()
            self._pending[i] = None

    def predict(
        self,
        observation: np.ndarray | torch.Tensor,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        active: Any = None,
    ) -> tuple[np.ndarray | torch.Tensor, Any]:
        """Actions for one observation or a batch, returned in the form given (SB3's signature).

        Numpy in, numpy out; a tensor in, a tensor out on its device.

        :param observation: ``observation_shape`` or ``(B, *observation_shape)``.
        :param state: ignored; returned as is.
        :param episode_start: bool ``(B,)``: forget the history of those envs first (SB3's
            ``evaluate_policy`` passes it); ``None``: :meth:`record_step` tracks episodes.
        :param deterministic: ignored (sampling is the client's temperature).
        :param active: bool ``(B,)``: ask only for these envs; the others get the default
            action, uncounted (envs that have finished the episodes a run wants).
        :return: ``(actions, state)``.
        """
        del deterministic

        def act(batch: torch.Tensor) -> torch.Tensor:
            return torch.as_tensor(self._answers(batch.detach().cpu().numpy(), episode_start, active), device=batch.device)

        return predict_in_form(observation, self.observation_shape, act), state

    def _answers(self, obs: np.ndarray, episode_start: Any, active: Any) -> np.ndarray:
        """The actions of a batch of observations ``(B, *observation_shape)``: one request per
        env asked, at most ``max_concurrency`` in flight (see :meth:`predict`)."""
        if len(obs) != len(self._histories):
            self._histories = [deque(maxlen=self.history) for _ in range(len(obs))]
            self._pending = [None] * len(obs)
        if episode_start is not None:
            self.reset(np.flatnonzero(np.asarray(episode_start, dtype=bool).reshape(-1)).tolist())
        asked = np.ones(len(obs), dtype=bool) if active is None else _as_rows(active, len(obs)) > 0
        texts = [self.codec.observation_text(row) if ask else "" for row, ask in zip(obs, asked)]
        futures = [
            self._pool.submit(self._ask, self.messages(i, text)) if asked[i] else None
            for i, text in enumerate(texts)
        ]
        done, _ = concurrent.futures.wait([f for f in futures if f], timeout=self.step_timeout_s)
        actions = []
        for i, future in enumerate(futures):
            if future is None:
                actions.append(self.default_action)
                self._pending[i] = None
                continue
            self.requests += 1
            if future not in done:
                future.cancel()  # dropped if still queued; a running request is left to finish
                self.timeouts += 1
                action = self.default_action
            else:
                answer = future.result()
                self.invalid_answers += answer.invalid
                self.failures += answer.failed
                self.latencies_s.append(answer.latency_s)
                action = answer.action
            actions.append(action)
            self._pending[i] = (texts[i], self.codec.action_text(action))
        return np.stack([np.asarray(action) for action in actions])

    def record_step(
        self,
        reward_components: Mapping[str, Any],
        done: Any = None,
    ) -> None:
        """Add the step just taken, with what it earned, to each env's history.

        Call it after every ``env.step`` with ``info["reward_components"]`` (or
        ``{"extrinsic": reward}``); where ``done`` is set, the env's episode ended and its
        history starts afresh.

        :param reward_components: name -> reward of the step, a number or ``(B,)`` array or
            tensor.
        :param done: bool ``(B,)`` (or one bool): the episodes that ended with this step.
        """
        count = len(self._pending)
        rewards = {name: _as_rows(value, count) for name, value in reward_components.items()}
        ended = np.zeros(count, dtype=bool) if done is None else _as_rows(done, count).astype(bool)
        for i in range(count):
            pending = self._pending[i]
            self._pending[i] = None
            if ended[i]:
                self._histories[i].clear()
            elif pending is not None and self.history:
                step_rewards = tuple((name, float(values[i])) for name, values in rewards.items())
                self._histories[i].append(_Step(pending[0], pending[1], step_rewards))

    def messages(self, index: int, observation_text: str) -> list[dict[str, str]]:
        """The chat messages for env ``index`` at an observation.

        :param index: the env's row in the batch.
        :param observation_text: the observation in words.
        """
        lines = []
        past = self._histories[index]
        if past:
            lines.append(f"Your last {len(past)} steps in this episode (oldest first):")
            for age, step in zip(range(len(past), 0, -1), past):
                rewards = ", ".join(f"{name} {value:+.4g}" for name, value in step.rewards)
                lines.append(
                    f"t-{age}: observation: {step.observation}; action: {step.action}; "
                    f"rewards: {rewards}"
                )
            lines.append("")
        lines.append(f"Current observation: {observation_text}")
        lines.append("Your action:")
        return [{"role": "system", "content": self._system}, {"role": "user", "content": "\n".join(lines)}]

    def stats(self) -> dict[str, Any]:
        """The counters: requests, invalid answers, failures, timeouts, tokens, cost, latency."""
        fallbacks = self.invalid_answers + self.failures + self.timeouts
        rate = 1 / self.requests if self.requests else 0.0
        with self._lock:
            tokens = (self.prompt_tokens, self.completion_tokens, self.cost_usd, self.cost_known)
        return {
            "requests": self.requests,
            "invalid_answers": self.invalid_answers,
            "failures": self.failures,
            "timeouts": self.timeouts,
            "invalid_rate": self.invalid_answers * rate,
            "fallback_rate": fallbacks * rate,
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            "tokens": tokens[0] + tokens[1],
            "cost_usd": tokens[2] if tokens[3] else None,
            "latency_s_mean": float(np.mean(self.latencies_s)) if self.latencies_s else 0.0,
            "latency_s_max": float(np.max(self.latencies_s)) if self.latencies_s else 0.0,
            "last_error": self.last_error,
        }

    def close(self) -> None:
        """Stop the worker threads (requests in flight finish first)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _ask(self, messages: list[dict[str, str]]) -> _Answer:
        start = time.monotonic()
        try:
            completion = self.client.complete(messages)
        except self.fatal_errors:
            raise
        except Exception as error:  # any failed request falls back; the run goes on
            self.last_error = f"{type(error).__name__}: {error}"
            return _Answer(self.default_action, False, True, time.monotonic() - start)
        latency = time.monotonic() - start
        usage = completion.usage
        with self._lock:
            self.prompt_tokens += int(usage.prompt_tokens)
            self.completion_tokens += int(usage.completion_tokens)
            if completion.cost_usd is None:
                self.cost_known = False
            else:
                self.cost_usd += float(completion.cost_usd)
        action = self.codec.parse_action(completion.text)
        if action is None:
            return _Answer(self.default_action, True, False, latency)
        return _Answer(action, False, False, latency)


def _as_rows(value: Any, count: int) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    rows = np.asarray(value, dtype=np.float64).reshape(-1)
    if rows.size == 1 and count != 1:
        rows = np.repeat(rows, count)
    if rows.size != count:
        raise ValueError(f"expected {count} values (one per env), got {rows.size}")
    return rows
