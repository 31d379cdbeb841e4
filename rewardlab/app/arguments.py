"""Argument types the ``rewardlab`` commands share."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def int_list(text: str) -> list[int]:
    """``"0,1,2"`` as ``[0, 1, 2]``."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from error


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
