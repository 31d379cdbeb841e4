"""Benchmark results speak of the project alone: no machine's paths in them."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from benchmarks.machine import recorded_args

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
#: the start of an absolute path on some machine (a home, a temporary or working folder)
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:root|home|tmp|work|usr|opt|Users|var)/")


def test_no_results_file_names_a_machine_path() -> None:
    files = sorted(p for p in RESULTS.iterdir() if p.suffix in (".md", ".json"))
    assert files, f"no results in {RESULTS}"
    found = {p.name: MACHINE_PATH.findall(p.read_text()) for p in files}
    assert not {name: hits for name, hits in found.items() if hits}


def test_recorded_arguments_keep_repository_paths_relative_and_others_by_name() -> None:
    root = RESULTS.parent.parent
    args = argparse.Namespace(python=sys.executable, out=str(root / "benchmarks" / "results" / "x"),
                              cache="/var/cache/somewhere/rewardlab", seeds=3, name="run")
    recorded = recorded_args(args)
    assert recorded["out"] == "benchmarks/results/x"
    assert recorded["cache"] == "rewardlab"
    assert not recorded["python"].startswith("/")
    assert recorded["seeds"] == 3 and recorded["name"] == "run"
