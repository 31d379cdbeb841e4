"""Do the search's default budgets solve? The human and sparse references at each task's default budget.

For every task with a default budget (``rewardlab.llm_reward.search.budgets``), trains PPO on
the human reference reward (the env's reward plus our potential-based shaping) and on the
sparse one (the env's own) with ``--seeds`` seeds each, sandboxed, exactly as the search's
final re-training does, and reports the means, the normalised score's denominator
(human - sparse) and the wall time per training. A budget is fit for the search when the
human reference clearly beats the sparse one (so the normalised score is defined) and, for
the tasks with a solve threshold, when the human reference reaches it.

``--compile`` chooses how the candidates' PPO trains: ``on`` (the search's default: its
compiled graphs, loaded once by the sandbox's fork server), ``off`` (eager), or ``both``,
side by side in one run, seed by seed, with the ratio of the seconds per training. Each
budget's fork server is started (and, compiled, its graphs compiled or loaded) by a
one-step training before the timed ones; its time is reported apart.

    python -m benchmarks.search_budgets                     # classic control, 3 seeds
    python -m benchmarks.search_budgets --envs MountainCar-v0 --seeds 5
    python -m benchmarks.search_budgets --compile both --seeds 3

Writes ``benchmarks/results/search_budgets.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.machine import describe_machine, recorded_args
from rewardlab.llm_reward import evaluate, reference_programs
from rewardlab.llm_reward.programs.references import SHAPING
from rewardlab.llm_reward.search.budgets import SOLVED, Budget, default_budget, learner_discount

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = (
    "llm_reward/programs/references.py",
    "llm_reward/search/budgets.py",
    "llm_reward/training/",
    "agents/ppo.py",
    "envs/classic/",
    "envs/mujoco/",
)

RESULTS = Path(__file__).parent / "results"
CLASSIC = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1")


MODES = {"on": (True,), "off": (False,), "both": (False, True)}


def budget_for(env_id: str, steps: int | None = None, num_envs: int | None = None,
               settings: dict[str, Any] | None = None) -> Budget:
    """``env_id``'s default budget, with the steps, envs and PPO settings given instead."""
    budget = default_budget(env_id)
    return Budget(steps or budget.steps, num_envs or budget.num_envs, {**budget.ppo_kwargs, **(settings or {})})


