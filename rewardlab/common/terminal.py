"""Text from a file, a program or a model, made safe to show: control characters as escapes.

A terminal obeys escape sequences (a window title, a cleared screen, a moved cursor), a
carriage return rewrites the line shown, and bidirectional overrides reorder it: text that
rewardlab did not write itself shows each such character as its escape (``\\x1b``,
``\\u202e``), so what is shown is what was read, and nothing it holds acts on the terminal.
"""

from __future__ import annotations

import re

__all__ = ["CONTROL", "escape_controls", "terminal_line"]

#: C0 controls but tab and newline, DEL, C1 controls, the bidirectional marks, overrides and
#: isolates, the line and paragraph separators (str.splitlines breaks on them) and lone
#: surrogates (a JSON string may hold one; no file, terminal or request can encode it).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e"
                     "\u2066-\u2069\ud800-\udfff]")
_LINE_BREAKS = re.compile("[\t\n]")


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape", "backslashreplace").decode("ascii")


def escape_controls(text: str) -> str:
    """``text`` with each control character written as its escape; tabs and newlines stay.

    :param text: any text.
    """
    return CONTROL.sub(_escape, text.replace("\r\n", "\n"))


def terminal_line(text: str) -> str:
    """``text`` as one line a terminal shows as it is: every control character, newlines and
    tabs too, written as its escape (an error message that names a value read from a file).

    :param text: any text.
    """
    return _LINE_BREAKS.sub(_escape, CONTROL.sub(_escape, text))
