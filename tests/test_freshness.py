"""No figure the README or the docs cite is older than the code it measures, unless the text
beside it says so (the rule is in ``benchmarks/freshness.py`` and on the benchmarks page)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks import freshness
from benchmarks.freshness import (
    Change,
    Freshness,
    FreshnessError,
    check_citation,
    citations,
    code_of,
)


def test_every_cited_figure_is_as_new_as_the_code_it_measures_or_says_it_is_not() -> None:
    if not freshness.has_history():
        pytest.skip("not a git checkout: the age of a result needs the repository's history")
    if freshness.is_shallow():
        # .ci/run unshallows first; a clone that still lacks the history cannot date a result
        pytest.skip("a shallow clone: run `git fetch --unshallow` so that results can be dated")
    problems = freshness.problems()
    assert not problems, "\n" + "\n".join(problems)


def test_what_counts_as_a_change_to_code() -> None:
    before = b'"""A module."""\nMEASURES = ("a.py",)\n\ndef f(x):\n    """Doubles."""\n    return 2 * x  # twice\n'
    reworded = (
        b'"""The module."""\n\n\ndef f(x):\n    """Twice x."""\n    return (2 *\n            x)\n'
    )
    changed = b'"""A module."""\n\ndef f(x):\n    return 3 * x\n'
    assert code_of(before, "m.py") == code_of(reworded, "m.py")
    assert code_of(before, "m.py") != code_of(changed, "m.py")
    assert code_of(b"a = 1", "data.toml") != code_of(
        b"a = 1 ", "data.toml"
    )  # not Python: every byte
    assert code_of(None, "m.py") != code_of(b"", "m.py")  # a file added or removed


def test_the_text_beside_a_citation() -> None:
    text = (
        "| a | 1.5x | [x](benchmarks/results/one.md) |\n"
        "| b | 2.0x, measured at abc1234, before def5678 | [y](benchmarks/results/two.md) |\n\n"
        "- [three](results/three.md)\n- [four](results/four.md), measured at 1111111, before a change\n\n"
        "<!-- results: five -->\n\nMeasured at `2222222`, before 3333333 changed agents/ppo.py.\n\n"
        "<!-- results: six -->\n\n## Next\n"
    )
    beside = dict(citations(text))
    assert "one" in beside["one"] and "abc1234" not in beside["one"]  # a row is its own
    assert "abc1234" in beside["two"]
    assert "1111111" not in beside["three"] and "1111111" in beside["four"]  # so is a list item
    assert beside["five"].startswith("Measured at `2222222`")  # a table: the paragraph below
    assert beside["six"] == ""  # a heading is not beside it


def _state(change: Change | None, commit: str = "abc1234", exact: bool = True) -> Freshness:
    return Freshness("ppo_speed", commit, exact, ("agents/ppo.py",), change)


def test_a_stale_figure_passes_only_with_its_note_and_a_fresh_one_only_without() -> None:
    stale = _state(Change("def5678", "PPO: a change", ("agents/ppo.py",)))
    problem = check_citation(
        stale, "| PPO | 17x faster | [ppo_speed](benchmarks/results/ppo_speed.md) |", "README.md"
    )
    assert problem is not None and problem.count("\n") == 0
    for part in (
        "README.md",
        "ppo_speed",
        "abc1234",
        "def5678",
        "agents/ppo.py",
        "python -m benchmarks.ppo_speed",
    ):
        assert part in problem
    assert stale.note() == "measured at abc1234, before def5678 changed agents/ppo.py"
    assert check_citation(stale, f"17x faster ({stale.note()})", "README.md") is None
    assert (
        check_citation(stale, "17x faster (measured at 9999999, before def5678)", "README.md")
        is not None
    )
    fresh = _state(None)
    assert check_citation(fresh, "17x faster", "README.md") is None
    assert "remove the note" in check_citation(
        fresh, "17x (measured at abc1234, before x)", "README.md"
    )
    dirty = Freshness("ppo_speed", "abc1234", True, ("agents/ppo.py",), stale.change, dirty=True)
    assert "on a committed tree" in check_citation(dirty, "17x", "README.md")
    older = _state(stale.change, exact=False)
    assert older.note().startswith("measured at or before abc1234, before")


def test_a_result_names_its_script_commit_and_measured_code() -> None:
    assert freshness.script_of("ppo_speed_xeon_16steps", {}).name == "ppo_speed.py"
    assert (
        freshness.script_of("x", {"machine": {"script": "benchmarks/hra_fruit.py"}}).name
        == "hra_fruit.py"
    )
    assert freshness.script_of("no_such_benchmark", {}) is None
    assert freshness.measured_commit("r", {"machine": {"commit": "abc1234-dirty"}}) == (
        "abc1234",
        True,
    )
    note = {"provenance": {"note": "the file was committed in 41e6db4 on 2026-12-02"}}
    assert freshness.measured_commit("r", note) == ("41e6db4", False)
    with pytest.raises(FreshnessError, match="records no commit"):
        freshness.measured_commit("r", {"machine": {}})
    assert "agents/ppo.py" in freshness.measures_of("ppo_speed", {})
    with pytest.raises(FreshnessError, match="provenance.measures"):
        freshness.measures_of("no_such_benchmark", {})
    with pytest.raises(FreshnessError, match="do not exist"):
        freshness.measures_of("r", {"provenance": {"measures": ["agents/no_such_module.py"]}})


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """A repository of three commits to ``pkg/m.py``: the first, a docstring and comment edit,
    a change to the code."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    _git(repo, "init", "-q")
    commits = []
    for source in (
        "def f():\n    return 1\n",
        'def f():\n    """One."""\n    return 1  # one\n',
        'def f():\n    """One."""\n    return 2\n',
    ):
        (repo / "pkg" / "m.py").write_text(source)
        _git(repo, "add", ".")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a commit")
        commits.append(_git(repo, "rev-parse", "--short", "HEAD"))
    monkeypatch.setattr(freshness, "ROOT", repo)
    caches = (
        freshness._commit_exists,
        freshness._blob,
        freshness._changes_code,
        freshness._object_reader,
    )
    for cached in caches:
        cached.cache_clear()
    yield repo, commits
    for cached in caches:
        cached.cache_clear()


def test_only_a_change_to_the_code_after_the_measured_commit_counts(
    history: tuple[Path, list[str]],
) -> None:
    _, (first, docs_only, code) = history
    assert [change.commit for change in freshness.code_changes_since(first, ("pkg/",))] == [code]
    assert list(freshness.code_changes_since(code, ("pkg/m.py",))) == []
    assert list(freshness.code_changes_since(first, ("other/",))) == []


def test_a_shallow_clone_is_refused_with_what_to_do(
    history: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, (first, _, _) = history
    shallow = tmp_path / "shallow"
    _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    monkeypatch.setattr(freshness, "ROOT", shallow)
    with pytest.raises(FreshnessError, match="git fetch --unshallow"):
        freshness._require(first, "ppo_speed")
    monkeypatch.setattr(freshness, "ROOT", repo)
    with pytest.raises(FreshnessError, match="not in this repository's history"):
        freshness._require("0123456789abcdef0123", "ppo_speed")
