"""Reward programs: source text found in an LLM answer, checked, loaded and called on batches.

A reward program is Python source defining ``compute_reward`` (or exactly one top-level
function under another name) that takes named batched tensors as keyword arguments (a
subset of ``describe(env_id).variables``) and returns ``(reward, components)``: a float
tensor ``(N,)`` and a dict of named float ``(N,)`` tensors, as in Eureka. A bare tensor
return (Text2Reward style) counts as one component named ``"reward"``.

Example::

    >>> from rewardlab import llm_reward
    >>> program = llm_reward.RewardProgram.from_llm_answer('''
    ... Here is a dense reward:
    ... ```python
    ... def compute_reward(theta, next_theta):
    ...     upright = 1.0 - (next_theta / 0.21) ** 2
    ...     return upright, {"upright": upright}
    ... ```''')
    >>> program.parameters
    ('theta', 'next_theta')
    >>> program.check("CartPole-v1")

Loading (:class:`RewardFunction`) executes the program, so it belongs inside the sandbox
(:func:`rewardlab.llm_reward.evaluate` does that); load a program in-process only when you trust it.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import dis
import json
import linecache
import math
import re
import sys
import textwrap
import traceback
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rewardlab.envs.descriptions import EnvDescription, describe
from rewardlab.llm_reward.programs.checks import (
    ALLOWED_MODULES,
    MAX_SOURCE_CHARS,
    PROGRAM_FILENAME,
    REWARD_FUNCTION,
    SAFE_BUILTINS,
    CheckError,
    Finding,
    check_source,
    check_tree,
    find_reward_function,
    forbidden_attribute,
    forbidden_module,
    parse_source,
)
from rewardlab.llm_reward.programs.normalize import normalize_source

__all__ = ["FoundCode", "ProgramError", "RewardFunction", "RewardProgram", "code_choice_note", "extract_code",
           "find_code", "plain_component_name", "program_traceback"]

BARE_COMPONENT = "reward"
#: the most components a program may return; the caller of the sandbox takes no more
MAX_COMPONENTS = 32
#: the prefix of a program's components among a training's reward components
#: (:class:`~rewardlab.llm_reward.programs.wrapper.ProgramReward`, the sandboxed training)
COMPONENT_PREFIX = "program/"
#: the longest component tag, prefix included, as TensorBoard tags and reports take them;
#: also the longest name a program may give a component before it is made plain
MAX_COMPONENT_TAG_CHARS = 64
#: the longest component name, once made plain (:func:`plain_component_name`)
MAX_COMPONENT_NAME_CHARS = MAX_COMPONENT_TAG_CHARS - len(COMPONENT_PREFIX)
#: a component's name: an identifier, the one rule at both trust boundaries (the program's
#: process and the search that reads its results)
COMPONENT_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_COMPONENT_NAME_CHARS - 1}}}")
#: the largest reward or component magnitude a program may return
MAX_MAGNITUDE = 1e15
MAX_MESSAGE_CHARS = 2000
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
_DEFINES_REWARD = re.compile(rf"^[ \t]*(def[ \t]+{REWARD_FUNCTION}\b|{REWARD_FUNCTION}[ \t]*=[ \t]*lambda\b)", re.MULTILINE)
_DEFINES_ANY = re.compile(r"^[ \t]*def\s", re.MULTILINE)
_NON_PYTHON_LANGUAGES = {"json", "text", "bash", "sh", "shell", "console", "yaml", "output"}
# how answers that offer several programs say which one to use
_RECOMMENDS = re.compile(r"\brecommend|\bpreferr?ed\b|\bI(?:'d| would) (?:go with|use|pick|choose)\b", re.IGNORECASE)
_LABEL = re.compile(r"\b(?:option|version|approach|alternative|variant|solution)[ \t]*(?:#[ \t]*)?([A-Za-z]|\d{1,2})\b",
                    re.IGNORECASE)
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
        raise CheckError([Finding(0, f"the answer has {len(answer):,} characters, and at most "
                                     f"{MAX_ANSWER_CHARS:,} are read; reply with one ```python block "
                                     f"defining `{REWARD_FUNCTION}` and a few lines of prose")], "")
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
            [Finding(0, f"the answer contains no Python code defining `{REWARD_FUNCTION}`; reply with "
                        "one ```python block that defines it")],
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
    why = "the one the answer recommends" if recommended is not None else "as the answer did not say which to use"
    note = (f"the answer held {len(defining)} code blocks defining the reward function; the {which} was "
            f"trained, {why} (send one block: the one to train)")
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
        found.append((opening.group(2).lower(), "".join(lines[index + 1 : end]), "".join(lines[prose_start:index])))
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
        label = next((labels[value.lower()] for value in _LABEL.findall(sentence) if value.lower() in labels), None)
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
        found.append((names, "\n".join(lines[first - 1 : node.end_lineno]), _names(node)[0] - names))
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
    definitions = [item for block in reversed(blocks) if block is not code for item in _top_level_definitions(block)]
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
    return code.rstrip("\n") + "\n\n\n# from another code block of the answer\n" + "\n\n".join(texts) + "\n"


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
            return [candidate] if any(isinstance(node, ast.FunctionDef) for node in tree.body) else []
        error_line = findings[0].line if findings else 0
        end = start + error_line - 1 if 1 < error_line <= end - start else end - 1
    return []


@dataclass(frozen=True)
class RewardProgram:
    """The source of a reward program that passed the env-independent static checks.

    Build one with :meth:`from_source` or :meth:`from_llm_answer`; both raise
    :class:`~rewardlab.llm_reward.programs.checks.CheckError` listing every problem found.
    Both first make the code plain (:func:`~rewardlab.llm_reward.programs.normalize.normalize_source`:
    annotations, typing imports and TorchScript decorators removed, every line kept).

    :param source: the program text (after normalisation).
    :param function_name: the reward function's name (``compute_reward`` unless the program
        defines a single function under another name).
    :param parameters: the reward function's argument names, in order.
    :param defaults: the arguments that have a default value; one that is not a variable
        of the env is a constant: it is never passed.
    :param notes: what normalisation removed, one sentence each, for the report.
    """

    source: str
    function_name: str
    parameters: tuple[str, ...]
    defaults: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @classmethod
    def from_source(cls, source: str, env: str | EnvDescription | None = None) -> RewardProgram:
        """Normalise ``source``, check it and wrap it: parsed once, checked once.

        :param source: Python source defining the reward function.
        :param env: an env id or its description: the checks include that the arguments are
            variables it declares (as :meth:`check` does); ``None``: every check but that one.
        :raises CheckError: the source failed a static check.
        """
        normalized = normalize_source(source)
        tree, findings = parse_source(normalized.source)
        if tree is not None:
            if env is None:
                findings = check_tree(tree)
            else:
                description = describe(env) if isinstance(env, str) else env
                meanings = {variable.name: variable.meaning for variable in description.state}
                findings = check_tree(tree, description.variables, meanings)
        if findings:
            raise CheckError(findings, normalized.source)
        assert tree is not None
        function = find_reward_function(tree)
        assert function is not None, "check_source reports a program without a reward function"
        arguments = function.args
        positional = (*arguments.posonlyargs, *arguments.args)
        parameters = tuple(a.arg for a in (*positional, *arguments.kwonlyargs))
        with_default = positional[len(positional) - len(arguments.defaults):] if arguments.defaults else ()
        defaults = tuple(a.arg for a in with_default) + tuple(
            a.arg for a, value in zip(arguments.kwonlyargs, arguments.kw_defaults) if value is not None
        )
        notes = (*normalized.notes, *_component_name_notes(function))
        return cls(source=normalized.source, function_name=function.name, parameters=parameters,
                   defaults=defaults, notes=notes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RewardProgram:
        """The program :func:`dataclasses.asdict` made into ``data`` (JSON data: lists for tuples).
        It is not checked again: rebuild only what a check made.

        :param data: the plain data.
        :raises KeyError: a field is missing.
        :raises TypeError: a field is not of its kind.
        """
        return cls(source=str(data["source"]), function_name=str(data["function_name"]),
                   parameters=tuple(data["parameters"]), defaults=tuple(data["defaults"]),
                   notes=tuple(data["notes"]))

    @classmethod
    def from_llm_answer(cls, answer: str) -> RewardProgram:
        """Find the program in an LLM's reply (see :func:`extract_code`) and check it.

        :param answer: the whole reply: prose, one or several code blocks.
        :raises CheckError: no program found, or it failed a static check.
        """
        return cls.from_source(extract_code(answer))

    def check(self, env: str | EnvDescription) -> None:
        """Run every static check, including that the arguments are variables ``env`` declares.

        :param env: an env id or its description.
        :raises CheckError: listing every finding.
        """
        description = describe(env) if isinstance(env, str) else env
        meanings = {variable.name: variable.meaning for variable in description.state}
        findings = check_source(self.source, description.variables, meanings)
        if findings:
            raise CheckError(findings, self.source)

    def inputs(self, description: EnvDescription) -> tuple[str, ...]:
        """The arguments the program is called with for ``description``'s env: its
        parameters, less those with a default that the env does not declare (constants)."""
        declared = set(description.variables)
        return tuple(name for name in self.parameters if name in declared or name not in self.defaults)

    def constant_notes(self, description: EnvDescription) -> tuple[str, ...]:
        """A note for each parameter that is a constant for ``description``'s env."""
        declared = set(description.variables)
        return tuple(
            f"`{name}` has a default and is not a variable of the env: it is a constant (never passed)"
            for name in self.parameters if name in self.defaults and name not in declared
        )


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


