"""The package as installed: one `rewardlab` namespace, every folder mapped, layers one way.

These tests look at the distribution, not at the checkout: a build into a temporary
folder (what ``pip install .`` copies) and fresh interpreters started outside the
repository, so that nothing on the checkout's path can stand in for the package.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewardlab.common.toml import tomllib

REPOSITORY = Path(__file__).resolve().parents[1]
BARE_NAMES = ("agents", "envs", "intrinsic", "llm_reward", "shaping")


def pyproject() -> dict:
    return tomllib.loads((REPOSITORY / "pyproject.toml").read_text())


def test_every_code_folder_is_a_listed_package() -> None:
    setuptools = pyproject()["tool"]["setuptools"]
    mapping = setuptools["package-dir"]
    listed = set(setuptools["packages"])
    found = set()
    for name, folder in mapping.items():
        for init in (REPOSITORY / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPOSITORY / folder)
            found.add(".".join([name, *relative.parts]))
    # subpackages of rewardlab/ that another mapping owns are found under that mapping
    assert found == listed, f"packages in pyproject.toml differ from the folders: {sorted(found ^ listed)}"
    for folder in mapping.values():
        stray = [
            path for path in (REPOSITORY / folder).rglob("*.py")
            if not (path.parent / "__init__.py").exists()
        ]  # fmt: skip
        assert not stray, f"Python files outside any package would not be installed: {stray}"


def _run_outside(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("name", BARE_NAMES)
def test_no_bare_name_is_installed(name: str, tmp_path: Path) -> None:
    # another project may own the name (the OpenAI Agents SDK installs `agents`): what
    # `import name` finds must never be ours, a folder of this repository (an editable
    # install) or a file rewardlab's distribution installed
    code = (
        f"import importlib.metadata, importlib.util, pathlib; spec = importlib.util.find_spec({name!r}); "
        "found = None if spec is None else pathlib.Path(spec.origin or next(iter(spec.submodule_search_locations))); "
        "ours = {pathlib.Path(f.locate()).resolve() for f in importlib.metadata.files('rewardlab') or []}; "
        "print('' if found is None else found.resolve()); print(found is not None and found.resolve() in ours)"
    )
    result = _run_outside(code, tmp_path)
    assert result.returncode == 0, result.stderr
    found, installed_by_us = result.stdout.split("\n")[:2]
    assert installed_by_us == "False", f"`import {name}` finds {found}, which rewardlab installed: a bare name leaks"
    assert not found or not Path(found).is_relative_to(REPOSITORY), (
        f"`import {name}` finds {found}: the install leaks a bare name"
    )


def test_rewardlab_imports_from_anywhere_and_has_a_version(tmp_path: Path) -> None:
    code = (
        "import rewardlab, sys; from rewardlab import envs, shaping, intrinsic, agents, llm_reward; "
        "import rewardlab.app.cli; "
        "print(rewardlab.__version__); print(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{BARE_NAMES!r}))"
    )
    result = _run_outside(code, tmp_path)
    assert result.returncode == 0, result.stderr
    version, bare = result.stdout.split("\n")[:2]
    assert version and version != "0+unknown"
    assert bare == "[]", f"modules imported under bare names: {bare}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rewardlab as ``pip install .`` lays it out, in a folder of its own."""
    target = tmp_path_factory.mktemp("built")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(REPOSITORY)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return target


def test_the_built_package_holds_only_rewardlab(built: Path) -> None:
    top = {path.name for path in built.iterdir() if not path.name.endswith(".dist-info")} - {"bin"}
    assert top == {"rewardlab"}, f"the distribution installs {sorted(top)}"
    for sub in ("app", "agents", "envs", "intrinsic", "llm_reward", "shaping"):
        assert (built / "rewardlab" / sub / "__init__.py").exists(), sub


LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is in the dev extra")
def test_layers_are_kept(tmp_path: Path) -> None:
    # .ci/imports, as a developer runs it: import-linter reads the package from disk, so it
    # reads one installed into a folder of its own (an editable install maps the folders at
    # import time, which it cannot see)
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        [str(REPOSITORY / ".ci" / "imports")], capture_output=True, text=True, cwd=tmp_path, env=environment,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and " 0 broken" in result.stdout, result.stdout


# The strongly connected components of a package's import graph (grimp, which import-linter
# uses; the package named on the command line), printed as JSON. There must be none: no module
# imports one that imports it back, directly or through others (imports inside functions and
# under TYPE_CHECKING count: they are dependencies a reader follows all the same).
CIRCLES = """
import json, sys
import grimp

graph = grimp.build_graph(sys.argv[1], exclude_type_checking_imports=False, cache_dir=None)
imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
index, low, stack, on_stack, circles = {}, {}, [], set(), []


def visit(module):  # Tarjan's algorithm
    index[module] = low[module] = len(index)
    stack.append(module)
    on_stack.add(module)
    for imported in imports[module]:
        if imported not in index:
            visit(imported)
            low[module] = min(low[module], low[imported])
        elif imported in on_stack:
            low[module] = min(low[module], index[imported])
    if low[module] == index[module]:
        circle = []
        while not circle or circle[-1] != module:
            circle.append(stack.pop())
            on_stack.discard(circle[-1])
        if len(circle) > 1 or module in imports[module]:
            circles.append(sorted(circle))


sys.setrecursionlimit(10_000)
for module in imports:
    if module not in index:
        visit(module)
print(json.dumps({"modules": len(imports), "circles": circles}))
"""


def _circles(package: str, where: Path) -> dict:
    import json

    result = subprocess.run(
        [sys.executable, "-c", CIRCLES, package], capture_output=True, text=True, cwd=where,
        timeout=300, env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(where)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="grimp comes with import-linter, in the dev extra")
def test_no_import_circles(built: Path) -> None:
    # run in the built package, where every folder is mapped
    found = _circles("rewardlab", built)
    assert found["modules"] > 50  # the whole package was read, not a stand-in
    assert not found["circles"], f"import circles (a module imports one that imports it back): {found['circles']}"


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="grimp comes with import-linter, in the dev extra")
def test_no_import_circles_among_the_benchmarks() -> None:
    # the benchmark scripts are not installed: read from the checkout
    found = _circles("benchmarks", REPOSITORY)
    assert found["modules"] > 20
    assert not found["circles"], (
        f"import circles among the benchmarks (one imports a script that imports it back): "
        f"{found['circles']}: move what both need into the lower of the two"
    )
