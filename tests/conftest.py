"""Test set-up: rewardlab is imported as installed; the benchmark scripts are loaded by path.

No folder of the checkout is put on ``sys.path`` (``--import-mode=importlib`` in
pyproject.toml), so a bare ``import agents`` or ``import envs`` cannot succeed by
accident here and hide a packaging mistake. ``benchmarks/`` is not part of the
distribution; tests that check a benchmark import it as the package ``benchmarks``,
registered below from its folder.

Compiled graphs (``compile=True``) go to a cache folder of this test session, never to
the user's own cache (``REWARDLAB_CACHE``), and run as traced (``aot_eager``: the graph
itself, uncompiled): a test of a compiled path checks the graph that Inductor would compile,
in a fraction of a second where Inductor takes tens (minutes on a new machine, for every
graph). Tests marked ``inductor`` compile with Inductor for real: at least one for each
kind of graph (PPO's discrete and Gaussian steps, the batched envs' steps, the cache).
``REWARDLAB_COMPILE_BACKEND=inductor pytest`` compiles every test's graphs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]


def _register_benchmarks() -> None:
    if "benchmarks" in sys.modules:
        return
    folder = REPOSITORY / "benchmarks"
    spec = importlib.util.spec_from_file_location(
        "benchmarks", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmarks"] = module
    spec.loader.exec_module(module)


_register_benchmarks()
os.environ["REWARDLAB_CACHE"] = tempfile.mkdtemp(prefix="rewardlab-test-cache-")
os.environ.setdefault("REWARDLAB_COMPILE_BACKEND", "aot_eager")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "inductor: compiles its graphs with Inductor, whatever the session's backend")


@pytest.fixture(autouse=True)
def _backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked ``inductor`` compiles for real; the others run their graphs as traced."""
    if request.node.get_closest_marker("inductor"):
        monkeypatch.setenv("REWARDLAB_COMPILE_BACKEND", "inductor")


@pytest.fixture(autouse=True)
def _notes_said_anew() -> None:
    """Each test sees the once-per-process notes (the MiniGrid mission, an unbatched task)
    as a new process would, whichever test made the same env before it."""
    from rewardlab.envs import minigrid

    minigrid._SAID.clear()


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """A module that asks for it (``pytest.mark.usefixtures("one_thread")``) runs at one torch
    thread, the caller's count restored after: small networks run fastest on one thread, and
    the suite shares two cores."""
    from rewardlab.common.threads import torch_threads

    with torch_threads(1):
        yield