def _describe_exception(error: BaseException) -> str:
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
    return clip_message("".join(lines) + _describe_exception(error), 4 * MAX_MESSAGE_CHARS)


def _safe_getattr(obj: Any, name: str, *default: Any) -> Any:
    if not isinstance(name, str) or forbidden_attribute(name):
        raise AttributeError(f"getattr with the attribute name {name!r} is not allowed")
    return getattr(obj, name, *default)


def _safe_hasattr(obj: Any, name: str) -> bool:
    if not isinstance(name, str) or forbidden_attribute(name):
        raise AttributeError(f"hasattr with the attribute name {name!r} is not allowed")
    return hasattr(obj, name)


_IMPORT_NAME = dis.opmap["IMPORT_NAME"]


def _safe_import(
    name: str,
    globals: Mapping[str, Any] | None = None,
    locals: Mapping[str, Any] | None = None,
    fromlist: tuple[str, ...] | None = (),
    level: int = 0,
) -> Any:
    """The program's ``__import__``: its own ``import`` statements may import math, numpy,
    torch and their public submodules only.

    numpy's and torch's C code imports its own modules lazily through the calling frame's
    ``__import__``, which for a call from the program is this one (``a.max()`` imports
    ``numpy._core._methods``): an import that is not the program's own ``import`` statement
    gets the real import for the modules of numpy, torch and math, private ones included,
    and nothing else (``__import__('os')`` called directly stays refused).
    """
    caller = sys._getframe(1)
    code = caller.f_code
    statement = code.co_filename == PROGRAM_FILENAME and code.co_code[caller.f_lasti] == _IMPORT_NAME
    if level:
        reason = "relative imports are not allowed"
    elif statement:
        reason = forbidden_module(name)
        for item in fromlist or ():
            reason = reason or forbidden_attribute(item)
    elif name.split(".")[0] in ALLOWED_MODULES:
        reason = None
    else:
        reason = f"imports `{name}`; reward programs may only import math, numpy and torch"
    if reason:
        raise ImportError(reason)
    return builtins.__import__(name, globals, locals, fromlist, level)


