"""A potential fitted to an LLM's judgements of which of two states is closer to the goal."""

from __future__ import annotations

import concurrent.futures
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rewardlab.shaping.core import Batch, check_scale

Judge = Callable[[str, str], float | None]

JUDGE_PROMPT = (
    "{task}\n\nTwo states of this task follow. Which one is closer to achieving the goal?\n\n"
    "State A: {a}\nState B: {b}\n\nAnswer with the single letter A or B."
)


def chat_judge(client: Any, task: str = "") -> Judge:
    """A judge that asks a chat client (``complete(messages) -> completion.text``) for A or B.

    :param client: e.g. an ``rewardlab.llm_reward.clients.OpenAICompatibleClient``.
    :param task: the task and its goal in words, put before the two states.
    :return: ``judge(a, b)``: 1.0 when the answer is A, 0.0 when B, ``None`` when neither
        (or the request failed).
    """

    def judge(a: str, b: str) -> float | None:
        prompt = JUDGE_PROMPT.format(task=task or "A control task.", a=a, b=b)
        try:
            text = client.complete([{"role": "user", "content": prompt}]).text
        except Exception:  # a failed request is one judgement less, not a failed fit
            return None
        letters = re.findall(r"\b([AB])\b", text.upper())
        if len(set(letters)) != 1:
            return None
        return 1.0 if letters[0] == "A" else 0.0

    return judge


