"""Descriptions of a user's env from a file (``--describe FILE``), and the env's source for prompts.

A description file (TOML, or JSON with the same keys) names what the observation holds, so
that reward programs get variables with meaning instead of ``obs_0 .. obs_k``::

    summary = "walk right along a corridor; the episode ends at the goal cell"
    success = "terminated"            # or "truncated", or a comparison on the last state:
                                      # "position >= 10", "terminated and goal_distance < 0.5"
    success_metric = "reaching the goal, then the return"        # optional
    partial_success = "position / 10"  # optional: how far a state is toward success, 0 to 1
    terminated_meaning = "the agent reached the goal cell"        # optional

    [action]
    meaning = "0 = step left, 1 = step right"

    [[state]]
    name = "position"                 # the name the reward function receives
    index = 0                         # a column of the observation, or "0:3" for a slice
    meaning = "the agent's cell, 0 at the start"
    units = "cells"
    low = 0
    high = 10

    [derived]                         # optional: quantities computed from the state variables
    steps_left = "10 - position"      # usable by reward programs, prompts and the success rule

An ``index`` counts the columns of the flat observation the learners see: a ``Dict``
observation is flattened in the sorted order of its keys (``{"pos": (2,), "vel": (2,),
"goal": (2,)}`` gives ``goal`` columns 0-1, ``pos`` 2-3, ``vel`` 4-5), each part's values in
row-major order and a ``Discrete`` part one-hot (see :mod:`rewardlab.envs.gymnasium_env`).

A derived variable and the success rule are arithmetic expressions over the variables
(``+ - * / // % **``, comparisons, ``and``/``or``/``not``, numbers, ``pi`` and the functions
``sqrt abs exp log sin cos tan tanh atan2 hypot minimum maximum``); anything else (an
attribute, a subscript, any other call) is refused when the file is read. A derived
variable may use the ones above it; the success rule may also use ``terminated`` and
``truncated``. ``partial_success`` is an expression of the same kind whose value (clipped to
[0, 1]) says how far a state is toward success: where the return is the success flag alone,
a search's early stopping compares it instead of the still-zero success rates.

An expression is total and cheap by construction: every value is a tensor, numbers float64
(``9**9**9`` is inf, ``1 // 0`` inf, never an error or a billion-digit integer), so one
costs a few hundred tensor operations over the batch at most, whatever numbers it holds; a
file derives at most :data:`MAX_DERIVED_VARIABLES` variables, each computed once per call,
and its expressions hold :data:`MAX_DESCRIPTION_EXPRESSION_CHARS` characters in all.

The file is data, never code: it crosses to the sandboxed workers as JSON
(:func:`description_data`), where :func:`description_from_data` rebuilds it.
"""

from __future__ import annotations

import ast
import inspect
import json
import keyword
import math
import operator
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from rewardlab.common.toml import tomllib
from rewardlab.envs.descriptions import (
    ActionVariable,
    EnvDescription,
    PartialRule,
    StateVariable,
    SuccessRule,
    column,
    describe,
    register_description,
    success_if_terminated,
    success_if_truncated,
)

__all__ = ["description_data", "description_from_data", "env_source", "load_description", "use_description"]

TOP_KEYS = {"summary", "success", "success_metric", "partial_success", "terminated_meaning", "action", "state",
            "derived", "class_name"}
STATE_KEYS = {"name", "index", "meaning", "units", "low", "high"}
ACTION_KEYS = {"meaning"}
#: the most characters of an env's source a prompt shows
MAX_SOURCE_CHARS = 6000
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "sqrt": torch.sqrt, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sin": torch.sin,
    "cos": torch.cos, "tan": torch.tan, "tanh": torch.tanh, "atan2": torch.atan2, "hypot": torch.hypot,
    "minimum": torch.minimum, "maximum": torch.maximum,
}  # fmt: skip
_TWO_ARGUMENTS = {"atan2", "hypot", "minimum", "maximum"}  # the other functions take one
#: the episode's ends, which a success rule may use beside the variables
_FLAGS = ("terminated", "truncated")
_CONSTANTS = {"pi": math.pi}
#: the longest expression a description file may hold
MAX_EXPRESSION_CHARS = 500
#: the most derived variables a description file may hold (each is computed at every step)
MAX_DERIVED_VARIABLES = 32
#: the most characters of all a description file's expressions together
MAX_DESCRIPTION_EXPRESSION_CHARS = 4000
#: the most state variables a description file may name (each is a line of every prompt)
MAX_STATE_VARIABLES = 512
#: the longest summary, meaning or units a description file may give
MAX_TEXT_CHARS = 2000
#: the most characters of a description file that are read
MAX_FILE_CHARS = 2**21
#: the largest column index, or action size, a description's data may hold
MAX_COLUMN = 2**20
#: the keys :func:`load_description` adds to a file's for the workers
DATA_KEYS = {"env_id", "action_dtype", "action_shape"}
#: the action dtypes a description's data may give (those of discrete and continuous spaces)
ACTION_DTYPES = {"int64", "float32"}
Expression = Callable[[Mapping[str, torch.Tensor]], torch.Tensor]