def restricted_builtins() -> dict[str, Any]:
    """The builtins a reward program's namespace gets: :data:`~rewardlab.llm_reward.programs.checks.SAFE_BUILTINS`.

    ``getattr``/``hasattr`` refuse private and forbidden names and ``__import__`` only
    imports math, numpy and torch, whatever got past the static checks.
    """
    namespace = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    namespace.update(getattr=_safe_getattr, hasattr=_safe_hasattr, __import__=_safe_import)
    return namespace


def _check_output(value: Any, what: str, num_envs: int, device: torch.device, line: str = "") -> torch.Tensor:
    """``value`` as a float32 ``(num_envs,)`` tensor on ``device``, or a :class:`ProgramError`
    whose message names the return line, what is wrong in the program's terms and the fix.

    For a batch of one env, a number (Python or numpy, a bool, a 0-d tensor or array) is
    that env's value, as code written for one state returns it (per-state mode takes the
    same); a batch of several needs one value per env."""
    if num_envs == 1 and (_is_number(value) or (isinstance(value, torch.Tensor | np.ndarray) and value.ndim == 0)):
        value = torch.tensor([float(value)])
    if isinstance(value, np.ndarray) and value.shape == (num_envs,) and np.issubdtype(value.dtype, np.number):
        value = torch.as_tensor(value, dtype=torch.float32)  # numpy on the whole batch is fine
    if _is_scalar(value):
        raise ProgramError(
            f"{line}{what} is one number ({type(value).__name__}) for the whole batch of {num_envs} envs: "
            "something reduced the batch to a scalar (a numpy or Python call such as np.mean, float(), "
            "sum(), max() on an input), or the program returns a constant; keep one value per env with "
            "torch ops (torch.maximum, torch.where, .clamp) and a constant as torch.full_like(x, c)"
        )
    if not isinstance(value, torch.Tensor):
        raise ProgramError(
            f"{line}{what} is a {type(value).__name__}; it must be a torch tensor of shape ({num_envs},) "
            "(one value per env)"
        )
    if value.dim() == 0 and num_envs > 1:
        raise ProgramError(
            f"{line}{what} is a single value for the whole batch of {num_envs} envs: a reduction over "
            "the batch (`.sum()`, `.mean()`, `torch.sum(...)`, `.max()` without `dim`) collapsed it; "
            "every input is already one value per env, so drop the reduction"
        )
    if tuple(value.shape) != (num_envs,):
        raise ProgramError(
            f"{line}{what} has shape {tuple(value.shape)}; it must have shape ({num_envs},), one value "
            f"per env: {_REDUCE_LAST}"
        )
    if not value.dtype.is_floating_point:
        raise ProgramError(
            f"{line}{what} has dtype {value.dtype}; it must be a float tensor (use .float())"
        )
    return value.detach().to(device=device, dtype=torch.float32)


# Errors of code written for one state at a time, run on a batch: the program is then run
# once per env (per-state mode).
_PER_STATE_ERRORS = (
    "Boolean value of Tensor with more than one",
    "only one element tensors can be converted",
    "a Tensor with",  # "a Tensor with N elements cannot be converted to Scalar"
    "must be real number, not Tensor",
)


