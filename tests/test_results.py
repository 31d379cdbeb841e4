"""Benchmark results speak of the project alone (no machine's paths in them), each says what
it measured (its commit and date, or that an older run did not record them)."""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import re
import sys
from pathlib import Path

import pytest

from benchmarks import freshness, results_index
from benchmarks.freshness import cited_pages, cited_results
from benchmarks.machine import describe_machine, recorded_args, short_name

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


def test_every_result_records_the_commit_and_date_it_measured_or_says_it_did_not() -> None:
    unmarked = []
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text())
        machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
        if machine.get("commit") and machine.get("date"):
            continue
        provenance = data.get("provenance") or {}
        if provenance.get("commit") is None and "did not record" in provenance.get("note", ""):
            continue  # an older run: marked as such, with the commit that added the file
        unmarked.append(path.name)
    assert not unmarked, f"results that record no commit and date: {unmarked} (benchmarks.machine records them)"


def test_every_result_has_its_table_and_its_data() -> None:
    tables = {path.stem for path in RESULTS.glob("*.md")}
    data = {path.stem for path in RESULTS.glob("*.json")}
    assert tables == data, f"a result without its other half: {sorted(tables ^ data)}"


def test_the_machine_record_names_the_commit_the_date_and_the_script() -> None:
    machine = describe_machine()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", machine["date"])
    assert machine["script"] is None  # pytest is no benchmark script
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    try:
        main.__spec__ = importlib.machinery.ModuleSpec("benchmarks.ppo_speed", None)
        assert describe_machine()["script"] == "benchmarks/ppo_speed.py"
    finally:
        main.__spec__ = spec
    if (RESULTS.parent.parent / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", machine["commit"])


def test_a_machine_is_named_in_a_few_words() -> None:
    assert short_name({"processor": "Intel(R) Xeon(R) Processor", "cpu_count": 2}) == "Intel Xeon, 2 cores"
    assert short_name({"processor": "AMD EPYC", "cpu_count": 16, "gpu": "NVIDIA H100"}) == (
        "AMD EPYC, 16 cores, NVIDIA H100")
    assert short_name({}) == "an unrecorded processor, ? cores"


def test_citations_are_found_in_every_form() -> None:
    text = ("see `benchmarks/results/ppo_speed.md`, [the run](results/sandbox_overhead.md) and\n"
            "<!-- results: search_defaults -->, data in benchmarks/results/hra_fruit.json")
    assert cited_results(text) == {"ppo_speed.md", "sandbox_overhead.md", "search_defaults.md", "hra_fruit.json"}


def test_every_result_file_the_docs_cite_exists() -> None:
    root = RESULTS.parent.parent
    pages = cited_pages()
    missing = {str(page.relative_to(root)): sorted(name for name in cited_results(page.read_text())
                                                     if not (RESULTS / name).exists())
               for page in pages}
    assert not {page: names for page, names in missing.items() if names}


def test_the_benchmarks_page_holds_the_results_index_as_made() -> None:
    if not freshness.has_history() or freshness.is_shallow():
        pytest.skip("the index dates results from the repository's history, which this checkout lacks")
    page = results_index.PAGE.read_text()
    assert page == results_index.with_index(page), (
        "docs/benchmarks.md's results index is out of date (a new result, or a commit changed code a "
        "result measures): run `python -m benchmarks.results_index --write` and commit the page"
    )


def test_the_results_index_rows_say_what_the_freshness_rule_says() -> None:
    if not freshness.has_history() or freshness.is_shallow():
        pytest.skip("the index dates results from the repository's history, which this checkout lacks")
    name = sorted(path.stem for path in RESULTS.glob("*.json"))[0]
    state = freshness.freshness(name)
    cells = [cell.strip() for cell in results_index.row(name).strip("|").split("|")]
    assert cells[1] == f"[{name}](results/{name}.md)"
    assert cells[3].split()[0] == state.commit
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", cells[4])
    assert cells[5] == ("yes" if state.fresh else f"no: {state.note()}")
    # a stale row carries the note the rule asks for beside a cited figure, so the index,
    # which cites every result, passes the freshness check by construction
    assert freshness.check_citation(state, results_index.row(name), "index") is None
    with pytest.raises(ValueError, match="lacks the index's markers"):
        results_index.with_index("# Benchmarks\n")
