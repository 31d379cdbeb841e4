"""The namespace a reward program runs in: the builtins it gets, with ``getattr``,
``hasattr`` and ``__import__`` that refuse what the static checks refuse, whatever got past
them."""

from __future__ import annotations

import builtins
import dis
import sys
from collections.abc import Mapping
from typing import Any

from rewardlab.llm_reward.programs.checks import (
    ALLOWED_MODULES,
    PROGRAM_FILENAME,
    SAFE_BUILTINS,
    forbidden_attribute,
    forbidden_module,
)

__all__ = ["restricted_builtins"]

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
    own_code = code.co_filename == PROGRAM_FILENAME
    statement = own_code and code.co_code[caller.f_lasti] == _IMPORT_NAME
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
    """The builtins a reward program's namespace gets:
    :data:`~rewardlab.llm_reward.programs.checks.SAFE_BUILTINS`.

    ``getattr``/``hasattr`` refuse private and forbidden names and ``__import__`` only
    imports math, numpy and torch, whatever got past the static checks.
    """
    namespace = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    namespace.update(getattr=_safe_getattr, hasattr=_safe_hasattr, __import__=_safe_import)
    return namespace