def _per_state_line(error: Exception, num_envs: int) -> str:
    """``"line N: `code` needs one value, not a batch of num_envs"`` for the program's frame."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == PROGRAM_FILENAME]
    if not frames:
        return ""
    frame = frames[-1]
    code = (frame.line or "").strip()
    return f"line {frame.lineno}: `{code}` needs one value, and each argument holds {num_envs} (one per env)"


# numpy's reductions call the tensor's method with numpy's keywords (axis=, out=, ddof=)
_NUMPY_ON_TENSOR = re.compile(
    r"unexpected keyword argument 'axis'|'dim' must be int, not NoneType|invalid combination of arguments.*axis"
)


def _hint(error: Exception) -> str:
    """How to fix an error whose message alone does not say it (empty for others)."""
    if isinstance(error, TypeError) and _NUMPY_ON_TENSOR.search(str(error)):
        return (" (a numpy reduction such as np.sum, np.mean, np.max or np.std was given a torch tensor: every "
                "input is a torch tensor, so use torch's own over the last dimension of (N, k) values, e.g. "
                "x.sum(dim=-1), x.amax(dim=-1), torch.linalg.norm(x, dim=-1); an (N,) value is already one "
                "number per env: reduce nothing)")
    return ""


def _per_state_error(error: Exception) -> bool:
    return isinstance(error, RuntimeError | TypeError | ValueError) and any(
        text in str(error) for text in _PER_STATE_ERRORS
    )


#: the advice for a value of the wrong shape, unless the program stacked its inputs on dim 0
_REDUCE_LAST = ("every input is already (N,) (or (N, k) for vector actions), so reduce only over the last "
                "dimension (`dim=-1`) or `.squeeze(-1)` a trailing 1")
_STACKERS = {"stack", "vstack", "row_stack", "array", "asarray", "tensor", "as_tensor"}
_ALWAYS_FIRST = {"vstack", "row_stack", "array", "asarray", "tensor", "as_tensor"}
_COMPONENT_IN_REASON = re.compile(r"component ('(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")")


@dataclass(frozen=True)
class _Sites:
    """Where the reward function computes what it returns, for messages that quote its lines.

    :param lines: the program's lines.
    :param returns: the line of its last ``return`` (0: none).
    :param reward: the lines that compute the reward it returns.
    :param components: the lines that compute each component of a dict literal it returns.
    :param stacks_first: the line of a call that stacks inputs on dim 0 (``torch.stack([a, b])``,
        ``np.array([a, b])``), which puts the envs on the last dimension (0: none).
    """

    lines: tuple[str, ...] = ()
    returns: int = 0
    reward: tuple[int, ...] = ()
    components: dict[str, tuple[int, ...]] = field(default_factory=dict)
    stacks_first: int = 0

    def quote(self, numbers: Sequence[int]) -> str:
        """The numbered lines, one per line, for the end of a message (empty for none)."""
        shown = sorted({number for number in numbers if 0 < number <= len(self.lines)})[-4:]
        if not shown:
            return ""
        return "\nthe lines this is about:\n" + "\n".join(
            f"  line {number}: {self.lines[number - 1].strip()[:160]}" for number in shown)


def _program_sites(source: str, function_name: str) -> _Sites:
    """The :class:`_Sites` of the reward function ``function_name`` of ``source``."""
    tree = ast.parse(source)
    function = next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function_name),
                    None)
    if function is None:
        return _Sites(tuple(source.splitlines()))
    nodes = list(ast.walk(function))
    returns = [node for node in nodes if isinstance(node, ast.Return)]
    if not returns:
        return _Sites(tuple(source.splitlines()))
    last = max(returns, key=lambda node: node.lineno)
    assigned: dict[str, list[int]] = {}
    for node in nodes:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    assigned.setdefault(name.id, []).append(node.lineno)

    def computing(expression: ast.expr | None) -> tuple[int, ...]:
        if expression is None:
            return (last.lineno,)
        if isinstance(expression, ast.Name):
            return (*assigned.get(expression.id, [])[-2:], last.lineno)
        read = [name.id for name in ast.walk(expression) if isinstance(name, ast.Name)]
        return (*(assigned[name][-1] for name in dict.fromkeys(read) if name in assigned), last.lineno)

    value = last.value
    reward, components = value, {}
    if isinstance(value, ast.Tuple) and len(value.elts) == 2:
        reward = value.elts[0]
        if isinstance(value.elts[1], ast.Dict):
            components = {key.value: computing(item) for key, item in zip(value.elts[1].keys, value.elts[1].values)
                          if isinstance(key, ast.Constant) and isinstance(key.value, str)}
    stacks_first = next((node.lineno for node in nodes if _stacks_first(node)), 0)
    return _Sites(tuple(source.splitlines()), last.lineno, computing(reward), components, stacks_first)


def _stacks_first(node: ast.AST) -> bool:
    """Whether ``node`` stacks two or more values on dim 0: ``torch.stack([a, b])``,
    ``np.stack((a, b), axis=0)``, ``np.array([a, b])``."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.List | ast.Tuple)
            and len(node.args[0].elts) >= 2):
        return False
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else function.id if isinstance(function, ast.Name) else ""
    if name not in _STACKERS:
        return False
    if name in _ALWAYS_FIRST:
        return True
    given = [keyword.value for keyword in node.keywords if keyword.arg in ("dim", "axis")] + node.args[1:2]
    return not given or (isinstance(given[0], ast.Constant) and given[0].value == 0)


def _split_result(result: Any) -> tuple[Any, Any]:
    """``(reward, components)`` of what a program returned; ``(result, None)`` for a bare reward."""
    return (result[0], result[1]) if isinstance(result, tuple) and len(result) == 2 else (result, None)


def _is_scalar(reward: Any) -> bool:
    # a Python or numpy number for a batch: code written for one state (a 0-d tensor is a
    # reduced batch instead, a bug that _check_output reports)
    return _is_number(reward) and not isinstance(reward, bool)


