"""Reward-program search per env: the best program's 5-seed fitness against the sparse and human rewards.

For each env, ``llm_reward.search`` runs ``--iterations`` x ``--samples`` candidates with
``--proposer evolve`` (no LLM, the default) or an LLM (``--llm PROVIDER:MODEL``, Eureka
mode), then re-trains the best program with 5 new seeds next to the env's sparse and
human reference rewards (same budget and PPO settings) and reports Eureka's normalised
score ``(best - sparse) / |human - sparse|``. Every candidate is also prescreened in
audit mode (scored on stored trajectories, trained anyway) to measure what
``--prescreen`` would have saved and whether it would have rejected the eventual best.
Envs without a registered description (DeepSea, FruitCollection) are listed as skipped.
Writes ``benchmarks/results/reward_search.{json,md}`` (``reward_search_llm.*`` with --llm).

    python -m benchmarks.reward_search                       # evolve, the budget of the results file
    python -m benchmarks.reward_search --envs CartPole-v1 --iterations 2 --samples 2
    python -m benchmarks.reward_search --llm openai:gpt-4o   # key from OPENAI_API_KEY
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import describe_machine, recorded_args
from llm_reward.descriptions import registered_descriptions
from llm_reward.search import SearchConfig, search
from llm_reward.search.report import summary

RESULTS = Path(__file__).parent / "results"
ENVS = ("CartPole-v1", "MountainCar-v0", "Acrobot-v1", "Pendulum-v1", "DeepSea-v0", "FruitCollection-v0")
TASKS = {
    "CartPole-v1": "Keep the pole balanced upright for as long as possible (500 steps at most).",
    "MountainCar-v0": "Drive the car up the right hill and reach the flag as quickly as possible.",
    "Acrobot-v1": "Swing the tip of the acrobot above the line as quickly as possible.",
    "Pendulum-v1": "Swing the pendulum up and keep it balanced upright with little torque.",
}
# Env steps per candidate and seed, sized so that the whole benchmark fits about 15 minutes
# on 2 cores; far below what PPO needs to solve MountainCar and Pendulum.
STEPS = {"CartPole-v1": 20_000, "MountainCar-v0": 20_000, "Acrobot-v1": 20_000, "Pendulum-v1": 30_000}


def run_env(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """One search on ``env_id``; its summary with the wall time."""
    if env_id not in registered_descriptions():
        return {"env_id": env_id, "skipped": "no registered description of its state variables"}
    client = None
    if args.llm:
        from llm_reward.clients import make_client

        client = make_client(args.llm, args.base_url)
    config = SearchConfig(
        env_id=env_id, task=TASKS.get(env_id, "Maximise the episode return."),
        proposer="llm" if args.llm else "evolve", llm=args.llm, iterations=args.iterations,
        samples=args.samples, steps=args.steps or STEPS.get(env_id, 20_000), final_seeds=args.final_seeds,
        prescreen="audit", num_envs=8, num_checkpoints=args.checkpoints, eval_episodes=args.eval_episodes,
        timeout_s=1800.0,
    )  # fmt: skip
    out = Path(args.out) / env_id
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    result = search(config, out, client=client, workers=args.workers)
    data = summary(result)
    data["wall_s"] = time.perf_counter() - start
    data["out"] = str(out)
    return data


def _value(value: float | None, digits: str = ".1f") -> str:
    return "-" if value is None else format(value, digits)


def _final(row: dict[str, Any], label: str) -> str:
    score = row["final"].get(label)
    if score is None or score["mean"] is None:
        return "-"
    return f"{score['mean']:.1f} ± {score['std']:.1f}"


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, machine: dict[str, Any], total_s: float) -> str:
    proposer = f"LLM {args.llm} (Eureka mode)" if args.llm else "evolve (no LLM)"
    lines = [
        f"# Reward-program search: {proposer}",
        "",
        f"{args.iterations} iterations x {args.samples} candidates per env, each trained with rewardlab's PPO "
        f"(8 envs, {args.checkpoints} checkpoints of {args.eval_episodes} evaluation episodes) on one seed; the "
        f"best re-trained with {args.final_seeds} new seeds next to the sparse (the env's own) and human "
        f"(env reward + potential-based shaping) reference rewards with the same budget; {args.workers} "
        "evaluations at a time. Fitness is the env's own return of deterministic evaluation episodes.",
        "",
        f"Budget: reduced to fit about 15 minutes on this machine (total {total_s / 60:.1f} min): steps per "
        "candidate below, far fewer than PPO needs to solve MountainCar and Pendulum (the shaping benchmark "
        "trains 100k steps), so those rows compare rewards early in training.",
        f"Machine: {machine['summary']}.",
        "",
        "| env | steps | trained | best in search | best, 5 seeds | human, 5 seeds | sparse, 5 seeds "
        "| normalised score | prescreen would reject (best?) | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['env_id']} | skipped: {row['skipped']} |" + " |" * 8)
            continue
        screen = row["prescreen"] or {}
        rejected = (f"{screen.get('rejected', 0)} of {screen.get('scored', 0)} "
                    f"({'yes' if screen.get('rejected_eventual_best') else 'no'})")
        if screen.get("inconclusive"):
            rejected += f"; {screen['inconclusive']} inconclusive"
        lines.append(
            f"| {row['env_id']} | {row['steps']:,} | {row['trained']} of {row['candidates']} | "
            f"{_value(row['best']['fitness'] if row['best'] else None)} | {_final(row, 'best')} | "
            f"{_final(row, 'human')} | {_final(row, 'sparse')} | {_value(row['normalized_score'], '.2f')} | {rejected} | {row['wall_s']:.0f} |"
        )
    lines += [
        "",
        "Normalised score: Eureka's (best - sparse) / |human - sparse| of the 5-seed means; 1 matches the human "
        "reward, 0 the sparse one, undefined when the two references tie. Prescreen: Kendall tau of each "
        "program's return against the true return on stored trajectories (random, and PPO on the human reward), "
        "threshold 0.2; audit mode trains every program anyway.",
        "",
        f"Reproduce: `python -m benchmarks.reward_search --iterations {args.iterations} --samples {args.samples} "
        f"--final-seeds {args.final_seeds} --workers {args.workers}`.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--llm", help="PROVIDER:MODEL (default: the evolve proposer, no LLM)")
    parser.add_argument("--base-url", help="the LLM endpoint (else REWARDLAB_BASE_URL / OPENAI_BASE_URL)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--steps", type=int, help="env steps per candidate (default: per env, see STEPS)")
    parser.add_argument("--final-seeds", type=int, default=5)
    parser.add_argument("--checkpoints", type=int, default=5)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="runs/benchmark_reward_search")
    args = parser.parse_args()
    machine = describe_machine()
    start = time.perf_counter()
    rows = []
    for env_id in args.envs:
        rows.append(run_env(env_id, args))
        print(json.dumps({k: rows[-1].get(k) for k in ("env_id", "skipped", "normalized_score", "wall_s")}))
    total_s = time.perf_counter() - start
    name = "reward_search_llm" if args.llm else "reward_search"
    RESULTS.mkdir(exist_ok=True)
    data = {"args": recorded_args(args), "machine": machine, "total_s": total_s, "envs": rows}
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown(rows, args, machine, total_s))
    print((RESULTS / f"{name}.md").read_text())


if __name__ == "__main__":
    main()
