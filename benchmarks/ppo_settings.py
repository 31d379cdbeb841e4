"""Time to solve of our compiled PPO under variants of its settings, interleaved by seed.

Each variant is a JSON object merged into ``benchmarks/ppo_speed.py``'s ``OURS[env_id]``
(``{}``: the settings as they are). For every seed, every variant trains once in turn (so a
change in the machine's load falls on all of them alike), with ``compile=True`` and the
measurement of ``ppo_speed``: training wall-clock until the first deterministic evaluation
(32 episodes, every >= ``--eval-freq`` steps, evaluation time excluded) at or above the
env's threshold, capped at ``--cap`` steps. The table gives per variant the seeds solved, the
median and mean seconds and steps to solve (a run that did not solve counts with its cap's
time and steps, and the median is then marked ``>=``), and the median over the first
variant's. The compile cache is ``$REWARDLAB_CACHE``; each variant's first seed may compile
(its warm-up is not in the time to solve, as in ``ppo_speed``).

    python -m benchmarks.ppo_settings --env Acrobot-v1 --seeds 0-19 \\
        --variants '{}' '{"gae_lambda": 0.8, "n_steps": 16, "learning_rate": 0.005}'

Writes ``benchmarks/results/<--name>.{json,md}`` (default ``ppo_settings_<env>``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.machine import describe_machine, recorded_args
from benchmarks.ppo_speed import OURS, THRESHOLDS, run_ours

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("agents/ppo.py", "agents/base.py", "agents/fused.py", "envs/core.py", "envs/classic/")

RESULTS = Path(__file__).resolve().parent / "results"


def seed_list(text: str) -> list[int]:
    """``"0-19"`` or ``"0,1,2"`` as a list of seeds."""
    if "-" in text:
        first, last = (int(part) for part in text.split("-", 1))
        return list(range(first, last + 1))
    return [int(part) for part in text.split(",")]


def summarize(runs: list[dict], variants: list[str]) -> list[dict]:
    """Per variant: seeds solved, median and mean time and steps to solve (unsolved at their cap)."""
    rows = []
    for variant in variants:
        mine = [r for r in runs if r["variant"] == variant]
        seconds = [r["seconds_to_solve"] if r["solved"] else r["train_seconds"] for r in mine]
        steps = [r["steps_to_solve"] if r["solved"] else r["steps_trained"] for r in mine]
        rows.append({
            "variant": variant,
            "solved": sum(r["solved"] for r in mine),
            "seeds": len(mine),
            "median_seconds": statistics.median(seconds),
            "mean_seconds": statistics.mean(seconds),
            "median_steps": statistics.median(steps),
            "mean_steps": statistics.mean(steps),
        })  # fmt: skip
    for row in rows:
        row["median_over_first"] = row["median_seconds"] / rows[0]["median_seconds"]
    return rows


def markdown(report: dict) -> str:
    env_id = report["env_id"]
    lines = [
        f"# Time to solve {env_id} ({THRESHOLDS[env_id]}) under variants of our PPO's settings",
        "",
        f"Machine: {report['machine']['summary']}; torch threads {report['machine']['torch_threads']}. "
        f"Seeds {report['seeds'][0]}-{report['seeds'][-1]} ({len(report['seeds'])}), every variant "
        f"once per seed in turn; load average (1 min) {report['load_before']:.1f} before, "
        f"{report['load_after']:.1f} after; the run took {report['wall_seconds'] / 60:.0f} min.",
        f"Command: `{report['command']}`",
        "",
        f"Base settings (`OURS[{env_id!r}]` in benchmarks/ppo_speed.py, `compile=True`): "
        f"`{json.dumps(report['base'])}`. Time to solve as in `ppo_speed` (evaluation excluded); a "
        "seed that did not solve counts at its cap (`>=` on the median).",
        "",
        "| variant | solved | median s to solve | mean s | median steps | mean steps | median / first |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["summary"]:
        bound = ">= " if row["solved"] < row["seeds"] else ""
        lines.append(
            f"| `{row['variant']}` | {row['solved']}/{row['seeds']} | {bound}{row['median_seconds']:.3f} | "
            f"{row['mean_seconds']:.3f} | {bound}{row['median_steps']:,.0f} | {row['mean_steps']:,.0f} | "
            f"{row['median_over_first']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="Acrobot-v1", choices=sorted(THRESHOLDS))
    parser.add_argument("--seeds", default="0-9", help="'0-19' or '0,1,2'")
    parser.add_argument(
        "--variants", nargs="+", default=["{}"], help="JSON objects merged into OURS[env]"
    )
    parser.add_argument("--cap", type=int, default=300_000, help="step cap of a run")
    parser.add_argument("--eval-freq", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument(
        "--name", default=None, help="results file name (default ppo_settings_<env>)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    seeds = seed_list(args.seeds)
    variants = []
    for text in args.variants:
        variant = json.loads(text)
        if not isinstance(variant, dict):
            parser.error(
                f"--variants: {text!r} is not a JSON object; write settings like '{{\"n_steps\": 16}}'"
            )
        variants.append(json.dumps(variant, sort_keys=True))

    start, load_before = time.perf_counter(), os.getloadavg()[0]
    runs = []
    for seed in seeds:
        for variant in variants:
            settings = {**OURS[args.env], **json.loads(variant), "compile": True}
            result = run_ours(
                args.env, seed, args.cap, args.eval_freq, THRESHOLDS[args.env], settings
            )
            runs.append({"variant": variant, **result})
        print(f"seed {seed}: " + ", ".join(
            f"{r['seconds_to_solve']:.3f} s" if r["solved"] else "unsolved" for r in runs[-len(variants):]
        ), flush=True)  # fmt: skip

    name = args.name or f"ppo_settings_{args.env.split('-')[0].lower()}"
    report = {
        "env_id": args.env,
        "machine": describe_machine(),
        "command": shlex.join(
            ["python", "-m", "benchmarks.ppo_settings", *(sys.argv[1:] if argv is None else argv)]
        ),
        "args": recorded_args(args),
        "base": OURS[args.env],
        "seeds": seeds,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "wall_seconds": time.perf_counter() - start,
        "summary": summarize(runs, variants),
        "runs": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
