"""Human feedback for Text2Reward's revision rounds, from a file or from the terminal.

Before each iteration after the first, the search shows the person a summary of the best
program so far and asks for feedback in words; the answer is saved in the journal, so a
resumed search never asks twice.

- :class:`FileFeedback` (``--feedback-file FILE``): rounds separated by lines holding only
  ``---``; round ``i`` is used before iteration ``i + 1``, and the last one repeats when
  there are more iterations than rounds.
- :class:`TerminalFeedback` (``--interactive``): prints the summary and reads lines until an
  empty line (or end of input); an empty answer means no feedback this round.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TextIO

__all__ = ["FeedbackSource", "FileFeedback", "TerminalFeedback"]


class FeedbackSource:
    """Where a person's feedback comes from; :meth:`ask` returns it (``None``: none given)."""

    name = "none"

    def ask(self, iteration: int, summary: str) -> str | None:
        """Feedback for revising the program before ``iteration``.

        :param iteration: the 0-based iteration about to start (1 or more).
        :param summary: what the search found so far, to show the person.
        """
        return None


class FileFeedback(FeedbackSource):
    """Feedback rounds read from a text file, separated by ``---`` lines.

    :param path: the file.
    :raises ValueError: the file cannot be read or holds no feedback.
    """

    name = "file"

    def __init__(self, path: str | Path):
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise ValueError(f"cannot read --feedback-file {path}: {error}") from error
        self.rounds = [part.strip() for part in re.split(r"(?m)^\s*---\s*$", text) if part.strip()]
        if not self.rounds:
            raise ValueError(f"--feedback-file {path} holds no feedback (rounds are separated by '---' lines)")

    def ask(self, iteration: int, summary: str) -> str | None:
        """Round ``iteration - 1`` of the file (the last one when there are fewer).

        :param iteration: the iteration about to start.
        :param summary: not shown (the file was written beforehand).
        """
        return self.rounds[min(iteration - 1, len(self.rounds) - 1)]


class TerminalFeedback(FeedbackSource):
    """Feedback typed by a person at the terminal.

    :param input_stream: where the answer is read (default: standard input).
    :param output_stream: where the summary and the question go (default: standard error).
    """

    name = "terminal"

    def __init__(self, input_stream: TextIO | None = None, output_stream: TextIO | None = None):
        self.input = input_stream if input_stream is not None else sys.stdin
        self.output = output_stream if output_stream is not None else sys.stderr

    def ask(self, iteration: int, summary: str) -> str | None:
        """Show ``summary``, read feedback lines until an empty line.

        :param iteration: the iteration about to start.
        :param summary: what the search found so far.
        """
        self.output.write(
            f"\n{summary}\n\nFeedback for iteration {iteration + 1} (what should the agent do "
            "differently?); end with an empty line:\n"
        )
        self.output.flush()
        lines = []
        for line in self.input:
            if not line.strip():
                break
            lines.append(line.rstrip("\n"))
        text = "\n".join(lines).strip()
        return text or None
