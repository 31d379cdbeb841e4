"""Is a cited figure as new as the code it measures?

The rule, for whoever changes code or docs: **a result that the README or the docs cite must
have been measured at or after the last commit that changed the code it measures; if it was
not, rerun its benchmark, or write "measured at <commit>, before <the change>" beside the
figure.**

- What a benchmark measures: its script's ``MEASURES``, a tuple of paths in the repository
  (files or folders, such as ``"agents/ppo.py"`` or ``"envs/classic/"``). A result that no
  script made (a ``rewardlab train`` run) names them in its JSON's ``provenance.measures``.
- Which script made a result: the one recorded in the result's ``machine.script``
  (:func:`benchmarks.machine.describe_machine` records it), else its JSON's
  ``provenance.script``, else the script whose name begins the result's name
  (``ppo_speed_xeon_16steps`` was made by ``benchmarks/ppo_speed.py``).
- When it was measured: the commit the result records (``machine.commit``; a ``-dirty``
  commit counts as its base, since the uncommitted changes are unknown: commit the code, then
  run the benchmark, then commit the result), or, for the runs
  from before benchmarks recorded it, the commit that added the file (its
  ``provenance.note``): the run measured that commit's code or older.
- A change is a commit after that one that changes the code of a measured path: for Python
  files, anything but comments, docstrings, formatting and the ``MEASURES`` declaration.
- Beside the figure is the citing text: the table row or list item that holds the citation,
  else its paragraph; for a ``<!-- results: NAME -->`` table, the paragraph right below it.

It needs the git history back to the oldest measured commit: a shallow clone is refused with
what to do (``git fetch --unshallow``). ``python -m benchmarks.freshness`` lists every
citation of the README and the docs that breaks the rule, with the note to write.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"

#: a result file as the docs and the README name it: a path under benchmarks/results/, a link
#: to the docs site's results/ pages, or the benchmarks page's marker
CITATION = re.compile(
    r"(?:benchmarks/results/|\bresults/|<!-- results: )([\w.-]+?)(\.md|\.json| -->)"
)
RESULTS_MARKER = re.compile(r"<!-- results: [\w.-]+ -->")
#: the note that says a figure predates a change to what it measures
STALE_NOTE = re.compile(
    r"\b[Mm]easured at(?: or before)? `?(?P<commit>[0-9a-f]{7,40})`?[^.|]*?\bbefore\b"
)
#: where the commit that added an older result is named in its provenance note
ADDED_IN = re.compile(r"committed in ([0-9a-f]{7,40})")
#: a line that starts an item of its own inside a paragraph: a table row or a list item
ITEM_START = re.compile(r"^\s*(?:\||[-*+] |\d+\. )")


class FreshnessError(RuntimeError):
    """The history or a declaration cannot answer (a shallow clone, a missing MEASURES)."""


def cited_results(text: str) -> set[str]:
    """The result files ``text`` names, as file names (``ppo_speed.md``)."""
    return {
        name + (".md" if suffix == " -->" else suffix) for name, suffix in CITATION.findall(text)
    }


def citations(text: str) -> list[tuple[str, str]]:
    """Each result that ``text`` cites, with the text beside it (see the module's rule).

    :return: ``(result name without suffix, citing text)`` pairs, in the order of ``text``.
    """
    paragraphs = re.split(r"\n[ \t]*\n", text)
    found = []
    for index, paragraph in enumerate(paragraphs):
        items: list[str] = []
        for line in paragraph.splitlines():
            if not items or ITEM_START.match(line):
                items.append(line)
            else:
                items[-1] += "\n" + line
        for item in items:
            for name in sorted(cited_results(item)):
                beside = item
                if RESULTS_MARKER.search(item):
                    after = paragraphs[index + 1] if index + 1 < len(paragraphs) else ""
                    beside = "" if after.lstrip().startswith(("#", "<!--", "```")) else after
                found.append((name.rsplit(".", 1)[0], beside))
    return found


# ---------------------------------------------------------------- git
def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise FreshnessError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def has_history() -> bool:
    """Whether this is a git checkout with git at hand."""
    try:
        return _git("rev-parse", "--is-inside-work-tree").strip() == "true"
    except (OSError, FreshnessError):
        return False


def is_shallow() -> bool:
    """Whether this checkout is a shallow clone (its history cut at some depth)."""
    return _git("rev-parse", "--is-shallow-repository").strip() == "true"


@functools.cache
def commit_date(commit: str) -> str:
    """The day ``commit`` was made, ``YYYY-MM-DD`` in the time zone it recorded (the same
    answer on every machine)."""
    return _git("show", "-s", "--date=format:%Y-%m-%d", "--format=%cd", commit).strip()


@functools.cache
def _commit_exists(commit: str) -> bool:
    try:
        _git("cat-file", "-e", f"{commit}^{{commit}}")
        return True
    except FreshnessError:
        return False


def _require(commit: str, result: str) -> None:
    if _commit_exists(commit):
        return
    if is_shallow():
        raise FreshnessError(
            f"{result} was measured at {commit}, which this shallow clone lacks: "
            "run `git fetch --unshallow` (or clone without --depth) so that its age can be checked"
        )
    raise FreshnessError(
        f"{result} records commit {commit}, which is not in this repository's history: "
        f"rerun its benchmark"
    )


@functools.cache
def _object_reader(root: Path) -> subprocess.Popen:
    # one `git cat-file --batch` answers every file version asked of it: a process per file
    # made the check take a minute on a loaded machine
    return subprocess.Popen(
        ["git", "cat-file", "--batch"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )


@functools.cache
def _blob(commit: str, path: str) -> bytes | None:
    reader = _object_reader(ROOT)
    assert reader.stdin is not None and reader.stdout is not None
    reader.stdin.write(f"{commit}:{path}\n".encode())
    reader.stdin.flush()
    header = reader.stdout.readline().split()
    if len(header) != 3:  # "<name> missing": no such file in that commit
        return None
    content = reader.stdout.read(int(header[2]) + 1)  # the object and its closing newline
    return content[:-1]


def code_of(source: bytes | None, path: str) -> object:
    """What of a file counts as its code: for Python, its syntax tree without docstrings and
    without a ``MEASURES`` declaration (so comments, docstrings and formatting never count);
    other files as they are.

    :param source: the file's bytes (``None`` where it does not exist).
    :param path: its path, whose suffix says whether it is Python.
    """
    if source is None or not path.endswith(".py"):
        return source
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            or not body
        ):
            continue
        if (
            isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    tree.body = [statement for statement in tree.body if not _declares_measures(statement)]
    return ast.dump(tree)


def _declares_measures(statement: ast.stmt) -> bool:
    targets = (
        statement.targets
        if isinstance(statement, ast.Assign)
        else ([statement.target] if isinstance(statement, ast.AnnAssign) else [])
    )
    return any(isinstance(target, ast.Name) and target.id == "MEASURES" for target in targets)


@functools.cache
def _changes_code(commit: str, path: str) -> bool:
    return code_of(_blob(f"{commit}^", path), path) != code_of(_blob(commit, path), path)


@dataclass(frozen=True)
class Change:
    """A commit that changed the code of measured paths."""

    commit: str
    subject: str
    paths: tuple[str, ...]


def code_changes_since(commit: str, paths: tuple[str, ...]) -> Iterator[Change]:
    """The commits after ``commit`` (up to ``HEAD``) that change the code of ``paths``, oldest
    first, found as they are asked for (the check needs the first alone).

    :param commit: the measured commit.
    :param paths: files or folders in the repository.
    """
    log = _git(
        "log",
        "--reverse",
        "--no-renames",
        "--format=@%h %s",
        "--name-only",
        f"{commit}..HEAD",
        "--",
        *paths,
    )
    commits: list[tuple[str, str, list[str]]] = []
    for line in log.splitlines():
        if line.startswith("@"):
            sha, _, subject = line[1:].partition(" ")
            commits.append((sha, subject, []))
        elif line.strip() and commits:
            commits[-1][2].append(line.strip())
    for sha, subject, files in commits:
        changed = tuple(path for path in files if _changes_code(sha, path))
        if changed:
            yield Change(sha, subject, changed)


# ---------------------------------------------------------------- results
def load_result(name: str) -> dict:
    """The JSON data of ``benchmarks/results/NAME.json`` (empty where there is none)."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def script_of(name: str, data: dict) -> Path | None:
    """The benchmark script that made result ``name`` (see the module's rule), or ``None``."""
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    recorded = machine.get("script") or (data.get("provenance") or {}).get("script")
    if recorded:
        return ROOT / recorded
    stems = sorted(
        (path.stem for path in BENCHMARKS.glob("*.py") if not path.stem.startswith("_")),
        key=len,
        reverse=True,
    )
    stem = next((stem for stem in stems if name == stem or name.startswith(stem + "_")), None)
    return BENCHMARKS / f"{stem}.py" if stem else None


def declared_measures(script: Path) -> tuple[str, ...] | None:
    """The ``MEASURES`` a benchmark script declares, read without importing it (``None``
    where it declares none)."""
    for statement in ast.parse(script.read_text()).body:
        if _declares_measures(statement) and statement.value is not None:
            return tuple(ast.literal_eval(statement.value))
    return None


def measures_of(name: str, data: dict) -> tuple[str, ...]:
    """The paths that result ``name`` measures.

    :raises FreshnessError: where neither its script nor its JSON declares them, or a declared
        path does not exist.
    """
    script = script_of(name, data)
    declared = (data.get("provenance") or {}).get("measures")
    if declared is None and script is not None and script.exists():
        declared = declared_measures(script)
    if not declared:
        where = (
            f'{script.relative_to(ROOT)} declares no MEASURES: add MEASURES = ("path", ...), the '
            "modules its figures measure"
            if script is not None and script.exists()
            else f"no benchmark script made {name}: name what it measures in its JSON's provenance.measures"
        )
        raise FreshnessError(f"{name}: {where}")
    missing = [path for path in declared if not (ROOT / path).exists()]
    if missing:
        raise FreshnessError(
            f"{name} measures {missing}, which do not exist: update the MEASURES declaration"
        )
    return tuple(declared)


def measured_commit(name: str, data: dict) -> tuple[str, bool]:
    """The commit result ``name`` measured, and whether exactly that one (``False``: the run
    did not record it; this is the commit that added the file, so the run is that old or older).

    :raises FreshnessError: where neither is recorded.
    """
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    if machine.get("commit"):
        return machine["commit"].removesuffix("-dirty"), True
    added = ADDED_IN.search((data.get("provenance") or {}).get("note", ""))
    if added:
        return added[1], False
    raise FreshnessError(
        f"{name} records no commit: rerun its benchmark (benchmarks.machine records it)"
    )


@dataclass
class Freshness:
    """How a result stands against the code it measures."""

    name: str
    commit: str
    exact: bool
    measures: tuple[str, ...]
    #: the first commit since that changed the code it measures (``None``: fresh)
    change: Change | None = None
    #: the run recorded a ``-dirty`` commit (uncommitted changes, unknown here)
    dirty: bool = False

    @property
    def fresh(self) -> bool:
        return self.change is None

    def note(self) -> str:
        """The note to write beside a stale figure."""
        at = "at" if self.exact else "at or before"
        first = self.change
        assert first is not None, "a fresh result needs no note"
        paths = ", ".join(first.paths[:2])
        if len(first.paths) > 2:
            paths += f" and {len(first.paths) - 2} more"
        return f"measured {at} {self.commit}, before {first.commit} changed {paths}"


@functools.cache
def freshness(name: str) -> Freshness:
    """Result ``name``'s commit, what it measures and the changes to that code since."""
    data = load_result(name)
    if not data:
        raise FreshnessError(f"benchmarks/results/{name}.json does not exist")
    commit, exact = measured_commit(name, data)
    measures = measures_of(name, data)
    _require(commit, name)
    dirty = str((data.get("machine") or {}).get("commit", "")).endswith("-dirty")
    return Freshness(
        name, commit, exact, measures, next(code_changes_since(commit, measures), None), dirty
    )


def check_citation(state: Freshness, beside: str, where: str) -> str | None:
    """What is wrong with one citation of a result (``None`` where nothing is): a stale figure
    without its note, or a note beside a fresh one (or naming another commit than the result's).

    :param state: the cited result's :func:`freshness`.
    :param beside: the citing text (see the module's rule).
    :param where: the citing file, for the message.
    """
    notes = [match["commit"] for match in STALE_NOTE.finditer(beside)]
    noted = any(
        state.commit.startswith(commit) or commit.startswith(state.commit) for commit in notes
    )
    if state.fresh:
        if noted:
            return (
                f"{where}: {state.name} is fresh (measured at {state.commit}, no change to "
                f"{', '.join(state.measures)} since) but is marked stale beside its figure: remove the note"
            )
        return None
    if noted:
        return None
    first = state.change
    script = script_of(state.name, load_result(state.name))
    rerun = f"rerun `python -m benchmarks.{script.stem}`" if script else "rerun it"
    if state.dirty:  # the usual cause: the result ran before the code it measures was committed
        rerun += " on a committed tree (a -dirty run counts as its base commit)"
    return (
        f"{where}: {state.name} (measured {'at' if state.exact else 'at or before'} {state.commit}) "
        f"predates {first.commit}, which changed {', '.join(first.paths)}: {rerun}, or write "
        f'"{state.note()}" beside the figure'
    )


def cited_pages() -> list[Path]:
    """The README and the docs pages."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def problems() -> list[str]:
    """Every citation in the README and the docs that breaks the rule, one line each."""
    found = []
    for page in cited_pages():
        where = str(page.relative_to(ROOT))
        for name, beside in citations(page.read_text()):
            try:
                problem = check_citation(freshness(name), beside, where)
            except FreshnessError as error:
                problem = f"{where}: {error}"
            if problem:
                found.append(problem)
    return list(dict.fromkeys(found))


if __name__ == "__main__":
    lines = problems()
    print("\n".join(lines) or "every cited result is fresh or marked stale beside its figure")
    sys.exit(1 if lines else 0)