class LLMRankedPotential:
    """``phi(s)``: a small torch network fitted to pairwise judgements "s_a is closer to the goal".

    :meth:`fit` samples ``num_pairs`` pairs of the given states, describes each as text
    (``describe``), asks the judge which is closer to the goal (many queries, at most
    ``max_concurrency`` at once) and fits ``f`` by Bradley-Terry:
    ``P(a beats b) = sigmoid(f(a) - f(b))``. The potential is ``f`` rescaled over the fitted
    states to ``[-weight, 0]``: 0 at the state judged closest to the goal, so that
    ``phi(terminal) = 0`` costs nothing for reaching it. After the fit it is used like any
    other potential: a numpy array or torch tensor batch ``(N, *obs_shape)`` in, ``(N,)`` of
    the same kind out.

    Policy invariance is that of potential-based shaping: any ``phi`` keeps the optimal
    policy (Ng et al., 1999), so a wrong or noisy judge can slow learning but cannot change
    what is optimal.

    Example::

        phi = LLMRankedPotential(chat_judge(client, "MountainCar: reach position 0.5"),
                                 describe=lambda s: f"position {s[0]:.3f}, velocity {s[1]:.4f}")
        phi.fit(sampled_states, num_pairs=300)
        env = BatchedPotentialShaping(env, phi, gamma=0.99)

    :param judge: ``judge(text_a, text_b) -> p``, ``p`` in [0, 1] the belief that A is closer
        (``None``: no judgement), or a chat client (then :func:`chat_judge` with ``task``).
    :param describe: one state (``obs_shape``, numpy) as text.
    :param task: the task and its goal in words, for a chat client's prompt.
    :param weight: the potential's magnitude, in units of reward.
    :param hidden: the width of the network's two hidden layers.
    :param epochs: full-batch Adam steps of the fit.
    :param max_concurrency: judge queries in flight at once.
    :param seed: seeds the pair sampling and the network.
    """

    def __init__(
        self,
        judge: Judge | Any,
        describe: Callable[[np.ndarray], str],
        task: str = "",
        weight: float = 1.0,
        hidden: int = 32,
        epochs: int = 300,
        max_concurrency: int = 8,
        seed: int = 0,
    ) -> None:
        if callable(getattr(judge, "complete", None)):
            judge = chat_judge(judge, task)
        if not callable(judge) or not callable(describe):
            raise ValueError(
                f"judge={type(judge).__name__} must be a callable judge(a, b) or a chat client, "
                "and describe a callable state -> text"
            )
        if max_concurrency < 1 or epochs < 1 or hidden < 1:
            raise ValueError(
                f"max_concurrency={max_concurrency!r}, epochs={epochs!r} and hidden={hidden!r} "
                "must be positive"
            )
        self.judge = judge
        self.describe = describe
        self.weight = check_scale(weight)
        self.hidden = hidden
        self.epochs = epochs
        self.max_concurrency = max_concurrency
        self.seed = seed
        self.network: torch.nn.Module | None = None
        self.judgements = 0
        self.unanswered = 0

    def fit(self, states: Batch, num_pairs: int = 256) -> LLMRankedPotential:
        """Ask the judge about ``num_pairs`` random pairs of ``states`` and fit the potential.

        :param states: ``(M, *obs_shape)``, M >= 2: states the agent visits (e.g. from random
            rollouts).
        :param num_pairs: how many pairs to judge.
        :return: ``self``.
        :raises ValueError: too few states, or fewer than two pairs answered.
        """
        states = np.asarray(states.detach().cpu() if isinstance(states, torch.Tensor) else states)
        if len(states) < 2 or num_pairs < 1:
            raise ValueError(f"fit needs at least 2 states and 1 pair, got {len(states)} and {num_pairs}")
        rng = np.random.default_rng(self.seed)
        first = rng.integers(0, len(states), num_pairs)
        second = (first + rng.integers(1, len(states), num_pairs)) % len(states)  # never the same
        texts = [self.describe(state) for state in states]
        with concurrent.futures.ThreadPoolExecutor(self.max_concurrency) as pool:
            answers = list(pool.map(lambda pair: self.judge(texts[pair[0]], texts[pair[1]]),
                                    zip(first, second)))  # fmt: skip
        answered = [i for i, answer in enumerate(answers) if answer is not None]
        self.judgements += len(answered)
        self.unanswered += num_pairs - len(answered)
        if len(answered) < 2:
            raise ValueError(
                f"the judge answered {len(answered)} of {num_pairs} pairs; check its prompt and answers"
            )
        flat = torch.as_tensor(states.reshape(len(states), -1), dtype=torch.float32)
        self._mean = flat.mean(0)
        self._std = flat.std(0).clamp_min(1e-6)
        torch.manual_seed(self.seed)
        self.network = torch.nn.Sequential(
            torch.nn.Linear(flat.shape[1], self.hidden), torch.nn.Tanh(),
            torch.nn.Linear(self.hidden, self.hidden), torch.nn.Tanh(),
            torch.nn.Linear(self.hidden, 1),
        )  # fmt: skip
        inputs = (flat - self._mean) / self._std
        a = inputs[torch.as_tensor(first[answered])]
        b = inputs[torch.as_tensor(second[answered])]
        labels = torch.as_tensor([answers[i] for i in answered], dtype=torch.float32)
        optimizer = torch.optim.Adam(self.network.parameters(), lr=1e-2)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # a network this small fits many times faster on one thread
        try:
            for _ in range(self.epochs):
                logits = (self.network(a) - self.network(b)).squeeze(1)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        finally:
            torch.set_num_threads(threads)
        self.network.eval()
        with torch.no_grad():
            scores = self.network(inputs).squeeze(1)
        self._top = scores.max()
        self._span = (scores.max() - scores.min()).clamp_min(1e-6)
        return self

    def __call__(self, obs: Batch) -> Batch:
        if self.network is None:
            raise ValueError("LLMRankedPotential has not been fitted: call fit(states) first")
        is_numpy = not isinstance(obs, torch.Tensor)
        batch = torch.as_tensor(np.asarray(obs) if is_numpy else obs.detach().cpu(), dtype=torch.float32)
        with torch.no_grad():
            scores = self.network((batch.reshape(len(batch), -1) - self._mean) / self._std).squeeze(1)
        values = self.weight * (scores - self._top) / self._span
        return values.numpy().astype(np.float64) if is_numpy else values.to(obs.device)