def compile_expression(text: Any, names: set[str] | Mapping[str, Any], where: str) -> tuple[Expression, list[str]]:
    """An arithmetic expression of a description file as a function of named tensors, never
    run by ``eval``: its syntax tree is checked against a small grammar and then walked.

    :param text: the expression, e.g. ``"sqrt((pos_x - goal_x)**2 + (pos_y - goal_y)**2)"``.
    :param names: the variables it may use.
    :param where: what it is, for the error (``"--describe f.toml: derived 'd'"``).
    :return: ``(evaluate, used)``: ``evaluate(values)`` takes ``name -> tensor`` for the names
        in ``used``, the variables the expression uses.
    :raises ValueError: not a string, too long, not valid, or using anything outside the
        grammar (names it does not know, attributes, subscripts, other calls), naming it.
    """
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"{where}: must be an expression of at most {MAX_EXPRESSION_CHARS} characters, got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise ValueError(f"{where}: {text!r} is not a valid expression ({error.msg})") from None
    used: list[str] = []

    def check(node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return
            if node.id not in names:
                raise ValueError(f"{where}: {text!r} uses {node.id!r}, which is not a variable; known: "
                                 f"{', '.join(sorted(names))}")
            if node.id not in used:
                used.append(node.id)
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            children: list[ast.AST] = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp) and type(node.op) in (*_UNARY, ast.Not):
            children = [node.operand]
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            children = [node.left, *node.comparators]
        elif isinstance(node, ast.BoolOp):
            children = list(node.values)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
              and not node.keywords):
            arity = 2 if node.func.id in _TWO_ARGUMENTS else 1
            if len(node.args) != arity:
                raise ValueError(f"{where}: {text!r} calls {node.func.id} with {len(node.args)} "
                                 f"arguments; it takes {arity}")
            children = list(node.args)
        else:
            raise ValueError(
                f"{where}: {text!r} holds {ast.unparse(node)!r}, which a description's expression may not: "
                "use numbers, variables, + - * / // % **, comparisons, and/or/not and the functions "
                f"{', '.join(sorted(_FUNCTIONS))}"
            )
        for child in children:
            check(child)

    check(tree)

    def evaluate(values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        device = next((value.device for value in values.values()), None)
        return _walk(tree, values, device)

    return evaluate, used


def _constant(value: float, device: torch.device | None) -> torch.Tensor:
    """A number of an expression as a float64 tensor: arithmetic on it is float arithmetic,
    whose cost does not grow with the numbers (``9**9**9`` is inf, not a billion-digit int)."""
    try:
        number = float(value)
    except OverflowError:  # an integer literal past float64's range
        number = math.inf
    return torch.tensor(number, dtype=torch.float64, device=device)


def _walk(node: ast.AST, values: Mapping[str, torch.Tensor], device: torch.device | None
          ) -> torch.Tensor:
    """The value of a checked expression's ``node``: every value is a tensor (numbers 0-d
    float64), so every operation costs a tensor operation over the batch at most."""
    if isinstance(node, ast.Constant):
        return _constant(node.value, device)
    if isinstance(node, ast.Name):
        return _constant(_CONSTANTS[node.id], device) if node.id in _CONSTANTS else values[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _walk(node.left, values, device), _walk(node.right, values, device)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        operand = _walk(node.operand, values, device)
        return ~operand.bool() if isinstance(node.op, ast.Not) else _UNARY[type(node.op)](operand)
    if isinstance(node, ast.Compare):
        result, left = None, _walk(node.left, values, device)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _walk(comparator, values, device)
            step = _COMPARE[type(op)](left, right).bool()
            result, left = step if result is None else result & step, right
        assert result is not None  # a comparison has at least one operator
        return result
    if isinstance(node, ast.BoolOp):
        parts = [_walk(value, values, device).bool() for value in node.values]
        combined = parts[0]
        for part in parts[1:]:
            combined = combined & part if isinstance(node.op, ast.And) else combined | part
        return combined
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # the only node check() lets by
    return _FUNCTIONS[node.func.id](*(_walk(argument, values, device) for argument in node.args))


def load_description(path: str | Path, env_id: str) -> tuple[EnvDescription, dict[str, Any]]:
    """Read a description file for ``env_id``, check it against the env's spaces.

    :param path: a ``.toml`` or ``.json`` file (format in the module docstring).
    :param env_id: the env it describes.
    :return: ``(description, data)``; ``data`` is the checked JSON form the workers rebuild
        it from (with the action's dtype and shape taken from the env).
    :raises ValueError: the file is missing or malformed, naming the key and what to write.
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as file:
            text = file.read(MAX_FILE_CHARS + 1)
    except OSError as error:
        raise ValueError(f"--describe {path}: cannot read it ({error.strerror})") from None
    except UnicodeDecodeError:
        raise ValueError(f"--describe {path}: cannot read it: it is not a UTF-8 text file") from None
    if len(text) > MAX_FILE_CHARS:
        raise ValueError(f"--describe {path}: it has more than {MAX_FILE_CHARS:,} characters; a "
                         "description names what an observation holds in far fewer")
    kind = "JSON" if path.suffix == ".json" else "TOML"
    try:
        raw = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"--describe {path}: not valid {kind} ({error})") from None
    except RecursionError:
        raise ValueError(f"--describe {path}: its {kind} nests tables or arrays too deeply") from None
    generic = describe(env_id)  # the spaces' view: the action, and how many columns there are
    from rewardlab.envs.registration import make

    env = make(env_id, num_envs=1)
    try:
        obs_shape = tuple(env.single_observation_space.shape)
    finally:
        env.close()
    data = _checked(raw, path, obs_shape)
    data["env_id"] = env_id
    data["action_dtype"] = generic.action.dtype
    data["action_shape"] = list(generic.action.shape)
    data.setdefault("action", {}).setdefault("meaning", generic.action.meaning)
    return description_from_data(data), data


def _checked(raw: Any, path: Path, obs_shape: tuple[int, ...]) -> dict[str, Any]:
    where = f"--describe {path}"
    _check_structure(raw, where, TOP_KEYS, obs_shape)
    variables = _variables(raw, where)[1]
    _success_rule(raw.get("success", "none"), variables, where)
    _partial_rule(raw.get("partial_success"), variables, where)
    return json.loads(json.dumps(raw))


def _check_structure(raw: Any, where: str, keys: set[str], obs_shape: tuple[int, ...] | None
                     ) -> None:
    """Check a description's keys, the kind and size of every value, and its names, wherever
    it comes from: a file (``keys``: :data:`TOP_KEYS`) or the data a reward file carries.

    :param obs_shape: the env's observation shape, to check the indexes against; ``None``
        where the env is not made (the data a reward file or a worker is given).
    :raises ValueError: naming the key, the value (escaped) and what to write.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: the file must hold a table of keys ({', '.join(sorted(TOP_KEYS))})")
    unknown = sorted(set(raw) - keys)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; known: {sorted(keys)}")
    if not isinstance(raw.get("summary"), str) or not raw["summary"].strip():
        raise ValueError(f'{where}: needs summary = "the task and how its episodes end"')
    for key in ("summary", "success_metric", "terminated_meaning"):
        _check_text(raw, key, where)
    states = raw.get("state")
    if not isinstance(states, list) or not states:
        raise ValueError(f"{where}: needs at least one [[state]] table with name, index and meaning")
    if len(states) > MAX_STATE_VARIABLES:
        raise ValueError(f"{where}: {len(states)} [[state]] tables; a description may name at most "
                         f"{MAX_STATE_VARIABLES} (use a slice, index = \"0:8\", for a vector)")
    columns = obs_shape[0] if obs_shape is not None and len(obs_shape) == 1 else None
    for number, state in enumerate(states, 1):
        if not isinstance(state, dict):
            raise ValueError(f"{where}: state {number} must be a table")
        unknown = sorted(set(state) - STATE_KEYS)
        if unknown:
            raise ValueError(f"{where}: state {number} has unknown keys {unknown}; known: {sorted(STATE_KEYS)}")
        for key in ("name", "meaning"):
            if not isinstance(state.get(key), str) or not state[key]:
                raise ValueError(f"{where}: state {number} needs {key} = \"...\"")
        _check_name(state["name"], f"state {number}'s name", where)
        _check_text(state, "meaning", f"{where}: state {state['name']!r}")
        _check_text(state, "units", f"{where}: state {state['name']!r}")
        for key in ("low", "high"):
            value = state.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise ValueError(f"{where}: state {state['name']!r} {key} must be a number, got "
                                 f"{value!r:.80}")
        index = state.get("index")
        if index is not None:
            start, stop = _index_range(index, f"{where}: state {state['name']!r}")
            if obs_shape is not None and columns is None:
                raise ValueError(f"{where}: state {state['name']!r} has an index, but the observation has "
                                 f"shape {obs_shape}; an index needs a flat observation")
            if not 0 <= start < stop <= (columns if columns is not None else MAX_COLUMN):
                raise ValueError(f"{where}: state {state['name']!r} index {index!r} is outside the "
                                 f"observation's {columns or MAX_COLUMN} columns")
    action = raw.get("action", {})
    if not isinstance(action, dict) or sorted(set(action) - ACTION_KEYS):
        raise ValueError(f'{where}: [action] takes only meaning = "..."')
    _check_text(action, "meaning", f"{where}: [action]")
    if raw.get("action_dtype", "int64") not in ACTION_DTYPES:
        raise ValueError(f"{where}: action_dtype must be one of {sorted(ACTION_DTYPES)}, got "
                         f"{raw['action_dtype']!r:.80}")
    shape = raw.get("action_shape", [])
    if not isinstance(shape, list) or len(shape) > 4 or not all(
            isinstance(size, int) and not isinstance(size, bool) and 0 < size <= MAX_COLUMN
            for size in shape):
        raise ValueError(f"{where}: action_shape must be a list of at most 4 sizes, got "
                         f"{shape!r:.80}")
    if "class_name" in raw:
        _check_name(raw["class_name"], "class_name", where)
    if not isinstance(raw.get("derived", {}), dict):
        raise ValueError(f'{where}: [derived] must be a table of name = "expression"')
    expressions = [*raw.get("derived", {}).values(), raw.get("success"), raw.get("partial_success")]
    total = sum(len(text) for text in expressions if isinstance(text, str))
    if total > MAX_DESCRIPTION_EXPRESSION_CHARS:
        raise ValueError(f"{where}: its expressions hold {total} characters in all, and at most "
                         f"{MAX_DESCRIPTION_EXPRESSION_CHARS} are allowed (each is computed at every "
                         "step)")


def _check_text(table: Mapping[str, Any], key: str, where: str) -> None:
    """Refuse ``table[key]`` (where present) unless it is text of at most :data:`MAX_TEXT_CHARS`."""
    value = table.get(key)
    if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT_CHARS):
        raise ValueError(f"{where}: {key} must be text of at most {MAX_TEXT_CHARS} characters, got "
                         f"{value!r:.80}")


def _check_name(name: Any, what: str, where: str) -> None:
    """Refuse a name that is not a Python identifier: a variable's name is a parameter of the
    reward function, and every name is shown in prompts, reports and errors.

    :raises ValueError: naming the value (escaped) and what to write instead.
    """
    # Python reads an identifier in its NFKC form (a full-width x is x): a name of another form
    # would be a parameter that receives some other variable's values
    if (not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name)
            or name.startswith("_") or unicodedata.normalize("NFKC", name) != name):
        raise ValueError(f"{where}: {what} {name!r} must be a Python identifier (letters, digits "
                         "and _ as Python reads them, not starting with a digit or _, not a keyword), "
                         "e.g. cart_position")
    if name in _CONSTANTS or name in _FLAGS:
        raise ValueError(f"{where}: {what} {name!r} is a name the expressions already give; pick "
                         "another")