def plain_component_name(name: str) -> str:
    """``name`` as :data:`COMPONENT_NAME` takes it. A name is a label: one that is not an
    identifier becomes one, its letters and digits kept (accents dropped) and every run of
    anything else made one ``_`` ("cart position (m)" is "cart_position_m"), ``_`` put
    before a leading digit, cut to :data:`MAX_COMPONENT_NAME_CHARS` characters.

    :raises ProgramError: the name has no letter or digit to keep (``""``, ``"!!"``).
    """
    if COMPONENT_NAME.fullmatch(name):
        return name
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[A-Za-z0-9]+", folded)
    if not words:
        raise ProgramError(f"component names are identifiers (letters, digits and _, not starting with a digit), "
                           f"such as 'speed_bonus'; got {name!r:.80}, which has no letter or digit")
    plain = "_".join(words)
    return ("_" + plain if plain[0].isdigit() else plain)[:MAX_COMPONENT_NAME_CHARS].rstrip("_")


def _component_name_notes(function: ast.FunctionDef) -> tuple[str, ...]:
    """A note for each component name the reward function writes as a string that is not an
    identifier (in the dict it returns, or that it fills under the name it returns), saying
    the name it is reported under."""
    returned = [node.value.elts[1] for node in ast.walk(function) if isinstance(node, ast.Return)
                and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2]
    names = {node.id for node in returned if isinstance(node, ast.Name)}
    dicts = [node for node in returned if isinstance(node, ast.Dict)]
    keys: list[ast.expr | None] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                isinstance(target, ast.Name) and target.id in names for target in node.targets):
            dicts.append(node.value)
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in names):
            keys.append(node.slice)
    keys += [key for node in dicts for key in node.keys]
    notes: dict[str, None] = {}
    for key in keys:
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            continue
        try:
            plain = plain_component_name(key.value)
        except ProgramError:
            continue  # the run says why, naming the component
        if plain != key.value:
            notes[f"the component {key.value!r:.80} is reported as {plain} (component names are "
                  "identifiers)"] = None
    return tuple(notes)[:MAX_COMPONENTS]


def _is_number(value: Any) -> bool:
    """A Python or numpy number or bool (what code written for one state returns)."""
    return isinstance(value, bool | int | float | np.generic)


def _as_float(value: Any, what: str) -> float:
    size = value.numel() if isinstance(value, torch.Tensor) else getattr(value, "size", None)
    if isinstance(value, torch.Tensor | np.ndarray) and size == 1:
        return float(value.reshape(()))
    if isinstance(value, float | int | np.generic):  # True/False count as 1/0
        return float(value)
    raise ProgramError(f"{what} is a {type(value).__name__}; for one env it must be one number")


def _both(first: ProgramError, then: ProgramError, how: str) -> ProgramError:
    """One failure out of two ways of calling the program that both failed: the first one's
    reason and traceback, then the second's, so that neither cause is lost."""
    if first.kind == "sandbox" or then.kind == "sandbox":
        return first if first.kind == "sandbox" else then
    if first.traceback.strip() and first.traceback.splitlines()[-2:] == then.traceback.splitlines()[-2:]:
        return first  # the same error at the same line: once is enough
    reason = f"{first.reason}\n{how}, it failed too: {then.reason}"
    traceback_text = "\n".join(text for text in (first.traceback, then.traceback) if text.strip())
    return ProgramError(reason, traceback_text, first.kind if first.kind != "program" else then.kind)


