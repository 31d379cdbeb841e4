"""The search's live progress line: iteration, candidates running and done, best fitness, tokens, cost.

On a terminal the line is redrawn in place; elsewhere (a log file, CI) a line is printed
only when something finishes, so logs stay readable. Messages (:meth:`Progress.note`)
are printed above the line. Safe to use from several threads.

    iteration 2/5 | running 2, done 5/8 | best 412.3 (it01_s02) | 3.1 candidates/min | 18,204 tokens | $0.0421
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from rewardlab.llm_reward.clients import redact
from rewardlab.llm_reward.programs.text import sanitize
from rewardlab.llm_reward.search.records import Candidate, best_of

__all__ = ["Progress"]


class Progress:
    """Counts what the search is doing and shows it.

    :param total_iterations: the search's iterations.
    :param samples: candidates per iteration.
    :param stream: where to write (default: standard error).
    :param enabled: False shows nothing (the counters still count).
    :param secrets: strings never shown.
    """

    def __init__(
        self,
        total_iterations: int,
        samples: int,
        stream: TextIO | None = None,
        enabled: bool = True,
        secrets: tuple[str, ...] = (),
    ):
        self.total_iterations = total_iterations
        self.samples = samples
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.secrets = secrets
        self.iteration = 0
        self.stage = "search"
        self.running = 0
        self.done = 0
        self.total = samples
        self.best: tuple[float, str] | None = None
        self._finished: list[Candidate] = []
        self.tokens = 0
        self.cost_usd = 0.0
        self.cost_unknown = False
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._evaluated = 0  # candidates that finished an evaluation, for the rate
        self._live = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()

    def line(self) -> str:
        """The current progress line."""
        if self.stage == "search":
            head = f"iteration {self.iteration + 1}/{self.total_iterations}"
        else:
            head = self.stage
        parts = [head, f"running {self.running}, done {self.done}/{self.total}"]
        parts.append(f"best {self.best[0]:.4g} ({self.best[1]})" if self.best else "best -")
        minutes = (time.monotonic() - self._start) / 60
        if self._evaluated and minutes > 0:
            parts.append(f"{self._evaluated / minutes:.1f} candidates/min")
        parts.append(f"{self.tokens:,} tokens")
        parts.append("cost unknown" if self.cost_unknown else f"${self.cost_usd:.4f}")
        return " | ".join(parts)

    def _show(self, finished: bool = False) -> None:
        if not self.enabled:
            return
        text = sanitize(redact(self.line(), self.secrets))
        if self._live:
            self.stream.write("\r\x1b[K" + text)
        elif finished:
            self.stream.write(text + "\n")
        self.stream.flush()

    def start_iteration(self, iteration: int, total: int, stage: str = "search") -> None:
        """A new iteration (or the final re-training, ``stage="final re-training"``) begins.

        :param iteration: 0-based iteration.
        :param total: how many jobs it has.
        :param stage: ``"search"`` or a name for another stage.
        """
        with self._lock:
            self.iteration, self.total, self.stage = iteration, total, stage
            self.running = self.done = 0
            self._show(finished=True)

    def started(self) -> None:
        """An evaluation started."""
        with self._lock:
            self.running += 1
            self._show()

    def finished(self, key: str, trained: bool, candidate: Candidate | None = None) -> None:
        """A job is done (a candidate trained, failed or was rejected; a final re-training ended).

        :param key: its key.
        :param trained: it had been counted as running.
        :param candidate: the search's candidate; the best is chosen as the search's report
            chooses it (:func:`~rewardlab.llm_reward.search.records.best_of`), ties included.
        """
        with self._lock:
            self.running -= int(trained)
            self.done += 1
            self._evaluated += int(trained)
            if self.stage == "search" and candidate is not None:
                self._finished.append(candidate)
                best = best_of(self._finished)
                self.best = None if best is None or best.fitness is None else (best.fitness, best.key)
            self._show(finished=True)

    def spent(self, tokens: int, cost_usd: float | None) -> None:
        """An LLM call used ``tokens`` for ``cost_usd`` (``None``: unknown price).

        :param tokens: the call's tokens.
        :param cost_usd: its cost.
        """
        with self._lock:
            self.tokens += tokens
            if cost_usd is None:
                self.cost_unknown = True
            else:
                self.cost_usd += cost_usd
            self._show()

    def note(self, message: str) -> None:
        """Print ``message`` on its own line, above the progress line.

        :param message: the text.
        """
        if not self.enabled:
            return
        with self._lock:
            prefix = "\r\x1b[K" if self._live else ""
            # a message may quote a program's text: no escape sequence of its own reaches the terminal
            self.stream.write(prefix + sanitize(redact(message, self.secrets)) + "\n")
            self._show()

    def close(self) -> None:
        """End the live line."""
        if self.enabled and self._live:
            self.stream.write("\n")
            self.stream.flush()
