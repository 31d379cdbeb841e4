"""How often early stopping would have stopped a good reward: the rungs replayed on search journals.

A search's journal holds, for each candidate, the fitness at its checkpoints (up to where it
stopped), and for its best program and the human reference, full curves: their finalist and
final seeds, which never stop. Each of those full trainings is a draw of what a good reward's
training looks like at the rungs. This replays every one of them through the stopping rule
each iteration of the search would have used (the population of the earlier iterations'
candidates, as the search builds it) and counts the iterations' rules that would have stopped
it: with the level alone (ASHA, the rule before the trend was added) and with the level and
the trend (the search's rule, :mod:`rewardlab.llm_reward.training.stopping`).

It also counts the search's own candidates that trained past the second rung and would have
been stopped there, so the figure that a rule keeps good rewards comes with what it stops.
Candidates the journal's search stopped early lack the later rungs: they are counted apart.

    python -m benchmarks.stopping_replay RUN_DIR [RUN_DIR ...]

Writes ``benchmarks/results/stopping_replay.{json,md}`` (``--name`` changes the file name).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.machine import describe_machine, recorded_args
from rewardlab.llm_reward.search.records import journaled_run
from rewardlab.llm_reward.search.store import JOURNAL_FILE
from rewardlab.llm_reward.training.stopping import StopRule, population, rung_indices

MEASURES = ("llm_reward/training/stopping.py",)
RESULTS = Path(__file__).parent / "results"
RULES = {"level": False, "level and trend": True}


def _stops(values: Sequence[float], rule: StopRule) -> bool:
    """Whether ``rule`` stops a training whose rung values are ``values``."""
    stopper = rule.stopper()
    return any(
        stopper.at(index, index + 1, value) is not None for index, value in enumerate(values)
    )


def replay(run_dir: Path) -> dict[str, Any]:
    """One journal's counts under each rule.

    :param run_dir: a search's run directory.
    """
    config = json.loads((run_dir / "config.json").read_text())
    config = config.get("config", config)
    checkpoints = int(config["num_checkpoints"])
    rungs = rung_indices(checkpoints)
    records = [
        json.loads(line)
        for line in (run_dir / JOURNAL_FILE).read_text().splitlines()
        if line.strip()
    ]
    candidates: dict[int, list[list[float]]] = {}
    for record in records:
        if record.get("type") == "evaluation":
            iteration = int(str(record["key"])[2:4])
            candidates.setdefault(iteration, []).append(journaled_run(record).rung_values())
    best = {
        record.get("candidate")
        for record in records
        if record.get("type") == "final" and record.get("label") == "best"
    }
    good: dict[str, list[list[float]]] = {"best": [], "human": []}
    for record in records:
        if record.get("type") == "final" and record.get("label") in good:
            good[record["label"]].append(journaled_run(record).rung_values())
        elif record.get("type") == "finalist" and record.get("candidate") in best:
            good["best"].append(journaled_run(record).rung_values())
    good = {
        label: [values for values in runs if len(values) == checkpoints]
        for label, runs in good.items()
    }
    later = [iteration for iteration in sorted(candidates) if iteration > 0]
    row: dict[str, Any] = {
        "run": run_dir.name,
        "env_id": config["env_id"],
        "iteration_rules": len(later),
        "trainings": {label: len(runs) for label, runs in good.items()},
        "rules": {},
    }
    for name, trend in RULES.items():
        counts = {
            "best_stopped": 0,
            "human_stopped": 0,
            "candidates_stopped": 0,
            "candidates_judged": 0,
        }
        for iteration in later:
            earlier = [
                values
                for before, rows in candidates.items()
                if before < iteration
                for values in rows
            ]
            rule = StopRule(rungs, population(earlier, rungs), checkpoints, trend=trend)
            for label, runs in good.items():
                counts[f"{label}_stopped"] += sum(_stops(values, rule) for values in runs)
            judged = [values for values in candidates[iteration] if len(values) > rungs[-1]]
            counts["candidates_judged"] += len(judged)
            counts["candidates_stopped"] += sum(_stops(values, rule) for values in judged)
        row["rules"][name] = counts
    row["candidates_cut_short"] = sum(
        len(values) <= rungs[-1] for rows in candidates.values() for values in rows
    )
    return row


def markdown(rows: list[dict[str, Any]], machine: dict[str, Any]) -> str:
    lines = [
        "# Early stopping replayed on search journals: how often the final best would stop",
        "",
        "Each full training of a search's final best program (its finalist and final seeds, which "
        "never "
        "stop) and of the human reference (its final seeds) replayed through the stopping rule of "
        "each "
        "of the search's iterations after the first (the earlier iterations' candidates as the "
        "population, as the search builds it); a training counts once per iteration whose rule "
        "stops "
        "it. Candidates: the search's own that reached the last rung, through their iteration's "
        "rule "
        "(those the journal's search stopped before it are counted apart: their later rungs are "
        "unknown).",
        f"Machine: {machine['summary']} (counting only; nothing trains).",
        "",
        "| env | best: trainings x rules | stopped, level | stopped, level and trend | human: "
        "trainings "
        "x rules | stopped, level | stopped, level and trend | candidates judged | stopped, level "
        "| "
        "stopped, level and trend | cut short before the last rung |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    totals = {
        name: dict.fromkeys(("best", "human", "candidates", "judged", "best_n", "human_n"), 0)
        for name in RULES
    }
    for row in rows:
        level, both = row["rules"]["level"], row["rules"]["level and trend"]
        runs = {
            label: row["trainings"][label] * row["iteration_rules"] for label in ("best", "human")
        }
        lines.append(
            f"| {row['env_id']} | {runs['best']} | {level['best_stopped']} | "
            f"{both['best_stopped']} | "
            f"{runs['human']} | {level['human_stopped']} | {both['human_stopped']} | "
            f"{level['candidates_judged']} | {level['candidates_stopped']} | "
            f"{both['candidates_stopped']} | {row['candidates_cut_short']} |"
        )
        for name in RULES:
            counts, total = row["rules"][name], totals[name]
            total["best"] += counts["best_stopped"]
            total["human"] += counts["human_stopped"]
            total["candidates"] += counts["candidates_stopped"]
            total["judged"] += counts["candidates_judged"]
            total["best_n"] += runs["best"]
            total["human_n"] += runs["human"]
    level, both = totals["level"], totals["level and trend"]
    lines += [
        "",
        f"All: the final best's trainings stopped {level['best']} of {level['best_n']} times with "
        "the "
        f"level alone, {both['best']} with the level and the trend; the human reference's "
        f"{level['human']} "
        f"and {both['human']} of {level['human_n']}; the searches' candidates "
        f"{level['candidates']} and "
        f"{both['candidates']} of {level['judged']}.",
        "",
        "Reproduce: `python -m benchmarks.stopping_replay RUN_DIR ...` over the run folders of "
        "searches "
        "(`rewardlab search --out`, `python -m benchmarks.search_defaults`); these: "
        + ", ".join(row["run"] for row in rows)
        + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", nargs="+", help="search run directories (each with journal.jsonl and config.json)"
    )
    parser.add_argument("--name", default="stopping_replay", help="the results' file name")
    args = parser.parse_args(argv)
    rows = []
    for run in args.runs:
        path = Path(run)
        if not (path / JOURNAL_FILE).is_file() or not (path / "config.json").is_file():
            raise SystemExit(
                f"{run} is no search run directory (no {JOURNAL_FILE} and config.json): "
                "pass the --out folder of a search"
            )
        rows.append(replay(path))
    machine = describe_machine()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps(
            {
                "args": {**recorded_args(args), "runs": [Path(run).name for run in args.runs]},
                "machine": machine,
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    text = markdown(rows, machine)
    (RESULTS / f"{args.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
