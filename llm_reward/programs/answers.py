"""Finding the reward program in an LLM's answer: fenced blocks, JSON, or code without fences.

An answer may offer several programs ("Option A", "the second version (recommended)"):
:func:`find_code` picks the one it recommends, else the last, and appends the helpers the
picked block uses from the answer's other blocks. Nothing here runs the code; a hostile
answer costs a bounded number of parses (:data:`MAX_ANSWER_CHARS`,
:data:`MAX_UNFENCED_PARSED_CHARS`).
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rewardlab.llm_reward.programs.checks import (
    MAX_SOURCE_CHARS,
    REWARD_FUNCTION,
    CheckError,
    Finding,
    parse_source,
)

__all__ = ["FoundCode", "code_choice_note", "extract_code", "find_code"]

#: the longest answer that is read at all: a reply holds one program (at most
#: MAX_SOURCE_CHARS) and its prose; anything longer is refused before any parsing
MAX_ANSWER_CHARS = 2 * MAX_SOURCE_CHARS
#: the most characters that finding the code in an answer without fences may parse, over
#: all its tries (each failed parse cuts the text at its syntax error)
MAX_UNFENCED_PARSED_CHARS = 4 * MAX_SOURCE_CHARS

# A fence's opening line (matched at a line's start, so its cost is the line's length);
# a block ends at a line holding only the same fence character, at least as many times.
_FENCE_LINE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)")
_CODE_START = re.compile(r"^[ \t]*(import\s|from\s+\S+\s+import\s|def\s|@)")
_DEFINES_REWARD = re.compile(
    rf"^[ \t]*(def[ \t]+{REWARD_FUNCTION}\b|{REWARD_FUNCTION}[ \t]*=[ \t]*lambda\b)", re.MULTILINE
)
_DEFINES_ANY = re.compile(r"^[ \t]*def\s", re.MULTILINE)
_NON_PYTHON_LANGUAGES = {"json", "text", "bash", "sh", "shell", "console", "yaml", "output"}
# how answers that offer several programs say which one to use
_RECOMMENDS = re.compile(
    r"\brecommend|\bpreferr?ed\b|\bI(?:'d| would) (?:go with|use|pick|choose)\b", re.IGNORECASE
)
_LABEL = re.compile(
    r"\b(?:option|version|approach|alternative|variant|solution)"
    r"[ \t]*(?:#[ \t]*)?([A-Za-z]|\d{1,2})\b",
    re.IGNORECASE,
)
_ORDINAL = re.compile(r"\b(first|second|third|fourth|fifth|last|final)\b", re.IGNORECASE)
_ORDINALS = ("first", "second", "third", "fourth", "fifth")
# a heading right before a block ("### Option B (recommended)") speaks of that block
_HEADING_CHARS = 200
# the most values of a JSON answer looked at for code (a reply holds a handful)
_MAX_JSON_VALUES = 1000


@dataclass(frozen=True)
class FoundCode:
    """The program found in an answer, and how it was chosen.

    :param source: the program's source (see :func:`extract_code`).
    :param note: which block was taken when several define the reward function, in words
        for the model that wrote them (empty when the answer holds one).
    """

    source: str
    note: str = ""


def extract_code(answer: str) -> str:
    """The reward program's source in an LLM answer (:func:`find_code`'s ``source``).

    :param answer: the LLM's whole reply.
    :raises CheckError: no Python code defining a function was found, or the answer is longer
        than :data:`MAX_ANSWER_CHARS`.
    """
    return find_code(answer).source


def find_code(answer: str) -> FoundCode:
    """The reward program in an LLM answer, and a note on the choice where it offers several.

    Takes fenced blocks (``` or ~~~, with or without a language) and picks the one defining
    ``compute_reward`` that the answer recommends ("I recommend Option A", "### Second
    version (recommended)"), else the last one; with none, the last one defining a
    function. Without fences, the text from the first ``import``/``def`` line to the last
    line that still parses. Helpers and constants the picked block uses but another block
    of the answer defines ("first some helper functions: ...") are appended to it, after its
    own lines, so that every line number still names the line in the picked block.

    :param answer: the LLM's whole reply.
    :raises CheckError: no Python code defining a function was found, or the answer is longer
        than :data:`MAX_ANSWER_CHARS`.
    """
    if len(answer) > MAX_ANSWER_CHARS:
        reason = (f"the answer has {len(answer):,} characters, and at most {MAX_ANSWER_CHARS:,} "
                  f"are read; reply with one ```python block defining `{REWARD_FUNCTION}` and a "
                  "few lines of prose")
        raise CheckError([Finding(0, reason)], "")
    fenced = _python_blocks(answer)
    blocks = [body for body, _ in fenced]
    if not any(_DEFINES_ANY.search(block) for block in blocks):
        in_json = _json_code(answer)  # structured output: {"reward_function": "def ...", ...}
        if in_json:
            fenced, blocks = [], in_json
    if not blocks:
        blocks = _unfenced_code(answer)
    chosen, note = _choose(blocks, [before for _, before in fenced], answer)
    if chosen is None:
        raise CheckError(
            [Finding(0, f"the answer contains no Python code defining `{REWARD_FUNCTION}`; "
                        "reply with one ```python block that defines it")],
            answer,
        )
    return FoundCode(_with_definitions_from(blocks[chosen], blocks), note)


