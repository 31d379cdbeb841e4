"""TOML on every Python rewardlab supports: ``tomllib`` from 3.11, its backport ``tomli`` before.

``from rewardlab.common.toml import tomllib`` and use it as the standard library's; the
``tomli`` dependency is declared for Python < 3.11 in ``pyproject.toml``.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

__all__ = ["tomllib"]
