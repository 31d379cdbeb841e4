"""Argument types the ``rewardlab`` commands share."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

# A value such as "-1,-2": argparse reads a token that starts with "-" as an option unless it
# is one plain number, and no rewardlab option starts with a digit.
_LEADING_MINUS_VALUE = re.compile(r"-\d.*")


def plain_text(docstring: str | None) -> str:
    """A module docstring as a command's ``--help`` shows it: without reStructuredText's markup
    (double and single backticks, roles such as ``:func:`name```, a literal block's ``::``).

    :param docstring: the command module's ``__doc__``.
    """
    text = re.sub(r":[\w:]+:`~?([^`]+)`", r"\1", docstring or "")
    text = re.sub(r"``([^`]+)``|`([^`]+)`", lambda match: match.group(1) or match.group(2), text)
    return re.sub(r"\s*::$", ":", text, flags=re.MULTILINE)  # "Example::" introduces a block


def int_list(text: str) -> list[int]:
    """``"0,1,2"`` as ``[0, 1, 2]``."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from error


def join_leading_minus_values(argv: Sequence[str]) -> list[str]:
    """``--seeds -1,-2`` as ``--seeds=-1,-2``, so that such a value reaches the flag's checks
    (which say what is wrong with it) rather than argparse's "expected one argument".

    :param argv: the command line, without the program name.
    """
    joined: list[str] = []
    for token in argv:
        previous = joined[-1] if joined else ""
        if _LEADING_MINUS_VALUE.fullmatch(token) and previous.startswith("--") and previous != "--" and "=" not in previous:
            joined[-1] = f"{previous}={token}"
        else:
            joined.append(token)
    return joined


def json_object(flag: str, example: str) -> Callable[[str], dict[str, Any]]:
    """An argument type that reads a JSON object for ``flag``; errors show ``example``."""

    def read(text: str) -> dict[str, Any]:
        try:
            value = json.loads(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{flag} must be a JSON object, e.g. '{example}': {error}") from error
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"{flag} must be a JSON object, e.g. '{example}', got {text!r}")
        return value

    return read