class RewardFunction:
    """A reward program loaded into a restricted namespace and applied to batched transitions.

    Calling it builds the named inputs (each a tensor of the program's own), calls the
    program under ``torch.no_grad()`` and checks what it returns: a float tensor ``(N,)``
    and a dict of at most 32 named float ``(N,)`` tensors, all finite.
    Anything wrong raises :class:`ProgramError`.

    Executes the program: inside the sandbox, or in-process only for trusted programs.

    :param program: the program.
    :param description: the env's description (names to tensors).
    :param check: called after every call of the program; a string it returns fails the
        call with that reason (the sandbox reports its guard's violations this way, since a
        program may catch the exception the guard raised).
    :raises ProgramError: running the program's top level failed or its function is missing.
    """

    def __init__(
        self,
        program: RewardProgram,
        description: EnvDescription,
        check: Callable[[], str | None] | None = None,
    ):
        self.program = program
        self.description = description
        self.calls = 0
        self._check = check
        linecache.cache[PROGRAM_FILENAME] = (
            len(program.source), None, program.source.splitlines(True), PROGRAM_FILENAME
        )
        namespace: dict[str, Any] = {
            "__builtins__": restricted_builtins(),
            "__name__": "reward_program",
            "math": math,
            "np": np,
            "numpy": np,
            "torch": torch,
        }
        try:
            code = compile(
                program.source, PROGRAM_FILENAME, "exec",
                flags=__future__.annotations.compiler_flag, dont_inherit=True,
            )
            exec(code, namespace)
        except Exception as error:
            raise self._failure(error, "running the program's top level") from None
        self._raise_if_check_fails()
        function = namespace.get(program.function_name)
        if not callable(function):
            raise ProgramError(f"the program does not define a function `{program.function_name}`")
        self._function: Callable[..., Any] = function
        self._sites = _program_sites(program.source, program.function_name)  # the one parse of the source
        #: ``"line N: "`` of the reward function's last ``return`` for messages, ``""`` if none
        self._line = f"line {self._sites.returns}: " if self._sites.returns else ""
        #: True once the program showed it is written for one state at a time: it is then
        #: run per env, with ``torch.vmap`` where it traces (pure torch code: one call for the
        #: batch), in a Python loop otherwise (one call of the program per env).
        self.per_state = False
        #: how per-state code runs: "vmap" or "loop" (decided on the first per-state call)
        self.per_state_mode = ""
        #: the line and the reason it showed it, for the note the model reads
        self.per_state_reason = ""
        # whether the first batched result was compared with the halves' (_check_independence)
        self._independence_checked = False
        # for a batch of one env: "state" (called with its values, as for one state) or
        # "batch" (with the batch of one, where that failed); "" before the first such call
        self._one_env_mode = ""

    def __call__(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
        env_reward: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The program's reward and components for one batched step.

        :param obs: observations before the step ``(N, *obs_shape)``.
        :param action: the actions ``(N,)`` or ``(N, *shape)``.
        :param next_obs: observations after it (true last ones where episodes ended).
        :param terminated: bool ``(N,)``.
        :param env_reward: the env's own reward for the step ``(N,)``, for a program that
            takes ``env_reward``.
        :return: ``(reward, components)``, float32 on ``obs.device``.
        :raises ProgramError: the program raised or returned something malformed or non-finite.
        """
        self.calls += 1
        num_envs = len(obs)
        raw = self.description.reward_inputs(
            obs, action, next_obs, terminated, self.program.inputs(self.description), env_reward
        )
        # Every input is a tensor of the program's own: changing it in place (``r -= c``,
        # ``x[mask] = 0``) touches nothing else, so it is allowed.
        inputs = {name: value.clone() for name, value in raw.items()}
        where = f"`{self.program.function_name}` (call {self.calls}, after {(self.calls - 1) * num_envs} env steps)"
        if num_envs == 1 and self._one_env_mode != "batch":
            # One env (a Gymnasium env wrapped): the program gets that env's values, as code
            # written for one state expects them (numpy on a list of the inputs, float(),
            # `if`); code written for a batch mostly runs on them too, and where it does not
            # (x[:, 0], len(x)) it gets the batch of one instead, from then on.
            try:
                result = self._per_state_call(inputs, 1, obs.device, where)
            except ProgramError as error:
                if error.kind == "sandbox" or self._one_env_mode == "state":
                    raise
                self._one_env_mode = "batch"
                inputs = {name: value.clone() for name, value in raw.items()}  # as the failed call left them
                try:
                    return self._batched_call(inputs, raw, num_envs, obs.device, where)
                except ProgramError as batch_error:
                    # both ways failed: the first is the cause for code written for one state
                    raise _both(error, batch_error, "called with the env's values as a batch of one") from None
            else:
                self._one_env_mode = "state"
                return result
        return self._batched_call(inputs, raw, num_envs, obs.device, where)

    def _batched_call(
        self, inputs: dict[str, torch.Tensor], raw: Mapping[str, torch.Tensor], num_envs: int,
        device: torch.device, where: str,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The program called on the batch, or per env once it showed it is written for one state."""
        if not self.per_state:
            try:
                with torch.no_grad():
                    result = self._function(**inputs)
            except Exception as error:
                # code for one state fails on a batch: with Python control flow on values
                # (`if x > 0`, float(x)) or with shapes of one state (torch.dot, stacking,
                # np.array of the inputs), and runs for one env's values
                mapped = self._vmapped_call(inputs, num_envs, device)
                if mapped is None and not _per_state_error(error):
                    if num_envs == 1:  # __call__ tried its values as one state first
                        raise self._failure(error, where) from None
                    one_env_error = self._one_env_error(raw)
                    if one_env_error is not None:
                        raise _both(
                            self._failure(error, where), one_env_error, "called with env 0's values alone"
                        ) from None
                self.per_state = True  # written for one state: run it per env from now on
                self.per_state_reason = _per_state_line(error, num_envs)
                if mapped is not None:
                    self.per_state_mode = "vmap"
                    return mapped
            else:
                if not (num_envs > 1 and _is_scalar(_split_result(result)[0])):
                    self._raise_if_check_fails()
                    checked = self._checked_result(result, num_envs, device)
                    if not self._independence_checked and num_envs > 1:
                        self._independence_checked = True
                        self._check_independence(raw, checked, where)
                    return checked
                self.per_state = True
                self.per_state_reason = (f"{self._line}it returns one number for a batch of {num_envs} "
                                         "envs (Python arithmetic on scalars)")
        if self.per_state_mode == "vmap":
            mapped = self._vmapped_call(inputs, num_envs, device)
            if mapped is not None:
                return mapped
        self.per_state_mode = "loop"  # Python control flow on values: vmap cannot trace it
        return self._per_state_call(inputs, num_envs, device, where)

    def _one_env_error(self, raw: Mapping[str, torch.Tensor]) -> ProgramError | None:
        """None when the program, called with env 0's values alone, returns a reward (and
        components) of one number each (code written for one state), else why it does not."""
        try:
            with torch.no_grad():
                self._one_state(self._function(**{name: value[0].clone() for name, value in raw.items()}))
        except ProgramError as error:
            self._raise_if_check_fails()
            return error
        except Exception as error:
            return self._failure(error, f"`{self.program.function_name}`")
        self._raise_if_check_fails()
        return None

    def _check_independence(
        self, raw: Mapping[str, torch.Tensor], whole: tuple[torch.Tensor, dict[str, torch.Tensor]], where: str
    ) -> None:
        """Call the program on each half of the batch and compare with the whole batch's
        result: an env's reward must not depend on the other envs (code written for one
        state that numpy or a reduction turned into one over the batch).

        :raises ProgramError: a half's values differ, or the program fails on a half.
        """
        num_envs, device = len(whole[0]), whole[0].device
        half = num_envs // 2
        for start, stop in ((0, half), (half, num_envs)):
            part = {name: value[start:stop].clone() for name, value in raw.items()}
            called = f"{where}, called on envs {start} to {stop - 1} alone"
            try:
                with torch.no_grad():
                    result = self._function(**part)
            except Exception as error:
                raise self._failure(error, called) from None
            self._raise_if_check_fails()
            try:
                reward, components = self._checked_result(result, stop - start, device)
            except ProgramError as error:
                raise ProgramError(f"{called}: {error.reason}; a reward program must work for any "
                                   "number of envs") from None
            if set(components) != set(whole[1]):
                raise ProgramError(f"{called}, returned the components {sorted(components)}, and on all "
                                   f"{num_envs} envs {sorted(whole[1])}: the components must not depend on "
                                   "the batch")
            pairs = [("the reward", reward, whole[0]),
                     *((f"component {name!r}", value, whole[1][name]) for name, value in components.items())]
            for what, alone, together in pairs:
                together = together[start:stop]
                close = (alone - together).abs() <= 1e-4 * together.abs() + 1e-5 * (1 + float(together.abs().max()))
                if not bool(close.all()):
                    env = start + int((~close).nonzero()[0, 0])
                    raise ProgramError(
                        f"{self._line}the reward of one env depends on the other envs in the batch: {what} "
                        f"of env {env} is {float(together[env - start]):.6g} in the batch of {num_envs} envs "
                        f"and {float(alone[env - start]):.6g} when `{self.program.function_name}` is called on "
                        f"envs {start} to {stop - 1} alone. Every input holds one value per env (shape (N,), "
                        "or (N, k) for vector variables), so a reduction over all of it mixes the envs: "
                        "np.linalg.norm([a, b]), np.array([...]), np.sum/np.max/np.mean without axis, .sum(), "
                        ".mean() or .max() without dim, torch.sum(x, dim=-1) on an (N,) input such as a "
                        "one-dimensional action, or a batch statistic (x / x.max(), x - x.mean()). Compute "
                        "each env's value from its own inputs: torch.sqrt(a ** 2 + b ** 2) for a norm, "
                        "reductions over dim=-1 of vector variables only (a reward that draws random "
                        "numbers differs between calls too: make it deterministic)"
                    )

    def _vmapped_call(
        self, inputs: Mapping[str, torch.Tensor], num_envs: int, device: torch.device
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        """The per-state program mapped over the batch by ``torch.vmap``; None where it cannot be."""
        names = list(inputs)

        def one_state(*values: torch.Tensor) -> Any:
            return self._function(**dict(zip(names, values, strict=True)))

        try:
            with torch.no_grad():
                result = torch.vmap(one_state)(*inputs.values())
            checked = self._checked_result(result, num_envs, device)
        except Exception:  # `if`, float(), .item(), Python numbers: the loop runs it instead
            return None
        self._raise_if_check_fails()
        return checked

    def _per_state_call(
        self, inputs: Mapping[str, torch.Tensor], num_envs: int, device: torch.device, where: str
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Call the program once per env with that env's values and stack what it returns."""
        rewards: list[float] = []
        per_env: list[dict[str, float]] = []
        for index in range(num_envs):
            single = {name: value[index] for name, value in inputs.items()}
            try:
                with torch.no_grad():
                    result = self._function(**single)
            except Exception as error:
                raise self._failure(error, f"{where}, called for env {index} on its own") from None
            reward, parts = self._one_state(result)
            rewards.append(reward)
            per_env.append(parts)
        self._raise_if_check_fails()
        # a component one branch leaves out (``if terminated: return -1.0, {"done": -1.0}``) is 0 there
        names = list(dict.fromkeys(name for parts in per_env for name in parts))
        named = {name: torch.tensor([parts.get(name, 0.0) for parts in per_env]) for name in names}
        stacked = torch.tensor(rewards, dtype=torch.float32)
        return self._checked_result((stacked, named) if named else stacked, num_envs, device)

    def _one_state(self, result: Any) -> tuple[float, dict[str, float]]:
        """What a call with one env's values returned, as the reward and named components of
        one number each.

        :raises ProgramError: it is not ``(number, {name: number})`` or a bare number.
        """
        reward, parts = _split_result(result)
        parts = {} if parts is None else parts
        if not isinstance(parts, dict):
            raise ProgramError(f"{self._line}`{self.program.function_name}` must return (reward, components)")
        return (_as_float(reward, f"{self._line}the reward returned for one env"),
                {str(key): _as_float(value, f"{self._line}component {key!r}") for key, value in parts.items()})

    def _raise_if_check_fails(self) -> None:
        reason = self._check() if self._check is not None else None
        if reason:
            raise ProgramError(reason, kind="sandbox")

    def _failure(self, error: Exception, where: str) -> ProgramError:
        """The :class:`ProgramError` for an exception raised while running ``where``."""
        self._raise_if_check_fails()
        described = _describe_exception(error)
        if isinstance(error, MemoryError) or (
            isinstance(error, RuntimeError) and "can't allocate memory" in str(error)
        ):
            return ProgramError(
                f"{where} ran out of memory ({described}); the sandbox limits its memory, so "
                "use smaller tensors",
                program_traceback(error),
                kind="limit",
            )
        return ProgramError(f"{where} raised {described}{_hint(error)}", program_traceback(error))

    def _checked_result(
        self, result: Any, num_envs: int, device: torch.device
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`_check_result`, whose failure quotes the lines that computed the values it
        names (in a search the next prompt shows only the best program, not this one), and
        whose advice fits what the program did."""
        try:
            return self._check_result(result, num_envs, device)
        except ProgramError as error:
            reason, sites = error.reason, self._sites
            numbers: list[int] = []
            for match in _COMPONENT_IN_REASON.finditer(reason):
                try:
                    numbers += sites.components.get(ast.literal_eval(match.group(1)), (sites.returns,))
                except (ValueError, SyntaxError):
                    numbers.append(sites.returns)
            if "the reward" in reason or not numbers:
                numbers += sites.reward or (sites.returns,)
            if _REDUCE_LAST in reason and sites.stacks_first:
                # "reduce over dim=-1" would be the mistake itself: the stack put the envs there
                numbers.append(sites.stacks_first)
                reason = reason.replace(_REDUCE_LAST, (
                    f"line {sites.stacks_first} stacks values on dim 0, which puts the envs on the last dimension, "
                    "so a reduction over dim=-1 mixes the envs; stack on the last dimension instead "
                    "(torch.stack([...], dim=-1), np.stack([...], axis=-1)) and then reduce over dim=-1"))
            raise ProgramError(reason + sites.quote(numbers), error.traceback, error.kind) from None

    def _check_result(
        self, result: Any, num_envs: int, device: torch.device
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        name = self.program.function_name
        line = self._line
        if isinstance(result, torch.Tensor | np.ndarray) or (num_envs == 1 and _is_number(result)):
            reward = _check_output(result, f"the reward returned by `{name}`", num_envs, device, line)
            components = {BARE_COMPONENT: reward}
        elif isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            reward = _check_output(result[0], f"the reward returned by `{name}`", num_envs, device, line)
            if len(result[1]) > MAX_COMPONENTS:
                raise ProgramError(
                    f"`{name}` returned {len(result[1])} components; at most {MAX_COMPONENTS} "
                    "are allowed"
                )
            components = {}
            for key, value in result[1].items():
                if not isinstance(key, str) or not 0 < len(key) <= MAX_COMPONENT_TAG_CHARS:
                    raise ProgramError(
                        f"component names must be strings of 1 to {MAX_COMPONENT_TAG_CHARS} characters; "
                        f"got {key!r:.80}"
                    )
                plain = plain_component_name(key)
                if plain in components:
                    raise ProgramError(f"the component names {key!r:.80} and another both become "
                                       f"{plain!r} (component names are identifiers); give them names "
                                       "that differ in their letters and digits")
                components[plain] = _check_output(value, f"component {key!r}", num_envs, device, line)
        else:
            raise ProgramError(
                f"`{name}` returned a {type(result).__name__}; it must return (reward, components): "
                f"a tensor ({num_envs},) and a dict of named tensors ({num_envs},)"
            )
        stacked = torch.stack([reward, *components.values()])
        if not bool(torch.isfinite(stacked).all()):
            raise ProgramError(line + self._non_finite_reason(reward, components))
        largest = float(stacked.abs().max()) if stacked.numel() else 0.0
        if largest > MAX_MAGNITUDE:
            raise ProgramError(
                f"{line}`{name}` returned a value of magnitude {largest:.3g} at call {self.calls}; rewards and "
                f"components must stay within +-{MAX_MAGNITUDE:.0e} (sums over episodes and batches overflow "
                "float32 past that): scale them down"
            )
        return reward, components

    def _non_finite_reason(self, reward: torch.Tensor, components: Mapping[str, torch.Tensor]) -> str:
        parts = []
        for what, value in (("the reward", reward), *((f"component {k!r}", v) for k, v in components.items())):
            nan = int(torch.isnan(value).sum())
            inf = int(torch.isinf(value).sum())
            if nan or inf:
                parts.append(f"{what}: {nan} NaN and {inf} inf of {len(value)}")
        return (
            f"`{self.program.function_name}` returned non-finite values at call {self.calls} "
            f"({'; '.join(parts)}); guard divisions, logs and exponentials (e.g. clamp the "
            "denominator or the argument)"
        )