def code_choice_note(answer: str) -> str:
    """:func:`find_code`'s note for ``answer``, without parsing any code: which of several
    blocks defining the reward function was trained (empty for an answer with one).

    :param answer: the LLM's whole reply.
    """
    if len(answer) > MAX_ANSWER_CHARS:
        return ""
    fenced = _python_blocks(answer)
    return _choose([body for body, _ in fenced], [before for _, before in fenced], answer)[1]


def _json_code(answer: str) -> list[str]:
    """The code in an answer that is a JSON object, or holds one in a fenced block, as
    structured-output modes return it: each string value (at any depth) that defines a
    function, its own fences taken off."""
    blocks = [body for language, body, _ in _fenced_blocks(answer) if language in ("json", "")]
    texts = [answer, *blocks]
    found: list[str] = []
    for text in texts:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's limit
            continue
        pending, visited = [data], 0
        while pending and visited < _MAX_JSON_VALUES:
            value, visited = pending.pop(), visited + 1
            if isinstance(value, dict):
                pending += reversed(list(value.values()))
            elif isinstance(value, list):
                pending += reversed(value)
            elif isinstance(value, str) and _DEFINES_ANY.search(value):
                inner = _python_blocks(value)
                found += [body for body, _ in inner] if inner else [textwrap.dedent(value)]
    return found


def _python_blocks(answer: str) -> list[tuple[str, str]]:
    """``(dedented body, prose before it)`` of each fenced block that may be Python."""
    return [(textwrap.dedent(body), before) for language, body, before in _fenced_blocks(answer)
            if language not in _NON_PYTHON_LANGUAGES]


def _choose(blocks: Sequence[str], headings: Sequence[str], answer: str) -> tuple[int | None, str]:
    """The index of the block to train (None: none defines a function) and, where several
    define the reward function, a note saying which was taken and why.

    :param blocks: the code blocks.
    :param headings: the prose before each (empty for code found without fences).
    :param answer: the whole answer, for what it recommends.
    """
    for pattern in (_DEFINES_REWARD, _DEFINES_ANY):
        defining = [index for index, block in enumerate(blocks) if pattern.search(block)]
        if defining:
            break
    else:
        return None, ""
    if len(defining) == 1 or len(headings) != len(blocks):
        return defining[-1], ""
    recommended = _recommended(answer, [headings[index] for index in defining])
    chosen = len(defining) - 1 if recommended is None else recommended
    which = "last" if chosen == len(defining) - 1 else (
        _ORDINALS[chosen] if chosen < len(_ORDINALS) else f"number {chosen + 1}")
    why = ("the one the answer recommends" if recommended is not None
           else "as the answer did not say which to use")
    note = (f"the answer held {len(defining)} code blocks defining the reward function; the "
            f"{which} was trained, {why} (send one block: the one to train)")
    return defining[chosen], note


def _fenced_blocks(answer: str) -> list[tuple[str, str, str]]:
    """``(language, body, prose before it)`` of each fenced block, in one pass over the lines;
    a block without its closing fence runs to the end of the answer."""
    lines = answer.splitlines(keepends=True)
    found = []
    index, prose_start = 0, 0
    while index < len(lines):
        opening = _FENCE_LINE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence = opening.group(1)
        end = index + 1
        while end < len(lines):
            text = lines[end].strip()
            if text.startswith(fence) and text.count(fence[0]) == len(text):
                break
            end += 1
        body, before = "".join(lines[index + 1 : end]), "".join(lines[prose_start:index])
        found.append((opening.group(2).lower(), body, before))
        index = prose_start = end + 1
    return found