def train(env_id: str, label: str, seed: int, compile: bool, budget: Budget, steps: int | None = None) -> dict[str, Any]:
    program = reference_programs(env_id, learner_discount(budget.ppo_kwargs, SHAPING))[label]
    start = time.monotonic()
    result = evaluate(program, env_id, steps=steps or budget.steps, seeds=[seed], num_envs=budget.num_envs,
                      ppo_kwargs={**budget.ppo_kwargs, "compile": compile}, num_checkpoints=5, eval_episodes=10,
                      timeout_s=1800)  # fmt: skip
    return {"env_id": env_id, "label": label, "seed": seed, "compile": compile,
            "compiled": result.compiled, "compile_note": result.compile_note,
            "fitness": result.fitness if result.ok else None,
            "failure": result.failure.reason if result.failure else None, "wall_s": time.monotonic() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(CLASSIC))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--compile", choices=tuple(MODES), default="on",
                        help="PPO compiled (the search's default), eager, or both side by side")
    parser.add_argument("--steps", type=int, help="train this many env steps instead of the default budget's")
    parser.add_argument("--num-envs", type=int, help="over this many envs instead of the default budget's")
    parser.add_argument("--set", type=json.loads, default={}, metavar="JSON",
                        help="PPO settings over the default budget's, e.g. '{\"n_epochs\": 5}'")
    parser.add_argument("--name", default="search_budgets", help="results file name")
    args = parser.parse_args()
    budgets = {env_id: budget_for(env_id, args.steps, args.num_envs, args.set) for env_id in args.envs}
    modes = MODES[args.compile]
    start = time.monotonic()
    # each budget's fork server (per env and mode) started, and its graphs loaded, untimed
    started = {(env_id, mode): train(env_id, "human", 0, mode, budgets[env_id], steps=1)["wall_s"]
               for env_id in args.envs for mode in modes}
    # seed by seed, the modes next to each other, so that both meet the same load
    jobs = [(env_id, label, 100 + seed, mode, budgets[env_id]) for seed in range(args.seeds) for env_id in args.envs
            for label in ("human", "sparse") for mode in modes]
    with ThreadPoolExecutor(args.workers) as pool:
        runs = list(pool.map(lambda job: train(*job), jobs))
    total_s = time.monotonic() - start
    rows = []
    for env_id in args.envs:
        for mode in modes:
            rows.append(_row(env_id, mode, [r for r in runs if r["env_id"] == env_id and r["compile"] == mode],
                             started[env_id, mode], budgets[env_id]))
    machine = describe_machine()
    data = {"args": recorded_args(args), "machine": machine, "total_s": total_s, "envs": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        "# The search's default budgets: human vs sparse reference at each task's default",
        "",
        f"Each reference reward trained with PPO in the sandbox at the task's default budget "
        f"(`rewardlab.llm_reward.search.budgets`){_changed(args)}, {args.seeds} seeds, fitness = the env's own return of 10 "
        f"deterministic episodes at the end; {args.workers} trainings at a time; PPO "
        f"{ {'on': 'compiled', 'off': 'eager', 'both': 'eager and compiled, seed by seed'}[args.compile]}. "
        f"Total {total_s / 60:.1f} min.",
        f"Machine: {machine['summary']}.",
        "",
        "| env | PPO | steps x envs | human (mean ± std) | sparse (mean ± std) | human - sparse | human solves | "
        "s per training | fork server start s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        def cell(label: str, row: dict[str, Any] = row) -> str:
            score = row[label]
            return "failed" if score["mean"] is None else f"{score['mean']:.1f} ± {score['std']:.1f}"

        solves = {None: "-", True: f"yes (>= {SOLVED.get(row['env_id'])})", False: f"no (< {SOLVED.get(row['env_id'])})"}
        gap = "-" if row["gap"] is None else f"{row['gap']:+.1f}"
        ppo = "compiled" if row["compile"] else "eager"
        if row["compile"] and row["eager_fallbacks"]:
            ppo += f" ({row['eager_fallbacks']} trained eagerly)"
        lines.append(f"| {row['env_id']} | {ppo} | {row['steps']:,} x {row['num_envs']} | {cell('human')} | "
                     f"{cell('sparse')} | {gap} | {solves[row['human_solves']]} | {row['wall_s']:.1f} | "
                     f"{row['start_s']:.1f} |")
    if len(modes) == 2:
        lines += ["", "| env | s per training, eager | compiled | eager / compiled |", "|---|---|---|---|"]
        for eager, fast in zip(rows[::2], rows[1::2], strict=True):
            lines.append(f"| {eager['env_id']} | {eager['wall_s']:.1f} | {fast['wall_s']:.1f} | "
                         f"{eager['wall_s'] / fast['wall_s']:.2f}x |")
    lines += ["", "Reproduce: `python -m benchmarks.search_budgets " + " ".join(
        ["--envs", *args.envs, "--seeds", str(args.seeds), "--compile", args.compile,
         *([] if args.steps is None else ["--steps", str(args.steps)]),
         *([] if args.num_envs is None else ["--num-envs", str(args.num_envs)]),
         *([] if not args.set else ["--set", f"'{json.dumps(args.set)}'"]), "--name", args.name])
        + "`.", ""]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _changed(args: argparse.Namespace) -> str:
    changes = [f"{args.steps:,} steps" if args.steps else "", f"{args.num_envs} envs" if args.num_envs else "",
               f"PPO settings {json.dumps(args.set)}" if args.set else ""]
    changes = [change for change in changes if change]
    return f" with {', '.join(changes)} instead" if changes else ""


def _row(env_id: str, mode: bool, runs: list[dict[str, Any]], start_s: float, budget: Budget) -> dict[str, Any]:
    row: dict[str, Any] = {"env_id": env_id, "compile": mode, "steps": budget.steps, "num_envs": budget.num_envs,
                           "ppo_kwargs": budget.ppo_kwargs, "start_s": start_s,
                           "wall_s": statistics.fmean(r["wall_s"] for r in runs),
                           "eager_fallbacks": sum(bool(r["compile_note"]) for r in runs)}
    for label in ("human", "sparse"):
        group = [r for r in runs if r["label"] == label]
        values = [r["fitness"] for r in group if r["fitness"] is not None]
        row[label] = {"per_seed": [r["fitness"] for r in group],
                      "mean": statistics.fmean(values) if values else None,
                      "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
                      "wall_s": statistics.fmean(r["wall_s"] for r in group),
                      "failures": [r["failure"] for r in group if r["failure"]]}
    human, sparse = row["human"]["mean"], row["sparse"]["mean"]
    row["gap"] = None if human is None or sparse is None else human - sparse
    row["human_solves"] = None if env_id not in SOLVED or human is None else human >= SOLVED[env_id]
    return row


if __name__ == "__main__":
    main()
