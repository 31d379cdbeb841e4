"""TOML reading on Python 3.10 too: ``tomllib`` from 3.11, its backport ``tomli`` before."""

from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path

import rewardlab.common.toml as toml_module
from rewardlab.common.toml import tomllib

REPOSITORY = Path(__file__).resolve().parents[2]


def test_before_python_3_11_the_backport_is_used(monkeypatch) -> None:
    backport = types.ModuleType("tomli")
    monkeypatch.setitem(sys.modules, "tomli", backport)
    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    try:
        assert importlib.reload(toml_module).tomllib is backport
    finally:
        monkeypatch.undo()
        importlib.reload(toml_module)
    assert toml_module.tomllib.loads("steps = 3") == {"steps": 3}


def test_tomllib_is_imported_in_one_place_and_tomli_is_a_dependency_before_3_11() -> None:
    direct = re.compile(r"^\s*(import tomllib|from tomllib import)", re.MULTILINE)
    # every folder of the package (pyproject's package-dir), benchmarks and tests
    offenders = [
        str(path.relative_to(REPOSITORY))
        for folder in ("rewardlab", "envs", "shaping", "intrinsic", "agents", "llm_reward", "benchmarks", "tests")
        for path in (REPOSITORY / folder).rglob("*.py")
        if direct.search(path.read_text()) and path != REPOSITORY / "rewardlab" / "common" / "toml.py"
    ]
    assert offenders == [], "import tomllib from rewardlab.common.toml (Python 3.10 has none)"
    dependencies = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(re.fullmatch(r"tomli\b.*;\s*python_version\s*<\s*'3\.11'", line) for line in dependencies)
