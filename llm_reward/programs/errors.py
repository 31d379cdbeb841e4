"""What a reward program's failure says: :class:`ProgramError`, and its traceback cut to the
program's own lines."""

from __future__ import annotations

import traceback

from rewardlab.llm_reward.programs.checks import PROGRAM_FILENAME

__all__ = ["ProgramError", "clip_message", "program_traceback"]

MAX_MESSAGE_CHARS = 2000


class ProgramError(Exception):
    """Something a reward program did made its evaluation fail.

    :param reason: what went wrong, in words fit to send back to an LLM.
    :param traceback: the traceback cut to the program's own lines (may be empty).
    :param kind: ``"program"`` (it raised or returned something wrong), ``"limit"`` (it ran
        out of memory) or ``"sandbox"`` (the sandbox's guard refused something it did).
    """

    def __init__(self, reason: str, traceback: str = "", kind: str = "program"):
        super().__init__(reason)
        self.reason = reason
        self.traceback = traceback
        self.kind = kind


def clip_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut.

    :param text: any text.
    :param limit: the most characters to keep.
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters cut]"


def describe_exception(error: BaseException) -> str:
    try:
        return clip_message("".join(traceback.format_exception_only(type(error), error)).strip())
    except Exception:  # a hostile exception whose str() fails
        return type(error).__name__


def program_traceback(error: BaseException) -> str:
    """The traceback of ``error`` keeping only the frames of the reward program's own code.

    :param error: an exception raised while the program ran.
    """
    frames = [
        frame for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename == PROGRAM_FILENAME
    ]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    return clip_message("".join(lines) + describe_exception(error), 4 * MAX_MESSAGE_CHARS)
