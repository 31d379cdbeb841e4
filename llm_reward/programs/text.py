"""Text that a program or a model produced, made safe for where it goes: a terminal, a
Markdown report or the next prompt.

A program controls its own source, error messages and tracebacks, and a model its answer.
Before any of it is shown or written:

- everywhere, control characters (terminal escapes, carriage returns, bell, bidi
  overrides) are removed from prose (:func:`sanitize`, all a terminal needs);
- in Markdown, prose is one line with HTML and link syntax escaped (:func:`markdown_text`);
- in a prompt, a short text is one line of inline code (:func:`prompt_line`) and a longer
  one a block;
- code and tracebacks, in a report or a prompt, go in a fence longer than any run of
  backticks inside them, so they cannot close it, with control characters shown as
  escapes (``\\x1b``) rather than dropped, so the code shown is the code that ran
  (:func:`fenced`, :func:`prompt_block`).
"""

from __future__ import annotations

import html
import re

from rewardlab.common.terminal import CONTROL, escape_controls

__all__ = ["fenced", "markdown_text", "prompt_block", "prompt_line", "sanitize"]

# what Markdown could read as a link, an image, a table cell or an escape
_MARKDOWN_PUNCTUATION = re.compile(r"([\\\[\]|])")


def sanitize(text: str) -> str:
    """``text`` without control characters (newlines and tabs stay): what a terminal may show.

    :param text: any text.
    """
    return CONTROL.sub("", text.replace("\r\n", "\n"))


def markdown_text(text: str) -> str:
    """``text`` for Markdown prose (after a list marker, in a table cell): sanitised, on one
    line (so it starts no heading, list or fence: backticks can only make inline code),
    ``<``, ``>``, ``&`` escaped (no HTML), and ``[``, ``]``, ``|``, ``\\`` escaped (no link
    or image to fetch, no table cell to end).

    :param text: any text.
    """
    one_line = " ".join(sanitize(text).split())
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(one_line, quote=False))


def fenced(text: str, indent: str = "", language: str = "") -> list[str]:
    """``text`` as the lines of a Markdown code block it cannot close.

    :param text: code or a traceback.
    :param indent: put before every line (a block inside a list item).
    :param language: the block's language (``"python"``), or none.
    """
    text = escape_controls(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [indent + fence + language, *(indent + line for line in text.splitlines()), indent + fence]


def prompt_line(text: str, limit: int | None = None) -> str:
    """``text`` for a line of a prompt: sanitised, on one line (it cannot start a fence or
    pose as a line of the prompt's own), cut to ``limit`` characters, and quoted as inline
    code that it cannot close (a model reads it as quoted text; a viewer that renders the
    prompt as Markdown shows it as code, with no tag, link or image of its own).

    :param text: any text.
    :param limit: the most characters (``None``: all).
    """
    one_line = " ".join(sanitize(text).split())
    one_line = one_line if limit is None else one_line[:limit]
    longest = max((len(run) for run in re.findall(r"`+", one_line)), default=0)
    quote = "`" * (longest + 1)
    padding = " " if one_line.startswith("`") or one_line.endswith("`") else ""
    return f"{quote}{padding}{one_line}{padding}{quote}"


def prompt_block(text: str, language: str = "") -> str:
    """``text`` (code, a traceback, a multi-line message) as a fenced block of a prompt.

    :param text: any text.
    :param language: the block's language, or none.
    """
    return "\n".join(fenced(text.strip("\n"), language=language))
