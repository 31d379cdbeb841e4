"""A griffe extension (``mkdocs.yml`` loads it) that shows the docstrings' code as code.

rewardlab's docstrings follow Sphinx: ``:param`` fields, examples as doctest lines
(``>>> ...``) and literal blocks after ``::``. mkdocstrings renders the text between the
fields as Markdown, where neither is code (``x["a"]["b"]`` even reads as a link), so each
is put in a fenced block before the docstring is parsed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: a Sphinx cross-reference role (``:class:`Hybrid```), shown as inline code
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|obj|exc|const):`~?([^`]+)`")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def fence_code(text: str) -> str:
    """``text`` with its doctest runs and ``::`` literal blocks in Markdown fences, and its
    Sphinx roles (``:class:`X```) as inline code.

    :param text: a docstring's text.
    """
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if stripped.startswith(">>>"):
            # the fence sits where the text before it does ("Example:"), not deeper, where
            # Markdown would read an indented code block holding the fence
            cut = _indent(line)
            margin = " " * next((_indent(text) for text in reversed(out) if text.strip()), 0)
            block = []
            while index < len(lines) and lines[index].strip():
                block.append(lines[index][cut:] if _indent(lines[index]) >= cut else lines[index].strip())
                index += 1
            out += ["", margin + "```pycon", *(margin + code for code in block), margin + "```", ""]
            continue
        if stripped.endswith("::") and not stripped.startswith(":"):
            head = line.rstrip()[:-2].rstrip()
            if head.strip():
                out.append(head + ":")
            index += 1
            start = index
            while index < len(lines) and not lines[index].strip():
                index += 1
            body_indent = _indent(lines[index]) if index < len(lines) else 0
            if body_indent <= _indent(line):  # no literal block follows: the '::' was the colon
                index = start
                continue
            block = []
            while index < len(lines) and (not lines[index].strip() or _indent(lines[index]) >= body_indent > _indent(line)):
                block.append(lines[index][body_indent:])
                index += 1
            while block and not block[-1].strip():
                block.pop()
            margin = " " * _indent(line)
            out += ["", margin + "```python", *(margin + code for code in block), margin + "```", ""]
            continue
        out.append(line)
        index += 1
    return ROLE.sub(lambda match: f"`{match[1]}`", "\n".join(out))


class FenceDocstringCode(griffe.Extension):
    """Fence every docstring's doctest runs and literal blocks (see :func:`fence_code`)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_code(obj.docstring.value)
