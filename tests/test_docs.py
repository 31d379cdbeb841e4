"""The documentation site: it builds in strict mode, its API reference lists every public
name, its benchmark tables come from the result files, and its examples work as written.

The build needs the ``docs`` extra (``pip install -e ".[docs]"``); without it those tests
are skipped and say so (CI installs it and runs ``.ci/docs`` as well).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rewardlab.app.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGES = ("shaping", "intrinsic", "agents", "envs", "llm_reward")


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _blocks(language: str) -> list[tuple[str, str]]:
    return [(str(page.relative_to(ROOT)), block) for page in _pages()
            for block in re.findall(rf"^```{language}\n(.*?)^```", page.read_text(), re.M | re.S)]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for name in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(name.split(".")[0]) is None or importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed: the docs extra is needed (pip install -e \".[docs]\")")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def test_the_site_builds_strictly_and_its_api_reference_lists_every_public_name(site: Path) -> None:
    for package in PACKAGES:
        page = (site / "api" / package / "index.html").read_text()
        anchors = set(re.findall(r'id="(rewardlab\.[\w.]+)"', page))
        names = importlib.import_module(f"rewardlab.{package}").__all__
        missing = [name for name in names
                   if not any(anchor == f"rewardlab.{package}.{name}" or anchor.endswith(f".{name}")
                              for anchor in anchors)]
        assert not missing, f"the API page of rewardlab.{package} lacks {missing}"


def test_benchmark_tables_are_read_from_the_result_files(site: Path) -> None:
    page = (site / "benchmarks" / "index.html").read_text()
    shown = re.findall(r"^<!-- results: ([\w.-]+) -->$", (DOCS / "benchmarks.md").read_text(), re.M)
    assert len(shown) >= 10
    for name in shown:
        first_row = next(line for line in (ROOT / "benchmarks" / "results" / f"{name}.md").read_text().splitlines()
                         if line.startswith("|") and not line.startswith("|---"))
        first_cell = first_row.strip("|").split("|")[0].strip().replace("`", "")
        assert first_cell.split()[0] in page, (name, first_cell)
        assert f'href="../results/{name}/"' in page or f'href="../results/{name}.md"' in page, name


def test_a_result_marker_becomes_its_tables_with_the_machine_and_provenance() -> None:
    hooks = _load(DOCS / "site_hooks.py")
    text = hooks.result_tables("sandbox_overhead", "results/sandbox_overhead.md")
    table = [line for line in text.splitlines() if line.startswith("|")]
    source = [line for line in (ROOT / "benchmarks/results/sandbox_overhead.md").read_text().splitlines()
              if line.startswith("|")]
    assert table == source
    assert "[`sandbox_overhead.md`](results/sandbox_overhead.md)" in text and "Machine:" in text
    assert hooks.measured({"machine": {"commit": "abc1234", "date": "2026-12-03"}}) == (
        "measured at commit `abc1234` on 2026-12-03")
    assert hooks.measured({"machine": {}, "provenance": {"commit": None, "note": "committed in abc1234"}}) == (
        "committed in abc1234")
    assert "no commit" in hooks.measured({"machine": {"summary": "a machine"}})
    with pytest.raises(FileNotFoundError, match="no_such_result.md"):
        hooks.result_tables("no_such_result", "x")


def test_docstring_code_is_fenced_for_markdown() -> None:
    pytest.importorskip("griffe", reason="the docs extra is needed (pip install -e \".[docs]\")")
    fence_code = _load(DOCS / "griffe_rst.py").fence_code
    text = ('Adds a bonus.\n\nExample::\n\n    env = Wrap(env)\n    env.reset()\n\nThen:\n'
            '    >>> info["a"]["b"]\n    1.0\n\n:param x: the value:: not a block\n')
    fenced = fence_code(text)
    assert "Example:\n\n```python\nenv = Wrap(env)\nenv.reset()\n```" in fenced
    assert 'Then:\n\n```pycon\n>>> info["a"]["b"]\n1.0\n```' in fenced
    assert ":param x: the value:: not a block" in fenced  # a field is never a literal block
    assert fence_code("one :class:`Hybrid` and :meth:`~rewardlab.PPO.learn`") == "one `Hybrid` and `rewardlab.PPO.learn`"


def test_every_page_links_only_to_pages_that_exist() -> None:
    for page in _pages():
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[\w-]+)?\)", page.read_text()):
            if target.startswith("results/") or "/results/" in target:
                target_path = ROOT / "benchmarks" / "results" / Path(target).name
            else:
                target_path = (page.parent / target).resolve()
            assert target_path.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"


#: a dotted name of rewardlab as the pages write it: in full anywhere (``rewardlab.agents.PPO``),
#: or in code from a package of rewardlab (``agents.base.Learner``) or of rewardlab.llm_reward
#: (``training.job.evaluation_job``), as the architecture page shortens them, or from a class a
#: package exports (``BatchedEnv.reset``)
FULL_NAME = re.compile(r"\brewardlab(?:\.[A-Za-z_]\w*)+")
SHORT_NAME = re.compile(r"`((?:app|agents|common|envs|intrinsic|llm_reward|shaping"
                        r"|clients|programs|sandbox|search|training)(?:\.[A-Za-z_]\w*)+)")
CLASS_NAME = re.compile(r"`([A-Z]\w*(?:\.[A-Za-z_]\w*)+)")
LLM_REWARD_PACKAGES = ("clients", "programs", "sandbox", "search", "training")


def _exporter(name: str) -> str | None:
    """The package of rewardlab whose ``__all__`` holds ``name`` (``None``: another project's)."""
    packages = [f"rewardlab.{package}" for package in PACKAGES]
    packages += [f"rewardlab.llm_reward.{package}" for package in LLM_REWARD_PACKAGES]
    return next((package for package in packages
                 if name in getattr(importlib.import_module(package), "__all__", ())), None)


def _named(text: str) -> dict[str, str]:
    """The dotted names ``text`` writes, each as written -> in full."""
    names = {name: name for name in FULL_NAME.findall(text)}
    for name in SHORT_NAME.findall(text):
        package = "rewardlab.llm_reward" if name.split(".")[0] in LLM_REWARD_PACKAGES else "rewardlab"
        names[name] = f"{package}.{name}"
    for name in CLASS_NAME.findall(text):
        package = _exporter(name.split(".")[0])
        if package is not None:
            names[name] = f"{package}.{name}"
    return names


def _resolves(name: str) -> bool:
    """Whether ``name`` imports, or is an attribute of the longest prefix of it that imports."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError as error:
            if error.name is not None and not name.startswith(error.name):
                raise  # the module exists but needs something that is not installed
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_the_dotted_names_the_pages_write_exist() -> None:
    wrong = [f"{page.relative_to(ROOT)}: `{written}` ({name})"
             for page in [ROOT / "README.md", *_pages()]
             for written, name in _named(page.read_text()).items() if not _resolves(name)]
    assert not wrong, ("these names neither import nor are attributes of what imports; write the name "
                       "the code has now:\n" + "\n".join(wrong))


def test_a_dotted_name_that_is_gone_is_found() -> None:
    text = ("`rewardlab.agents.PPO` and `agents.base.Learner`, `training.job.evaluation_job(...)`; "
            "rewardlab.envs.no_such_name, `search.no_such_module.Failure`, `PPO.learn`, "
            "`BatchedEnv.no_such_method`, `VecEnv.step_async` (SB3's, not looked at)")
    named = _named(text)
    assert named["training.job.evaluation_job"] == "rewardlab.llm_reward.training.job.evaluation_job"
    assert named["PPO.learn"] == "rewardlab.agents.PPO.learn" and "VecEnv.step_async" not in named
    assert [written for written, name in named.items() if not _resolves(name)] == [
        "rewardlab.envs.no_such_name", "search.no_such_module.Failure", "BatchedEnv.no_such_method"]


@pytest.mark.parametrize("where, block", _blocks("bash"), ids=lambda value: str(value)[:50])
def test_every_command_in_the_docs_parses(where: str, block: str) -> None:
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        for start in (i for i, word in enumerate(words) if word == "rewardlab" and (i == 0 or words[i - 1] == "&&")):
            argv = words[start + 1:]
            argv = argv[:argv.index("&&")] if "&&" in argv else argv
            assert build_parser().parse_args(argv).command == argv[0], (where, argv)


def test_the_own_env_guide_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The corridor module and its description file, saved as the guide says, make an env
    that rewardlab describes for the search from the file."""
    import gymnasium as gym

    from rewardlab.envs.description_files import load_description

    page = (DOCS / "guides" / "your-env.md").read_text()
    (module_source,) = [block for block in re.findall(r"^```python\n(.*?)^```", page, re.M | re.S)
                        if "Corridor" in block]
    description = re.findall(r"^```toml\n(.*?)^```", page, re.M | re.S)[0]  # the corridor's
    (tmp_path / "my_corridor.py").write_text(module_source)
    (tmp_path / "corridor.toml").write_text(description)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    env = gym.make("my_corridor:Corridor-v0")
    obs, _ = env.reset(seed=0)
    assert obs.tolist() == [0.0, 6.0]
    for _ in range(6):
        obs, reward, terminated, truncated, _ = env.step(1)
    assert terminated and reward == 1.0
    description, _ = load_description(tmp_path / "corridor.toml", "my_corridor:Corridor-v0")
    names = list(description.variables)
    assert "position" in names and "next_distance_to_goal" in names
    assert description.success is not None


def test_the_own_minigrid_task_in_the_guide_runs_batched_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's MiniGridEnv subclass, saved as ``keyrooms.py``, is batched by envs.make."""
    pytest.importorskip("minigrid")
    from rewardlab import envs
    from rewardlab.envs.batched_minigrid import BatchedMiniGridEnv

    page = (DOCS / "guides" / "your-env.md").read_text()
    (module_source,) = [block for block in re.findall(r"^```python\n(.*?)^```", page, re.M | re.S)
                        if block.startswith("# keyrooms.py")]
    (tmp_path / "keyrooms.py").write_text(module_source)
    monkeypatch.syspath_prepend(str(tmp_path))
    env = envs.make("keyrooms:MiniGrid-KeyRooms-v0", num_envs=4, seed=0)
    assert isinstance(env, BatchedMiniGridEnv)
    obs, _ = env.reset()
    assert tuple(obs.shape) == (4, 147)