def _recommended(answer: str, headings: Sequence[str]) -> int | None:
    """Which of the blocks (each known by the prose before it) the answer recommends:
    by its label ("Option B"), its place ("the first one") or a heading that recommends it;
    None when it says nothing, or recommends more than one."""
    labels: dict[str, int] = {}
    for index, before in enumerate(headings):
        found = _LABEL.findall(before[-_HEADING_CHARS:])
        if found:
            labels.setdefault(found[-1].lower(), index)
    targets: set[int] = set()
    for index, before in enumerate(headings):
        # a heading right before the block: "### Option A (recommended)"
        heading = before[-_HEADING_CHARS:].rstrip().rsplit("\n", 1)[-1]
        if _RECOMMENDS.search(heading) and not _ORDINAL.search(heading) and not _LABEL.search(
                _RECOMMENDS.split(heading, 1)[-1]):
            targets.add(index)
    for sentence in re.split(r"(?<=[.!?])\s+|\n", answer):
        if len(sentence) > 400 or "```" in sentence or not _RECOMMENDS.search(sentence):
            continue
        label = next((labels[value.lower()] for value in _LABEL.findall(sentence)
                      if value.lower() in labels), None)
        if label is not None:
            targets.add(label)
            continue
        ordinal = _ORDINAL.search(sentence)
        if ordinal is not None:
            word = ordinal.group(1).lower()
            place = len(headings) - 1 if word in ("last", "final") else _ORDINALS.index(word)
            if place < len(headings):
                targets.add(place)
    return targets.pop() if len(targets) == 1 else None


#: names every program has without defining them
_GIVEN_NAMES = frozenset({"np", "numpy", "torch", "math", *dir(builtins)})


def _names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """``(names tree reads but binds nowhere, names it binds)``, a scope-free over-approximation."""
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return read - bound - _GIVEN_NAMES, bound


def _top_level_definitions(block: str) -> list[tuple[set[str], str, set[str]]]:
    """``(names it binds, its source lines, names it reads and binds not)`` for each
    top-level def, assignment and import of ``block`` (one parse of the block)."""
    tree, _ = parse_source(block)
    if tree is None:
        return []
    lines = block.splitlines()
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names = {node.name}
        elif isinstance(node, ast.Assign):
            names = {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        else:
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        text = "\n".join(lines[first - 1 : node.end_lineno])
        found.append((names, text, _names(node)[0] - names))
    return found


def _with_definitions_from(code: str, blocks: list[str]) -> str:
    """``code`` with the definitions of the names it uses but does not define appended,
    taken from the other ``blocks`` (the later block's where two define a name). Every
    block is parsed once."""
    tree, _ = parse_source(code)
    if tree is None:
        return code
    missing, bound = _names(tree)
    if not missing:
        return code
    definitions = [item for block in reversed(blocks) if block is not code
                   for item in _top_level_definitions(block)]
    where: dict[str, int] = {}
    for index, (names, _, _) in enumerate(definitions):
        for name in names:
            where.setdefault(name, index)
    added: list[int] = []
    wanted = sorted(missing, reverse=True)
    while wanted:
        name = wanted.pop()
        index = where.get(name)
        if name in bound or index is None or index in added:
            continue
        added.append(index)
        names, _, reads = definitions[index]
        bound |= names
        wanted += sorted(reads - bound, reverse=True)
    if not added:
        return code
    texts = [definitions[index][1] for index in added]
    added_text = "\n\n".join(texts)
    return code.rstrip("\n") + "\n\n\n# from another code block of the answer\n" + added_text + "\n"


def _unfenced_code(answer: str) -> list[str]:
    """The longest run of lines from the first code-like line that parses and defines a
    function (at most MAX_SOURCE_CHARS of them). Each failed parse cuts the text before the
    line its syntax error names (the prose after the code, usually), and the tries parse
    at most :data:`MAX_UNFENCED_PARSED_CHARS` in all: an answer does not get to spend the
    search's time on one parse per line."""
    lines = answer.splitlines()
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return []
    end, size = start, 0
    while end < len(lines) and size + len(lines[end]) < MAX_SOURCE_CHARS:
        size += len(lines[end]) + 1
        end += 1
    budget = MAX_UNFENCED_PARSED_CHARS
    while end > start:
        candidate = textwrap.dedent("\n".join(lines[start:end])) + "\n"
        budget -= len(candidate)
        if budget < 0:
            break
        tree, findings = parse_source(candidate)
        if tree is not None:
            defines = any(isinstance(node, ast.FunctionDef) for node in tree.body)
            return [candidate] if defines else []
        error_line = findings[0].line if findings else 0
        end = start + error_line - 1 if 1 < error_line <= end - start else end - 1
    return []
