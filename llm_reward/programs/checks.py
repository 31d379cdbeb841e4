"""Static checks of reward-program source, run on the AST before anything executes.

Every rejection is a :class:`Finding` (line and reason, worded to be sent back to
the LLM that wrote the program); :func:`check_source` returns them all and
:class:`CheckError` carries them. What the checks allow:

- imports of ``math``, ``numpy`` and ``torch`` (and their public submodules, e.g.
  ``torch.nn.functional``); ``math``, ``np``/``numpy`` and ``torch`` are also
  available without importing;
- at the top level only imports, function definitions and constant assignments;
- the builtins in :data:`SAFE_BUILTINS` (no ``open``, ``exec``, ``eval``, ``compile``,
  ``__import__``, ``globals``, ``vars``, ``setattr``, ``type`` ...); ``getattr`` and
  ``hasattr`` only with a literal, public attribute name;
- no private or dunder attributes (``x.__class__``, ``torch._C``) and none of the
  attributes in :data:`FORBIDDEN_ATTRIBUTES` (modules such as ``torch.os``, file and
  process functions, global torch/numpy settings, frame internals);
- no classes, decorators, ``global``/``nonlocal`` or ``async`` code;
- source of at most :data:`MAX_SOURCE_CHARS` characters, without control characters (but
  tab and line breaks) or bidirectional overrides, whose syntax tree nests at most
  :data:`MAX_NESTING` levels (deeper trees overflow the recursion of ``ast.unparse`` and
  ``compile``);
- a reward function named ``compute_reward`` (or the one top-level function when there
  is only one) whose arguments are variables the env's description declares, which it
  does not change in place; a wrong argument or name gets the nearest variable of the env
  (a close spelling, or the words of its name in a variable's name or meaning).

These checks are one layer: the sandbox (:mod:`rewardlab.llm_reward.sandbox.runner`) assumes they can be
bypassed and enforces its own limits at run time.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "ALLOWED_MODULES",
    "FORBIDDEN_ATTRIBUTES",
    "PRELOADED_NAMES",
    "PROGRAM_FILENAME",
    "REWARD_FUNCTION",
    "SAFE_BUILTINS",
    "CheckError",
    "Finding",
    "check_source",
    "check_tree",
    "find_reward_function",
    "forbidden_attribute",
]

REWARD_FUNCTION = "compute_reward"
PROGRAM_FILENAME = "<reward_program>"
MAX_SOURCE_CHARS = 100_000
#: the deepest nesting of the syntax tree a program may have: far past what code a person
#: writes, and far below what overflows the recursion of ``ast.unparse`` and ``compile``
MAX_NESTING = 100
# Control characters (but tab, line feed, carriage return and form feed), C1 controls and
# the bidirectional overrides that make source read differently from how it runs: a
# program's source is shown in reports, terminals and prompts.
_CONTROL_CHARACTER = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

ALLOWED_MODULES = ("math", "numpy", "torch")
PRELOADED_NAMES = ("math", "np", "numpy", "torch")

SAFE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "callable", "chr", "dict", "divmod", "enumerate", "filter",
        "float", "format", "frozenset", "getattr", "hasattr", "int", "isinstance", "iter", "len",
        "list", "map", "max", "min", "next", "ord", "pow", "print", "range", "repr", "reversed",
        "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip",
        "ArithmeticError", "AssertionError", "Exception", "IndexError", "KeyError",
        "NotImplementedError", "OverflowError", "RuntimeError", "StopIteration", "TypeError",
        "ValueError", "ZeroDivisionError",
    }
)

_MODULE_REASON = "reaches the `{name}` module; reward programs may only use math, numpy and torch"
_FILE_REASON = "reads or writes files, which reward programs may not do"
_PROCESS_REASON = "starts, replaces or signals processes, which reward programs may not do"
_ENV_REASON = "reads or changes environment variables, which reward programs may not do"
_SUBSYSTEM_REASON = (
    "`{name}` can load or compile code or touch files and is not available to reward programs"
)
_GLOBAL_STATE_REASON = (
    "changes global torch/numpy settings shared with the training run; compute the reward "
    "without it"
)
_FRAME_REASON = "inspects interpreter frames or code objects, which reward programs may not do"


def _reasons(names: str, reason: str) -> dict[str, str]:
    return {name: reason for name in names.split()}


FORBIDDEN_ATTRIBUTES: dict[str, str] = {
    **{
        name: _MODULE_REASON.format(name=name)
        for name in (
            "os sys subprocess socket ctypes importlib builtins inspect shutil pathlib threading "
            "multiprocessing signal io pickle marshal gc tempfile glob platform resource asyncio "
            "code codeop runpy pty selectors mmap urllib http ftplib smtplib webbrowser "
            "weakref sysconfig site zipimport linecache traceback"
        ).split()
    },
    **_reasons("environ environb getenv putenv unsetenv", _ENV_REASON),
    **_reasons(
        "system popen fork forkpty spawnl spawnle spawnlp spawnv spawnve spawnvp posix_spawn "
        "posix_spawnp execl execle execlp execv execve execvp kill killpg abort",
        _PROCESS_REASON,
    ),
    **_reasons(
        "load loads save savez savez_compressed savetxt loadtxt genfromtxt fromfile tofile dump "
        "from_file memmap open_memmap DataSource fromregex",
        _FILE_REASON,
    ),
    **{
        name: _SUBSYSTEM_REASON.format(name=name)
        for name in (
            "utils hub jit compile library ops classes package distributed backends onnx export "
            "fx profiler testing overrides lib ctypeslib f2py distutils cpp_extension"
        ).split()
    },
    **_reasons(
        "manual_seed seed seterr seterrcall setbufsize use_deterministic_algorithms",
        _GLOBAL_STATE_REASON,
    ),
    **_reasons(
        "f_globals f_locals f_builtins f_back f_code gi_frame gi_code cr_frame ag_frame tb_frame "
        "tb_next co_code func_globals",
        _FRAME_REASON,
    ),
}

_BUILTIN_REASONS = {
    **_reasons("exec eval compile", "runs code from strings, which reward programs may not do"),
    **_reasons("open input breakpoint help exit quit", "is not available to reward programs"),
    **_reasons(
        "__import__ globals locals vars dir setattr delattr type object super memoryview "
        "classmethod staticmethod property id",
        "gives access to the interpreter's internals and is not available to reward programs",
    ),
}


@dataclass(frozen=True)
class Finding:
    """One reason a program was rejected.

    :param line: the 1-based source line (0 when it concerns the whole program).
    :param message: what is wrong and what to do instead, fit to send back to an LLM.
    """

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class CheckError(ValueError):
    """A program failed the static checks; :attr:`findings` says where and why.

    :param findings: the findings, at least one.
    :param source: the program's source, kept for the record.
    """

    def __init__(self, findings: Sequence[Finding], source: str = ""):
        self.findings = list(findings)
        self.source = source
        super().__init__(self.text())

    def text(self, one_line: bool = False) -> str:
        """The message: the findings as a list of lines (as an LLM reads them), or numbered on
        one line (as a terminal's error line shows them; a finding's text may hold ``;``).

        :param one_line: number the findings on one line.
        """
        if one_line:
            if len(self.findings) == 1:
                return f"the reward program was rejected: {self.findings[0]}"
            numbered = " ".join(f"({n}) {finding}" for n, finding in enumerate(self.findings, 1))
            return f"the reward program was rejected: {numbered}"
        listed = "\n".join(f"- {finding}" for finding in self.findings)
        return f"the reward program was rejected:\n{listed}"


def forbidden_attribute(name: str) -> str | None:
    """Why a program may not use attribute ``name``, or ``None`` if it may.

    :param name: an attribute name, e.g. ``"os"`` in ``torch.os``.
    """
    if name.startswith("_"):
        return (
            f"`{name}` is a private or dunder attribute; reward programs may only use public "
            "attributes of tensors, arrays and the math/numpy/torch modules"
        )
    if name.startswith("set_"):
        return f"`{name}` {_GLOBAL_STATE_REASON}"
    reason = FORBIDDEN_ATTRIBUTES.get(name)
    return f"`{name}` {reason}" if reason else None


def forbidden_module(module: str) -> str | None:
    """Why a program may not import ``module`` (a dotted name), or ``None`` if it may.

    :param module: e.g. ``"torch.nn.functional"``.
    """
    root, *rest = module.split(".")
    if root not in ALLOWED_MODULES:
        return f"imports `{module}`; reward programs may only import math, numpy and torch"
    for part in rest:
        reason = forbidden_attribute(part)
        if reason:
            return f"imports `{module}`: {reason}"
    return None


def find_reward_function(tree: ast.Module) -> ast.FunctionDef | None:
    """The reward function of a parsed program: ``compute_reward``, else the only top-level def.

    :param tree: the parsed module.
    """
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    for function in functions:
        if function.name == REWARD_FUNCTION:
            return function
    return functions[0] if len(functions) == 1 else None


def parse_source(source: str) -> tuple[ast.Module | None, list[Finding]]:
    """Parse ``source``, turning every way parsing can fail into a finding.

    :param source: the program text.
    :return: ``(tree, [])`` or ``(None, [finding])``.
    """
    if len(source) > MAX_SOURCE_CHARS:
        return None, [Finding(0, f"the program has {len(source)} characters; at most "
                                 f"{MAX_SOURCE_CHARS} are allowed")]
    control = _CONTROL_CHARACTER.search(source)
    if control is not None:
        line = source.count("\n", 0, control.start()) + 1
        return None, [Finding(line, f"the program holds the control character U+{ord(control.group()):04X}; "
                                    "source may hold printable text, tabs and line breaks only: remove it")]
    try:
        tree = ast.parse(source, filename=PROGRAM_FILENAME)
    except SyntaxError as error:
        line = error.lineno or 0
        return None, [Finding(line, f"syntax error: {error.msg}")]
    except (ValueError, RecursionError, MemoryError) as error:
        return None, [Finding(0, f"the program cannot be parsed: {type(error).__name__}: {error}")]
    deepest = _deepest(tree)
    if deepest is not None:
        return None, [Finding(deepest,
                              f"the program nests expressions more than {MAX_NESTING} levels deep (a chain of "
                              "attributes, calls, operators or decorators); write it as several statements")]
    return tree, []


def _deepest(tree: ast.AST) -> int | None:
    """The line of the first node nested more than :data:`MAX_NESTING` levels deep in ``tree``, or None
    (an iterative walk: deep trees overflow the recursion of ``ast.unparse`` and ``compile``)."""
    stack: list[tuple[ast.AST, int, int]] = [(tree, 0, 0)]
    while stack:
        node, depth, line = stack.pop()
        line = getattr(node, "lineno", line)
        if depth > MAX_NESTING:
            return line
        stack.extend((child, depth + 1, line) for child in ast.iter_child_nodes(node))
    return None


def check_source(
    source: str, variables: Iterable[str] | None = None, meanings: Mapping[str, str] | None = None
) -> list[Finding]:
    """Every static finding against ``source``; an empty list means it passed.

    :param source: the program text.
    :param variables: the names the env's description declares (``describe(env_id).variables``);
        ``None`` skips the check of the reward function's arguments.
    :param meanings: what each state variable means (the description's words), for
        suggesting the variable a wrong name stands for (``heading`` is ``torso_yaw``).
    """
    tree, findings = parse_source(source)
    if tree is None:
        return findings
    return check_tree(tree, variables, meanings)


def check_tree(
    tree: ast.Module, variables: Iterable[str] | None = None, meanings: Mapping[str, str] | None = None
) -> list[Finding]:
    """:func:`check_source`'s findings for a program :func:`parse_source` parsed already.

    :param tree: the parsed program.
    :param variables: see :func:`check_source`.
    :param meanings: see :func:`check_source`.
    """
    checker = _Checker(None if variables is None else tuple(variables), meanings or {})
    checker.check(tree)
    unique = {(finding.line, finding.message): finding for finding in checker.findings}
    return sorted(unique.values(), key=lambda finding: finding.line)


class _Checker:
    def __init__(self, variables: tuple[str, ...] | None, meanings: Mapping[str, str]):
        self.variables = variables
        self.meanings = meanings
        self.findings: list[Finding] = []

    def add(self, node: ast.AST | None, message: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), message))

    def check(self, tree: ast.Module) -> None:
        self.check_top_level(tree)
        defined = _bound_names(tree)
        for node in ast.walk(tree):
            self.check_node(node, defined)
        self.check_reward_function(tree)

    def check_top_level(self, tree: ast.Module) -> None:
        allowed = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Assign, ast.AnnAssign)
        for index, statement in enumerate(tree.body):
            is_docstring = (
                index == 0
                and isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            )
            if not isinstance(statement, allowed) and not is_docstring:
                self.add(
                    statement,
                    "top-level code may only import modules, define functions and assign "
                    "constants; move this statement into a function",
                )

    def check_node(self, node: ast.AST, defined: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            self.add(node, f"class `{node.name}`: reward programs may not define classes")
        elif isinstance(node, ast.AsyncFunctionDef | ast.Await | ast.AsyncFor | ast.AsyncWith):
            self.add(node, "async code is not allowed in reward programs")
        elif isinstance(node, ast.Global | ast.Nonlocal):
            self.add(node, f"`{type(node).__name__.lower()}` statements are not allowed; pass "
                           "values as arguments or return them")
        elif isinstance(node, ast.FunctionDef | ast.Lambda):
            self.check_function(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                reason = forbidden_module(alias.name)
                if reason:
                    self.add(node, reason)
        elif isinstance(node, ast.ImportFrom):
            self.check_import_from(node)
        elif isinstance(node, ast.Attribute):
            reason = forbidden_attribute(node.attr)
            if reason:
                self.add(node, f"attribute access `.{node.attr}`: {reason}")
            elif isinstance(node.ctx, ast.Store | ast.Del):
                self.add(
                    node,
                    f"assigning or deleting the attribute `.{node.attr}` is not allowed (it "
                    "could change torch or numpy for the whole run); use a local variable",
                )
        elif isinstance(node, ast.Name):
            self.check_name(node, defined)
        elif isinstance(node, ast.Call):
            self.check_call(node)

    def check_function(self, node: ast.FunctionDef | ast.Lambda) -> None:
        if isinstance(node, ast.FunctionDef):
            if node.decorator_list:
                self.add(
                    node.decorator_list[0],
                    f"decorators are not supported (on `{node.name}`), but for TorchScript's "
                    "and torch.no_grad, which are dropped; define it as a plain function",
                )
            if node.name.startswith("__"):
                self.add(node, f"function name `{node.name}`: names starting with '__' are not allowed")
        arguments = node.args
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            if argument.arg.startswith("__"):
                self.add(node, f"argument `{argument.arg}`: names starting with '__' are not allowed")

    def check_import_from(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add(node, "relative imports are not allowed; import math, numpy or torch")
            return
        module = node.module or ""
        reason = forbidden_module(module)
        if reason:
            self.add(node, reason)
            return
        for alias in node.names:
            if alias.name == "*":
                self.add(node, f"`from {module} import *` is not allowed; import the names you use")
                continue
            reason = forbidden_attribute(alias.name)
            if reason:
                self.add(node, f"`from {module} import {alias.name}`: {reason}")

    def check_name(self, node: ast.Name, defined: set[str]) -> None:
        name = node.id
        if name.startswith("__"):
            self.add(node, f"`{name}`: names starting with '__' are not allowed")
            return
        if not isinstance(node.ctx, ast.Load) or name in defined:
            return
        if name in SAFE_BUILTINS or name in PRELOADED_NAMES:
            return
        if name in _BUILTIN_REASONS:
            self.add(node, f"`{name}` {_BUILTIN_REASONS[name]}")
        elif hasattr(builtins, name):
            self.add(node, f"the builtin `{name}` is not available to reward programs")
        elif name in FORBIDDEN_ATTRIBUTES:
            self.add(node, f"`{name}` is not defined: {FORBIDDEN_ATTRIBUTES[name].format(name=name)}")
        elif self.variables is not None and name in self.variables:
            self.add(node, f"`{name}` is not defined: it is a variable of this environment, so take it as an "
                           "argument of the reward function")
        else:
            close = difflib.get_close_matches(name, [*defined, *PRELOADED_NAMES], n=1, cutoff=0.75)
            if not close and self.variables is not None:
                suggested = _suggestion(name, self.variables, self.meanings)
                if suggested:
                    self.add(node, f"`{name}` is not defined{suggested[:-1]} (a variable of this environment: "
                                   "take it as an argument of the reward function)?")
                    return
            hint = f"; did you mean `{close[0]}`?" if close else "; define it or use one of the function's arguments"
            self.add(node, f"`{name}` is not defined{hint}")

    def check_call(self, node: ast.Call) -> None:
        function = node.func
        if isinstance(function, ast.Name) and function.id in ("getattr", "hasattr"):
            if len(node.args) < 2 or not (
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            ):
                self.add(node, f"`{function.id}` needs a literal attribute name, e.g. "
                               f"{function.id}(x, \"shape\")")
            else:
                reason = forbidden_attribute(node.args[1].value)
                if reason:
                    self.add(node, f"`{function.id}(..., {node.args[1].value!r})`: {reason}")
        for keyword in node.keywords:
            if keyword.arg == "out":
                self.add(node, "`out=` writes into an existing tensor; use the returned value")

    def check_reward_function(self, tree: ast.Module) -> None:
        function = find_reward_function(tree)
        if function is None:
            names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
            if names:
                listed = ", ".join(f"`{name}`" for name in names)
                self.add(None, f"the program defines {listed} but none is named `{REWARD_FUNCTION}`; "
                               f"name the reward function `{REWARD_FUNCTION}`")
            else:
                self.add(None, f"the program defines no function; define `def {REWARD_FUNCTION}(...)` "
                               "returning (reward, components)")
            return
        arguments = function.args
        if arguments.vararg or arguments.kwarg:
            self.add(function, f"`{function.name}` may not take *args or **kwargs; name each "
                               "variable it uses as an argument")
        parameters = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        if not parameters:
            self.add(function, f"`{function.name}` takes no arguments, so it cannot return one "
                               "value per env; take the state variables it needs")
        positional = (*arguments.posonlyargs, *arguments.args)
        with_default = {a.arg for a in positional[len(positional) - len(arguments.defaults):]} if arguments.defaults else set()
        with_default |= {a.arg for a, value in zip(arguments.kwonlyargs, arguments.kw_defaults) if value is not None}
        if self.variables is not None:
            # an argument with a default that the env does not declare is a constant
            wrong = [name for name in parameters if name not in self.variables and name not in with_default]
            for name in wrong:
                self.add(function, f"argument `{name}` of `{function.name}` is not a variable of this "
                                   f"environment{_suggestion(name, self.variables, self.meanings)}"
                                   f"{_argument_hint(name)}")
            if wrong:  # the list once, however many arguments are wrong
                self.add(function, f"the variables of this environment are: {', '.join(self.variables)}")


# arguments of the signatures models copy from other frameworks (Text2Reward's methods,
# Gymnasium's observation arrays), and what to take instead
_ARGUMENT_HINTS = {
    "self": "the reward function is a plain function, not a method: drop `self`",
    "obs": "there is no observation array: take the state variables by name (and next_<name> for the state after the action)",
    "observation": "there is no observation array: take the state variables by name (and next_<name> for the state after the action)",
    "next_obs": "there is no observation array: take next_<name> for each state variable it needs",
    "state": "there is no state array: take the state variables by name",
    "info": "there is no info dict: take the variables it needs by name",
}


def _argument_hint(name: str) -> str:
    hint = _ARGUMENT_HINTS.get(name)
    return f" ({hint})" if hint else ""


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the program binds anywhere (a scope-free over-approximation)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


# words models use for what a description names otherwise (the description's meanings
# find most of the rest: "heading" is in torso_yaw's)
_SYNONYMS = {
    "position": ("x", "pos"), "pos": ("x", "position"), "height": ("z",), "heading": ("yaw",),
    "angle": ("theta",), "velocity": ("vel", "dot", "speed"), "vel": ("velocity", "dot"),
    "speed": ("velocity", "vel"), "done": ("terminated",), "dones": ("terminated",), "actions": ("action",),
    "theta": ("angle",), "x": ("position",),
}
_WORD = re.compile(r"[a-z0-9]+")


def _suggestion(name: str, variables: Sequence[str], meanings: Mapping[str, str]) -> str:
    """``"; did you mean `torso_yaw`?"`` for the variable a wrong ``name`` most likely stands
    for (a close spelling, else the words of its name and of the variables' meanings), or
    ``""`` when no one variable stands out.

    :param name: the wrong name.
    :param variables: the env's variables.
    :param meanings: what each state variable means.
    """
    # the state before and after stay apart: agent_position is not next_position
    same_step = [variable for variable in variables if variable.startswith("next_") == name.startswith("next_")]
    ratios = sorted(((difflib.SequenceMatcher(None, name, variable).ratio(), variable) for variable in same_step),
                    reverse=True)
    if ratios and ratios[0][0] >= 0.75:
        # a misspelling; two as close (velocity: x_velocity or y_velocity?) is no suggestion
        return f"; did you mean `{ratios[0][1]}`?" if len(ratios) == 1 or ratios[1][0] < ratios[0][0] else ""
    prefix = "next_" if name.startswith("next_") else ""
    wanted = name[len(prefix):].lower().split("_")
    scored = []
    for variable in variables:
        if (prefix and not variable.startswith(prefix)) or (not prefix and variable.startswith("next_")):
            continue
        base = variable[len(prefix):]
        own = set(base.lower().split("_"))
        described = set(_WORD.findall(meanings.get(base, "").lower()))
        # each word of the name must be found: in the variable's name (best), as a synonym
        # of another word of it (x_position: position is not x twice), or in what it means
        points = [2 * (word in own) or bool(own & (set(_SYNONYMS.get(word, ())) - set(wanted))) + (word in described)
                  for word in wanted]
        if all(points):
            scored.append((sum(points), -len(own - set(wanted)), variable))
    if not scored:
        return ""
    scored.sort(reverse=True)
    if len(scored) > 1 and scored[0][:2] == scored[1][:2]:
        return ""  # two stand out as much: naming one would be a guess
    return f"; did you mean `{scored[0][2]}`?"
