"""MkDocs hooks of the documentation site (``mkdocs.yml`` names this file).

Three jobs, each done at build time so that nothing is copied by hand:

- the API reference reads the *installed* ``rewardlab``: its subpackages live in top-level
  folders (``shaping/`` is ``rewardlab.shaping``), which griffe cannot find from a folder
  name, so the installed package's files are staged under ``build/docs/api_src`` in the
  layout of their import names, and mkdocstrings reads them from there;
- every result file of ``benchmarks/results/`` becomes a page of the site (``results/NAME``),
  so that the docs can link to the evidence and the strict build checks those links;
- ``<!-- results: NAME -->`` in a page becomes the tables of ``benchmarks/results/NAME.md``,
  with the machine, the commit and the date the result records, and a link to the file.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
API_SOURCES = ROOT / "build" / "docs" / "api_src"
#: the packages whose public names the API reference lists
PACKAGES = ("rewardlab.shaping", "rewardlab.intrinsic", "rewardlab.agents", "rewardlab.envs",
            "rewardlab.llm_reward")
RESULTS_MARKER = re.compile(r"^<!-- results: ([\w.-]+) -->$", re.M)
TABLE_LINE = re.compile(r"^\|.*\|\s*$")


def _installed_location(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{name} is not installed: run pip install -e \".[docs]\" first")
    return Path(next(iter(spec.submodule_search_locations)))


def stage_api_sources(target: Path = API_SOURCES) -> Path:
    """Copy the installed ``rewardlab`` (its mapped subpackages included) to ``target/rewardlab``.

    :param target: the folder to stage into (emptied first).
    :return: ``target``, the path mkdocstrings searches.
    """
    if target.exists():
        shutil.rmtree(target)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    package = target / "rewardlab"
    shutil.copytree(_installed_location("rewardlab"), package, ignore=ignore)
    for name in PACKAGES:
        inside = package / name.rsplit(".", 1)[1]
        if not inside.exists():  # an editable install maps it from its own folder
            shutil.copytree(_installed_location(name), inside, ignore=ignore)
    return target


def measured(data: dict[str, Any]) -> str:
    """What a result says about when it was measured: the commit and date it records, or its
    provenance note (runs from before benchmarks recorded them).

    :param data: the result's JSON data.
    """
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    commit, date = machine.get("commit"), machine.get("date")
    if commit and date:
        return f"measured at commit `{commit}` on {date}"
    note = (data.get("provenance") or {}).get("note")
    return note or "the run recorded no commit or date"


def result_tables(name: str, link: str) -> str:
    """The tables of ``benchmarks/results/NAME.md`` with its machine and provenance, as Markdown.

    :param name: the result's file name without its suffix.
    :param link: the path of the result's page, relative to the page that shows it.
    """
    path = RESULTS / f"{name}.md"
    if not path.exists():
        raise FileNotFoundError(f"a docs page shows benchmarks/results/{name}.md, which does not exist")
    lines = path.read_text().splitlines()
    tables: list[list[str]] = []
    heading = ""  # a table under a heading of its own (one per env) is shown with it
    for previous, line in zip(["", *lines], lines):
        if line.startswith("## ") or line.startswith("### "):
            heading = line.lstrip("#").strip()
        elif TABLE_LINE.match(line):
            if not TABLE_LINE.match(previous):
                tables.append([f"**{heading}**", ""] if heading else [])
                heading = ""
            tables[-1].append(line)
    if not tables:
        raise ValueError(f"benchmarks/results/{name}.md holds no table to show")
    data_path = path.with_suffix(".json")
    data = json.loads(data_path.read_text()) if data_path.exists() else {}
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    caption = f"From [`{name}.md`]({link}) ({measured(data)})."
    if machine.get("summary") or machine.get("processor"):
        caption += f" Machine: {machine.get('summary') or machine['processor']}."
    return "\n\n".join(["\n".join(table) for table in tables] + [caption])


# ---------------------------------------------------------------- the MkDocs events
def on_startup(command: str, dirty: bool) -> None:
    # before any plugin reads its configuration: mkdocstrings drops a search path that does
    # not exist yet when it sets up its handler, so a fresh checkout's first build found no API
    stage_api_sources()


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path in sorted(RESULTS.glob("*.md")):
        files.append(File.generated(config, f"results/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    depth = page.file.src_uri.count("/")
    prefix = "../" * depth
    return RESULTS_MARKER.sub(lambda match: result_tables(match[1], f"{prefix}results/{match[1]}.md"), markdown)
