"""The index at the top of ``docs/benchmarks.md``: every result in ``benchmarks/results/``, the
machine it ran on, the commit it measured, its date and whether it is current by
``benchmarks/freshness.py``'s rule (no change since to the code it measures).

The index is generated, never edited by hand; ``tests/test_results.py`` fails when the page's
copy differs from what this script makes (after a new result, or a commit that changes code a
result measures):

    python -m benchmarks.results_index            # print the index
    python -m benchmarks.results_index --write    # write it into docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import freshness
from benchmarks.machine import short_name

PAGE = freshness.ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- the results index: `python -m benchmarks.results_index --write` makes it -->"
END = "<!-- end of the results index -->"


def row(name: str) -> str:
    """The index's row of result ``name`` (``benchmarks/results/NAME.json``).

    :param name: the result's file name without its suffix.
    """
    data = freshness.load_result(name)
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    script = freshness.script_of(name, data)
    # a result that no script made names its command (`rewardlab train ...`)
    made_by = script.stem if script else "a command"
    try:
        state = freshness.freshness(name)
    except freshness.FreshnessError as error:  # shown, and failed by the freshness test
        return f"| {made_by} | {name} | {short_name(machine)} | | | {error} |"
    at = state.commit if state.exact else f"{state.commit} or before"
    date = (machine.get("date") or freshness.commit_date(state.commit))[:10]
    # a stale result's cell is the note the freshness rule asks for beside a cited figure
    current = "yes" if state.fresh else f"no: {state.note()}"
    return (
        f"| {made_by} | [{name}](results/{name}.md) | {short_name(machine)} | {at} | {date} "
        f"| {current} |"
    )


def index() -> str:
    """The whole index: its markers, a sentence and the table, one row per result."""
    names = sorted(path.stem for path in freshness.RESULTS.glob("*.json"))
    current = sum(_current(name) for name in names)
    return "\n".join([
        BEGIN,
        "",
        f"{len(names)} results, {current} of them current (measured at or after the last change "
        "to the code they measure).",
        "",
        "| benchmark | result | machine | measured at | date | current |",
        "|---|---|---|---|---|---|",
        *(row(name) for name in names),
        "",
        END,
    ])  # fmt: skip


def _current(name: str) -> bool:
    try:
        return freshness.freshness(name).fresh
    except freshness.FreshnessError:
        return False


def with_index(page: str) -> str:
    """``page`` with the index between its markers made anew.

    :raises ValueError: where the page lacks the markers.
    """
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(
            f"{PAGE.name} lacks the index's markers: put {BEGIN!r} and {END!r} where it goes"
        )
    return page[:start] + index() + page[end + len(END) :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help=f"write the index into {PAGE.name}")
    args = parser.parse_args(argv)
    if args.write:
        PAGE.write_text(with_index(PAGE.read_text()))
    else:
        print(index())
    return 0


if __name__ == "__main__":
    sys.exit(main())
