"""What a reward program returns, checked: one finite float per env for the reward and each
component, and where in the program those values were computed, for messages that quote
its lines."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rewardlab.llm_reward.programs.errors import ProgramError

__all__ = ["MAX_MAGNITUDE", "Sites", "check_output", "program_sites", "split_result"]

#: the largest reward or component magnitude a program may return
MAX_MAGNITUDE = 1e15


def check_output(
    value: Any, what: str, num_envs: int, device: torch.device, line: str = ""
) -> torch.Tensor:
    """``value`` as a float32 ``(num_envs,)`` tensor on ``device``, or a :class:`ProgramError`
    whose message names the return line, what is wrong in the program's terms and the fix.

    For a batch of one env, a number (Python or numpy, a bool, a 0-d tensor or array) is
    that env's value, as code written for one state returns it (per-state mode takes the
    same); a batch of several needs one value per env."""
    zero_dimensional = isinstance(value, torch.Tensor | np.ndarray) and value.ndim == 0
    if num_envs == 1 and (is_number(value) or zero_dimensional):
        value = torch.tensor([float(value)])
    numbers = isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.number)
    if numbers and value.shape == (num_envs,):
        value = torch.as_tensor(value, dtype=torch.float32)  # numpy on the whole batch is fine
    if is_scalar(value):
        raise ProgramError(
            f"{line}{what} is one number ({type(value).__name__}) for the whole batch of "
            f"{num_envs} envs: something reduced the batch to a scalar (a numpy or Python call "
            "such as np.mean, float(), sum(), max() on an input), or the program returns a "
            "constant; keep one value per env with torch ops (torch.maximum, torch.where, "
            ".clamp) and a constant as torch.full_like(x, c)"
        )
    if not isinstance(value, torch.Tensor):
        raise ProgramError(
            f"{line}{what} is a {type(value).__name__}; it must be a torch tensor of shape "
            f"({num_envs},) (one value per env)"
        )
    if value.dim() == 0 and num_envs > 1:
        raise ProgramError(
            f"{line}{what} is a single value for the whole batch of {num_envs} envs: a "
            "reduction over the batch (`.sum()`, `.mean()`, `torch.sum(...)`, `.max()` without "
            "`dim`) collapsed it; every input is already one value per env, so drop the reduction"
        )
    if tuple(value.shape) != (num_envs,):
        raise ProgramError(
            f"{line}{what} has shape {tuple(value.shape)}; it must have shape ({num_envs},), "
            f"one value per env: {REDUCE_LAST}"
        )
    if not value.dtype.is_floating_point:
        raise ProgramError(
            f"{line}{what} has dtype {value.dtype}; it must be a float tensor (use .float())"
        )
    return value.detach().to(device=device, dtype=torch.float32)


#: the advice for a value of the wrong shape, unless the program stacked its inputs on dim 0
REDUCE_LAST = ("every input is already (N,) (or (N, k) for vector actions), so reduce only "
               "over the last dimension (`dim=-1`) or `.squeeze(-1)` a trailing 1")
_STACKERS = {"stack", "vstack", "row_stack", "array", "asarray", "tensor", "as_tensor"}
_ALWAYS_FIRST = {"vstack", "row_stack", "array", "asarray", "tensor", "as_tensor"}
COMPONENT_IN_REASON = re.compile(r"component ('(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")")


@dataclass(frozen=True)
class Sites:
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


def program_sites(source: str, function_name: str) -> Sites:
    """The :class:`Sites` of the reward function ``function_name`` of ``source``."""
    tree = ast.parse(source)
    function = next((node for node in tree.body
                     if isinstance(node, ast.FunctionDef) and node.name == function_name), None)
    if function is None:
        return Sites(tuple(source.splitlines()))
    nodes = list(ast.walk(function))
    returns = [node for node in nodes if isinstance(node, ast.Return)]
    if not returns:
        return Sites(tuple(source.splitlines()))
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
        lines = (assigned[name][-1] for name in dict.fromkeys(read) if name in assigned)
        return (*lines, last.lineno)

    value = last.value
    reward, components = value, {}
    if isinstance(value, ast.Tuple) and len(value.elts) == 2:
        reward = value.elts[0]
        returned = value.elts[1]
        if isinstance(returned, ast.Dict):
            components = {key.value: computing(item)
                          for key, item in zip(returned.keys, returned.values)
                          if isinstance(key, ast.Constant) and isinstance(key.value, str)}
    stacks_first = next((node.lineno for node in nodes if _stacks_first(node)), 0)
    lines = tuple(source.splitlines())
    return Sites(lines, last.lineno, computing(reward), components, stacks_first)


def _stacks_first(node: ast.AST) -> bool:
    """Whether ``node`` stacks two or more values on dim 0: ``torch.stack([a, b])``,
    ``np.stack((a, b), axis=0)``, ``np.array([a, b])``."""
    if not (isinstance(node, ast.Call) and node.args
            and isinstance(node.args[0], ast.List | ast.Tuple) and len(node.args[0].elts) >= 2):
        return False
    function = node.func
    name = (function.attr if isinstance(function, ast.Attribute)
            else function.id if isinstance(function, ast.Name) else "")
    if name not in _STACKERS:
        return False
    if name in _ALWAYS_FIRST:
        return True
    given = [keyword.value for keyword in node.keywords if keyword.arg in ("dim", "axis")]
    given += node.args[1:2]
    return not given or (isinstance(given[0], ast.Constant) and given[0].value == 0)


def split_result(result: Any) -> tuple[Any, Any]:
    """``(reward, components)`` of what a program returned; ``(result, None)`` for a bare reward."""
    if isinstance(result, tuple) and len(result) == 2:
        return result[0], result[1]
    return result, None


def is_scalar(reward: Any) -> bool:
    # a Python or numpy number for a batch: code written for one state (a 0-d tensor is a
    # reduced batch instead, a bug that check_output reports)
    return is_number(reward) and not isinstance(reward, bool)


def is_number(value: Any) -> bool:
    """A Python or numpy number or bool (what code written for one state returns)."""
    return isinstance(value, bool | int | float | np.generic)


def as_float(value: Any, what: str) -> float:
    size = value.numel() if isinstance(value, torch.Tensor) else getattr(value, "size", None)
    if isinstance(value, torch.Tensor | np.ndarray) and size == 1:
        return float(value.reshape(()))
    if isinstance(value, float | int | np.generic):  # True/False count as 1/0
        return float(value)
    raise ProgramError(f"{what} is a {type(value).__name__}; for one env it must be one number")