def _index_range(index: Any, where: str) -> tuple[int, int]:
    if isinstance(index, int) and not isinstance(index, bool):
        return index, index + 1
    if isinstance(index, str) and re.fullmatch(r"\s*\d{1,9}\s*:\s*\d{1,9}\s*", index):
        start, stop = (int(part) for part in index.split(":"))
        return start, stop
    raise ValueError(f'{where}: index must be a column number (3) or a slice ("0:3"), got {index!r}')


def _slice_reader(start: int, stop: int) -> Any:
    def read(obs: torch.Tensor) -> torch.Tensor:
        return obs[:, start:stop]

    return read


class _Variables:
    """A description's variables on a batch of observations: the state columns read, the
    derived variables computed in the file's order, each at most once per call (a variable
    used by several others is not computed again for each of them).

    :param readers: the state variables' readers, name -> ``read(obs)``.
    """

    def __init__(self, readers: Mapping[str, Callable[[torch.Tensor], torch.Tensor]]):
        self.readers = dict(readers)
        #: derived name -> (evaluate, the names it uses), in the file's order
        self.derived: dict[str, tuple[Expression, list[str]]] = {}

    def names(self) -> list[str]:
        """Every variable's name, the state's then the derived ones."""
        return [*self.readers, *self.derived]

    def values(self, obs: torch.Tensor, names: Iterable[str]) -> dict[str, torch.Tensor]:
        """The values of ``names`` (and of what they are derived from) on ``obs``."""
        needed = set(names)
        for name in reversed(self.derived):  # a derived variable uses only the ones above it
            if name in needed:
                needed.update(self.derived[name][1])
        values = {name: read(obs) for name, read in self.readers.items() if name in needed}
        for name, (evaluate, used) in self.derived.items():
            if name in needed:
                inputs = {used_name: values[used_name] for used_name in used}
                values[name] = _per_row(evaluate(inputs), obs, torch.float32)
        return values

    def reader(self, name: str) -> Callable[[torch.Tensor], torch.Tensor]:
        """``read(obs)`` for the derived variable ``name``."""

        def read(obs: torch.Tensor) -> torch.Tensor:
            return self.values(obs, [name])[name]

        return read


