"""Reward code as LLMs write it, made plain before it is checked and run.

Models copy the signatures they were shown (``x: Tensor``, ``-> Tuple[torch.Tensor,
Dict[str, torch.Tensor]]``), import ``typing`` and ``__future__`` for them, and put
Eureka's ``@torch.jit.script`` on the function. None of it changes what the code
computes, so before the static checks :func:`normalize_source` removes, in place:

- annotations of parameters, returns and annotated assignments (``r: Tensor = a`` becomes
  ``r = a``);
- imports of ``__future__``, ``typing`` and ``typing_extensions``;
- TorchScript and gradient-mode decorators (``@torch.jit.script``, ``@torch.jit.ignore``,
  ``@torch.no_grad()``, ...): rewardlab runs plain Python under ``torch.no_grad()``;
- a top-level ``if __name__ == "__main__":`` block (example code; rewardlab never runs it);
- and it makes a one-line ``compute_reward = lambda ...: ...`` a ``def``.

Each edit keeps the line structure (removed text becomes spaces or an empty line), so
every line number a finding or a traceback names is the line the model wrote; each
removal is listed in the program's notes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from rewardlab.llm_reward.programs.checks import parse_source

__all__ = ["Normalized", "normalize_source"]

_DROPPED_MODULES = ("__future__", "typing", "typing_extensions")
_ANNOTATIONS_NOTE = "removed the type annotations (rewardlab does not evaluate them)"
_DROPPED_DECORATORS = (
    "torch.jit.script", "torch.jit.ignore", "torch.jit.unused", "torch.jit.export",
    "torch.jit.script_if_tracing", "torch.no_grad", "torch.inference_mode", "torch.compile",
    "staticmethod", "jit.script",
)


@dataclass(frozen=True)
class Normalized:
    """A program's source after :func:`normalize_source`, and what was removed.

    :param source: the source to check and run (same lines as the original).
    :param notes: one sentence per kind of removal, for the report.
    """

    source: str
    notes: tuple[str, ...]


def normalize_source(source: str) -> Normalized:
    """Remove annotations, typing imports and TorchScript decorators, keeping every line.

    A source that does not parse, or that the checks refuse before looking at its code
    (too long, too deeply nested, holding control characters), is returned unchanged: the
    checks report why.

    :param source: the program as found in the answer.
    """
    tree, findings = parse_source(source)
    if tree is None:
        return Normalized(source, ())
    text = source.encode()
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column

    edits: list[tuple[int, int, str]] = []
    notes: dict[str, None] = {}
    function_bodies = {id(s) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for s in node.body}

    def remove_statement(node: ast.stmt) -> None:
        start, end = offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)
        edits.append((start, end, "pass" if id(node) in function_bodies else ""))

    # example code under `if __name__ == "__main__":` (models add it to show a call): never
    # run by rewardlab, so removed whole, and nothing inside it is edited on its own
    examples = [node for node in tree.body if isinstance(node, ast.If) and _is_main_check(node.test)]
    inside = {id(child) for node in examples for child in ast.walk(node)}
    for node in examples:
        remove_statement(node)
        notes['removed the `if __name__ == "__main__":` block (example code: rewardlab calls the function '
              "itself)"] = None
    for node in tree.body:
        lambda_head = _lambda_head(node, text, offset)
        if lambda_head is not None:
            start, end, replacement = lambda_head
            edits.append((start, end, replacement))
            notes[f"made the lambda `{replacement.split('(')[0][4:]}` a def (tracebacks name its line)"] = None
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.arg) and node.annotation is not None:
            name_end = offset(node.lineno, node.col_offset) + len(node.arg.encode())
            edits.append((name_end, offset(node.end_lineno, node.end_col_offset), ""))
            notes[_ANNOTATIONS_NOTE] = None
        elif isinstance(node, ast.FunctionDef):
            if node.returns is not None:
                returns_start = offset(node.returns.lineno, node.returns.col_offset)
                arrow = text.rfind(b"->", 0, returns_start)
                edits.append((arrow, offset(node.returns.end_lineno, node.returns.end_col_offset), ""))
                notes[_ANNOTATIONS_NOTE] = None
            for decorator in node.decorator_list:
                name = ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
                if name in _DROPPED_DECORATORS:
                    at = text.rfind(b"@", 0, offset(decorator.lineno, decorator.col_offset))
                    edits.append((at, offset(decorator.end_lineno, decorator.end_col_offset), ""))
                    notes[f"removed the decorator `@{name}` from `{node.name}`: rewardlab runs the "
                          "function as plain Python, under torch.no_grad()"] = None
        elif isinstance(node, ast.AnnAssign):
            if node.value is None:
                remove_statement(node)
            else:
                target_end = offset(node.target.end_lineno, node.target.end_col_offset)
                edits.append((target_end, offset(node.value.lineno, node.value.col_offset), " = "))
            notes[_ANNOTATIONS_NOTE] = None
        elif isinstance(node, ast.Import) and all(
            alias.name.split(".")[0] in _DROPPED_MODULES for alias in node.names
        ):
            remove_statement(node)
            notes[f"removed `import {', '.join(alias.name for alias in node.names)}` (only "
                  "annotations need it)"] = None
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _DROPPED_MODULES and not node.level:
            remove_statement(node)
            notes[f"removed `from {node.module} import ...` (only annotations need it)"] = None
    if not edits:
        return Normalized(source, ())
    out = bytearray(text)
    for start, end, replacement in sorted(edits, reverse=True):
        removed = bytes(out[start:end])
        # keep every line: a removed span keeps its newlines
        out[start:end] = replacement.encode() + b"\n" * removed.count(b"\n")
    normalized = out.decode()
    try:
        ast.parse(normalized)
    except SyntaxError:
        return Normalized(source, ())  # an edit we did not foresee: check the original instead
    return Normalized(normalized, tuple(notes))


def _is_main_check(test: ast.expr) -> bool:
    """Whether ``test`` is ``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {ast.unparse(test.left), ast.unparse(test.comparators[0])}
    return sides == {"__name__", "'__main__'"}


def _lambda_head(node: ast.stmt, text: bytes, offset: Any) -> tuple[int, int, str] | None:
    """For ``name = lambda args: body`` on one line, the edit that makes its head
    ``def name(args): return``; None for any other statement."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Lambda) and node.lineno == node.value.body.lineno):
        return None
    start = offset(node.lineno, node.col_offset)
    body = offset(node.value.body.lineno, node.value.body.col_offset)
    lambda_start = offset(node.value.lineno, node.value.col_offset) + len(b"lambda")
    colon = text.rfind(b":", lambda_start, body)
    if colon < 0:
        return None
    arguments = text[lambda_start:colon].decode().strip()
    return start, body, f"def {node.targets[0].id}({arguments}): return "
