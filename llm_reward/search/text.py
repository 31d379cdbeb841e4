"""Text that came from a sandboxed worker, made safe for a terminal, a Markdown report and a prompt.

A program controls its own error messages, tracebacks and component names. Before any of
it is shown or written: control characters (terminal escapes, carriage returns, bidi
overrides) are removed, Markdown prose is one line with HTML escaped, and
code goes in a fence longer than any run of backticks inside it, so the program cannot
close it.
"""

from __future__ import annotations

import html
import re

__all__ = ["COMPONENT_NAME", "fenced", "markdown_text", "sanitize"]

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# What a reward component may be called once it has left the worker.
COMPONENT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,63}")


def sanitize(text: str) -> str:
    """``text`` without control characters (newlines and tabs stay)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def markdown_text(text: str) -> str:
    """``text`` for Markdown prose after a list marker: sanitised, on one line (so it starts
    no heading, list or fence: backticks can only make inline code), ``<``, ``>``, ``&`` escaped."""
    one_line = " ".join(sanitize(text).split())
    return html.escape(one_line, quote=False)


def fenced(text: str, indent: str = "") -> list[str]:
    """``text`` as the lines of a Markdown code block it cannot close."""
    text = sanitize(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [indent + fence, *(indent + line for line in text.splitlines()), indent + fence]