def _success_rule(text: Any, variables: _Variables, where: str) -> SuccessRule | None:
    """The success rule ``text`` names, over the description's ``variables``.

    :raises ValueError: ``text`` is no rule, or uses a variable the file does not declare.
    """
    if text in ("none", None):
        return None
    if text == "terminated":
        return success_if_terminated
    if text == "truncated":
        return success_if_truncated
    hint = (f'{where}: success must be "terminated", "truncated", "none" or a comparison on the last '
            f'state such as "{variables.names()[0]} >= 1.0" (or "terminated and ...")')
    # compile_expression's errors quote the rule already
    evaluate, used = compile_expression(text, {*variables.names(), *_FLAGS}, hint)
    tree = ast.parse(text.strip(), mode="eval").body
    if not isinstance(tree, ast.Compare | ast.BoolOp) and not (
            isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not)) and text.strip() not in used:
        raise ValueError(f"{hint}, got {text!r}")

    def success(final_obs: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
        read = variables.values(final_obs, [name for name in used if name not in _FLAGS])
        values = {name: _first_column(value) for name, value in read.items()}
        flags = {"terminated": terminated, "truncated": truncated}
        values.update((name, flag) for name, flag in flags.items() if name in used)
        return _per_row(evaluate(values), final_obs, torch.bool)

    return success


def _partial_rule(text: Any, variables: _Variables, where: str) -> PartialRule | None:
    """The partial success ``text`` computes over the description's ``variables``, clipped to
    [0, 1] (NaN counts 0).

    :raises ValueError: ``text`` is no expression over the file's variables.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f'{where}: partial_success must be an expression such as "1 - distance / 5", got {text!r}')
    evaluate, used = compile_expression(text, set(variables.names()), f"{where}: partial_success")

    def partial(obs: torch.Tensor) -> torch.Tensor:
        values = {name: _first_column(value) for name, value in variables.values(obs, used).items()}
        fraction = _per_row(evaluate(values), obs, torch.float64)
        return torch.nan_to_num(fraction, nan=0.0).clamp(0.0, 1.0)

    return partial


def _per_row(result: torch.Tensor, obs: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An expression's value for each of the ``len(obs)`` rows, as ``dtype`` on the
    observations' device: a constant (an expression without variables) repeated."""
    result = result.to(device=obs.device, dtype=dtype)
    return result.expand(len(obs)).contiguous() if result.dim() == 0 else result


def _first_column(values: torch.Tensor) -> torch.Tensor:
    return values.reshape(len(values), -1)[:, 0]


def _variables(data: Mapping[str, Any], where: str) -> tuple[list[StateVariable], _Variables]:
    """A description's state variables (the file's, then the derived ones) and their values.

    :raises ValueError: an index or a derived expression is malformed, naming it.
    """
    states = []
    for number, state in enumerate(data["state"], 1):
        _check_name(state["name"], f"state {number}'s name", where)
        index = state.get("index")
        read: Any = None
        if index is not None:
            start, stop = _index_range(index, f"{where}: state {state['name']!r}")
            read = column(start) if stop == start + 1 else _slice_reader(start, stop)
        kwargs = {"read": read} if read is not None else {}
        states.append(StateVariable(
            state["name"], state["meaning"], units=state.get("units", ""),
            low=state.get("low"), high=state.get("high"), **kwargs,
        ))
    variables = _Variables({state.name: state.read for state in states})
    derived = data.get("derived") or {}
    if len(derived) > MAX_DERIVED_VARIABLES:
        raise ValueError(f"{where}: {len(derived)} derived variables; a description may derive at "
                         f"most {MAX_DERIVED_VARIABLES}")
    for name, expression in derived.items():
        _check_name(name, "derived variable", where)
        if name in variables.names():
            raise ValueError(f"{where}: derived variable {name!r} is already a variable; give it "
                             "a new name")
        variables.derived[name] = compile_expression(
            expression, set(variables.names()), f"{where}: derived {name!r}")
        states.append(StateVariable(name, f"derived: {expression}", read=variables.reader(name)))
    return states, variables


def description_from_data(data: Mapping[str, Any]) -> EnvDescription:
    """The description that :func:`load_description` checked, from its JSON data, checked
    again (it may come from a reward file's header).

    :raises ValueError: the data is not a description, naming the key and the value.
    """
    _check_structure(data, "the description", TOP_KEYS | DATA_KEYS, None)
    if not isinstance(data.get("env_id"), str):
        raise ValueError(f"the description: env_id must be an env id, got "
                         f"{data.get('env_id')!r:.80}")
    states, variables = _variables(data, "the description")
    success_text = data.get("success", "none")
    success = _success_rule(success_text, variables, "the description")
    metric = data.get("success_metric") or (
        f"the success rate ({success_text}), then the episode return" if success is not None
        else "the episode return (sum of the environment's own rewards)."
    )
    action = ActionVariable(data["action"]["meaning"], data.get("action_dtype", "int64"),
                            tuple(data.get("action_shape", ())))
    return EnvDescription(
        env_id=data["env_id"], summary=data["summary"].strip(), state=tuple(states), action=action,
        success_metric=metric, success=success, class_name=data.get("class_name", ""),
        partial_success=_partial_rule(data.get("partial_success"), variables, "the description"),
        terminated_meaning=data.get("terminated_meaning", "the episode reached a terminal state with this step"),
    )


_DATA: dict[str, dict[str, Any]] = {}


def use_description(data: Mapping[str, Any]) -> EnvDescription:
    """Register the description in ``data`` (from :func:`load_description`) for its env.

    :func:`describe` then returns it, here and, through :func:`description_data`, in the
    sandboxed workers that are given its data.
    """
    description = description_from_data(data)
    register_description(description, overwrite=True)
    _DATA[description.env_id] = dict(data)
    return description


def description_data(env_id: str) -> dict[str, Any] | None:
    """The data of the file description in use for ``env_id``; ``None`` for built-in and generic ones."""
    return _DATA.get(env_id)


def env_source(env_id: str, limit: int = MAX_SOURCE_CHARS) -> str:
    """The source of a Gymnasium env's class (its ``step`` and reward code), as Eureka shows it.

    :param env_id: a Gymnasium id (or ``"module:Env-v0"``).
    :param limit: the most characters; a longer class keeps its ``step`` method and as many
        of the others as fit.
    :return: the source, ``""`` when it cannot be read (a compiled env, or a batched one of ours).
    """
    from rewardlab.envs.gymnasium_env import make_one

    try:
        env = make_one(env_id)
    except Exception:
        return ""
    try:
        cls = type(env.unwrapped)
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return ""
    finally:
        env.close()
    if len(source) <= limit:
        return source
    step = getattr(cls, "step", None)
    try:
        step_source = inspect.getsource(step) if step is not None else ""
    except (OSError, TypeError):
        step_source = ""
    head = source[: max(0, limit - len(step_source) - 40)]
    return f"{head}\n    # ... (cut)\n{step_source}"[:limit]

