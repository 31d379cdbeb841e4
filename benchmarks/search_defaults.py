"""The reward search as a new user runs it: default budgets, the offline proposers side by side.

For each env, ``rewardlab.llm_reward.search`` runs with the CLI's defaults (5 iterations x 4
samples, the env's default budget from ``rewardlab.llm_reward.search.budgets``, 5 final seeds)
once per proposer: ``evolve`` (structures from the description, signs from the task, Optuna
TPE weights) and ``evolve-random`` (the earlier random-terms baseline), interleaved env by env;
``replay`` serves the corpus of LLM-style answers in ``tests/support/llm_answers.py`` (one
iteration of all of an env's answers, through ``--llm replay:``).
Per search: the best program's 5-seed return next to the human and sparse references
(retrained with the same seeds and budget), Eureka's normalised score, IQM with its bootstrap
interval, the probability that the best beats the human reward, and the wall time. The
candidates train as the search's default has them: on PPO's compiled graphs where the
search's trainings add up to 2M steps or more, as every default search does (``--compile``,
``--no-compile``: always one or the other).

    python -m benchmarks.search_defaults
    python -m benchmarks.search_defaults --envs MountainCar-v0 --proposers evolve
    python -m benchmarks.search_defaults --envs CartPole-v1 --proposers evolve --early-stopping both

``--early-stopping both`` runs each search without and then with early stopping of candidates
(the same seeds, one after the other, env by env), to compare wall time and final score;
``--prescreen off reject`` adds the prescreen (candidates scored on stored trajectories of known
return, the poorly ranking ones sent back untrained) as a second setting, interleaved with the
first, to see which of the two saves time where and what they do together:

    python -m benchmarks.search_defaults --envs CartPole-v1 --proposers evolve --early-stopping both --prescreen off reject

Writes ``benchmarks/results/search_defaults.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import describe_machine, recorded_args
from rewardlab.llm_reward.search import SearchConfig, search
from rewardlab.llm_reward.search.budgets import SOLVED
from rewardlab.llm_reward.search.report import summary

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = (
    "llm_reward/programs/",
    "llm_reward/sandbox/",
    "llm_reward/search/",
    "llm_reward/training/",
    "agents/ppo.py",
    "agents/evaluation.py",
    "envs/classic/",
    "envs/mujoco/",
)

RESULTS = Path(__file__).parent / "results"
CLASSIC = ("CartPole-v1", "MountainCar-v0", "Acrobot-v1", "Pendulum-v1")
TASKS = {
    "CartPole-v1": "Keep the pole balanced upright for as long as possible (500 steps at most).",
    "MountainCar-v0": "Drive the car up the right hill to reach the flag as fast as possible.",
    "Acrobot-v1": "Swing the tip of the lower link above the bar as fast as possible.",
    "Pendulum-v1": "Swing the pendulum up and keep it balanced upright with little torque.",
    "HalfCheetah-Backward-v0": "Run backwards until the torso's x position is at most -20 m.",
    "Hopper-Backward-v0": "Hop backwards, staying upright, until the torso's x position is at most -2 m.",
    "Ant-TurnInPlace-v0": "Turn in place counter-clockwise by a full turn.",
}


def run(env_id: str, proposer: str, args: argparse.Namespace, early_stopping: bool = True,
        prescreen: str = "off") -> dict[str, Any]:
    out = Path(args.out) / (f"{env_id}.{proposer}{'' if early_stopping else '.no_early_stopping'}"
                            f"{'' if prescreen == 'off' else '.prescreen_' + prescreen}")
    shutil.rmtree(out, ignore_errors=True)
    task = TASKS.get(env_id, "Maximise the episode return.")
    client = None
    if proposer == "replay":  # the corpus of LLM-style answers, one iteration, served in order
        from benchmarks.reward_search import corpus_answers
        from rewardlab.llm_reward.clients import make_client

        answers = corpus_answers(env_id)
        out.parent.mkdir(parents=True, exist_ok=True)
        corpus = out.parent / f"{env_id}.corpus.jsonl"
        corpus.write_text("".join(json.dumps({"text": answer.text}) + "\n" for answer in answers))
        client = make_client(f"replay:{corpus}")
        config = SearchConfig(env_id=env_id, task=task, proposer="llm", llm=f"replay:{corpus}", iterations=1,
                              samples=len(answers), final_seeds=args.final_seeds, seed=args.seed,
                              compile=args.compile, early_stopping=early_stopping)
    else:
        config = SearchConfig(env_id=env_id, task=task, proposer=proposer, iterations=args.iterations,
                              samples=args.samples, final_seeds=args.final_seeds, seed=args.seed,
                              compile=args.compile, early_stopping=early_stopping, prescreen=prescreen)
    start = time.perf_counter()
    result = search(config, out, client=client, workers=args.workers)
    data = summary(result)
    data["wall_s"] = time.perf_counter() - start
    data["best_source"] = result.best.source if result.best else None
    data["proposer"] = proposer
    data["compile"] = config.compile
    print(f"{env_id} {proposer} (early stopping {'on' if early_stopping else 'off'}, prescreen {prescreen}): best {data['final'].get('best', {}).get('mean')}, normalised "
          f"{data['normalized_score']}, {data['wall_s']:.0f} s", flush=True)
    return data


def _has_corpus(env_id: str) -> bool:
    from benchmarks.reward_search import corpus_answers

    return bool(corpus_answers(env_id))


def _mean(row: dict[str, Any], label: str) -> str:
    score = row["final"].get(label)
    if not score or score["mean"] is None:
        return "-"
    return f"{score['mean']:.1f} ± {score['std']:.1f}"


def _finalists(row: dict[str, Any]) -> str:
    finalists = row.get("finalists") or []
    if not finalists:
        return "-"
    return f"{len(finalists)} x {len(finalists[0]['seeds'])} seeds"


def _early_stopping(row: dict[str, Any]) -> str:
    data = row.get("early_stopping")
    if not data:
        return "-"  # a run before early stopping existed
    if not data["on"]:
        return "off"
    share = data["steps_saved"] / data["steps_budget"] if data["steps_budget"] else 0.0
    return f"on: {len(data['stopped'])} stopped, {share:.0%} of steps saved"


def _prescreen(row: dict[str, Any]) -> str:
    data = row.get("prescreen")
    if not data:
        return "off"
    return f"{data['mode']}: {data['rejected']} of {data['scored']} rejected"


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, machine: dict[str, Any], total_s: float) -> str:
    lines = [
        "# The reward search at its defaults: evolve vs evolve-random",
        "",
        f"Each search: {args.iterations} iterations x {args.samples} samples (replay: one iteration of the corpus's "
        "answers for the env) at the env's default budget "
        "(`rewardlab.llm_reward.search.budgets`), one training seed per candidate; finalists: the best few "
        "by their training seed trained again with more seeds, the best over all its seeds picked (the "
        "search's default, 3 x 2 seeds; '-': a run before finalists existed); the best program "
        f"re-trained with {args.final_seeds} new seeds next to the human (env reward + our potential-based "
        "shaping) and sparse (the env's own) references, same budget; fitness = the env's own return of 10 "
        f"deterministic episodes. {args.workers} evaluations at a time; total {total_s / 60:.1f} min.",
        f"Machine: {machine['summary']}.",
        "",
        "| env | proposer | PPO | early stopping | prescreen | finalists | trained | steps x envs | best, 5 seeds | solves | human, 5 seeds | sparse, 5 seeds | normalised "
        "score | IQM best [95% CI] | P(best > human) | wall min | candidates/min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        stats = row.get("final_statistics", {})
        best = row["final"].get("best") or {}
        solves = "-"
        if row["env_id"] in SOLVED and best.get("mean") is not None:
            solves = "yes" if best["mean"] >= SOLVED[row["env_id"]] else "no"
        iqm = stats.get("best")
        iqm_cell = "-" if not iqm else f"{iqm['iqm']:.1f} [{iqm['iqm_ci'][0]:.1f}, {iqm['iqm_ci'][1]:.1f}]"
        beats = stats.get("human", {}).get("p_best_beats")
        score = row["normalized_score"]
        rate = row["cost"]["candidates_per_minute"]
        lines.append(
            f"| {row['env_id']} | {row['proposer']} | {'compiled' if row.get('compile') else 'eager'} | "
            f"{_early_stopping(row)} | {_prescreen(row)} | {_finalists(row)} | "
            f"{row['trained']} of {row['candidates']} | "
            f"{row['steps']:,} x {row['num_envs']} | {_mean(row, 'best')} | "
            f"{solves} | {_mean(row, 'human')} | {_mean(row, 'sparse')} | {'-' if score is None else f'{score:.2f}'} | "
            f"{iqm_cell} | {'-' if beats is None else f'{beats:.2f}'} | {row['wall_s'] / 60:.1f} | "
            f"{'-' if rate is None else f'{rate:.1f}'} |"
        )
    lines += [
        "",
        "Normalised score: Eureka's (best - sparse) / |human - sparse| of the 5-seed means; 1 matches the human "
        "reward. Solves: the best reward's 5-seed mean reaches " + ", ".join(f"{k} {v}" for k, v in SOLVED.items())
        + ". P(best > human): the share of seed pairs where the best program's return beats the human reward's "
        "(ties half).",
        "",
        "Reproduce: `python -m benchmarks.search_defaults " + " ".join(
            ["--envs", *args.envs, "--proposers", *args.proposers, *({None: [], True: ["--compile"], False: ["--no-compile"]}[args.compile]),
             *([] if getattr(args, "early_stopping", "on") == "on" else ["--early-stopping", args.early_stopping]),
             *([] if getattr(args, "prescreen", ["off"]) == ["off"] else ["--prescreen", *args.prescreen])])
        + "`.",
        "",
    ]
    return "\n".join(lines)


def merge(args: argparse.Namespace) -> None:
    """Combine results files (``--merge A B``): B's (env, proposer) rows replace A's."""
    rows: dict[tuple[str, str, bool | None, str], dict[str, Any]] = {}
    sources = []
    for name in args.merge:
        data = json.loads((RESULTS / f"{name}.json").read_text())
        sources.append(data)
        for row in data.get("searches", []):
            stopping = (row.get("early_stopping") or {}).get("on")
            rows[(row["env_id"], row["proposer"], stopping, (row.get("prescreen") or {}).get("mode", "off"))] = row
    # a merged file (``runs``) brings the runs it was merged from
    runs = [run for name, data in zip(args.merge, sources) for run in data.get("runs") or [
        {"name": name, "args": data["args"], "total_s": data["total_s"]}]]
    first = sources[0]
    merged = {"merged_from": args.merge, "machine": first["machine"], "runs": runs,
              "total_s": sum(run["total_s"] for run in runs), "searches": list(rows.values())}
    (RESULTS / f"{args.name}.json").write_text(json.dumps(merged, indent=2) + "\n")
    for key in ("iterations", "samples", "final_seeds", "workers"):
        setattr(args, key, runs[0]["args"][key])
    args.envs = list(dict.fromkeys(row["env_id"] for row in rows.values()))
    args.proposers = list(dict.fromkeys(row["proposer"] for row in rows.values()))
    text = markdown(list(rows.values()), args, first["machine"], merged["total_s"])
    listed = "; ".join(f"`{run['name']}` ({', '.join(run['args']['proposers'])}, {run['total_s'] / 60:.0f} min)"
                       for run in runs)
    text = text.replace("\nReproduce:", f"\nRows merged from the runs {listed}, the later replacing the earlier for "
                        "the same env and proposer.\n\nReproduce:")
    (RESULTS / f"{args.name}.md").write_text(text)
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(CLASSIC))
    parser.add_argument("--proposers", nargs="+", default=["evolve", "evolve-random"],
                        help="evolve, evolve-random, replay (the corpus of LLM-style answers, where it has some)")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--final-seeds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="train the candidates with PPO's compiled update, or eagerly (--no-compile); the "
                             "search's default: compiled where its trainings add up to 2M steps")
    parser.add_argument("--early-stopping", choices=("on", "off", "both"), default="on",
                        help="early stopping of candidates (the search's default: on); both: each search "
                             "off, then on")
    parser.add_argument("--prescreen", nargs="+", choices=("off", "reject", "audit"), default=["off"],
                        help="the prescreen setting(s), interleaved with --early-stopping's (the search's "
                             "default: off)")
    parser.add_argument("--out", default="runs/bench_search_defaults")
    parser.add_argument("--name", default="search_defaults", help="results file name")
    parser.add_argument("--merge", nargs="+", metavar="NAME",
                        help="run nothing: combine earlier results files into --name, a later file's "
                             "rows replacing an earlier one's for the same env and proposer")
    args = parser.parse_args()
    if args.merge:
        merge(args)
        return
    machine = describe_machine()  # before: the commit measured is the one the searches start from
    start = time.perf_counter()
    settings = {"on": (True,), "off": (False,), "both": (False, True)}[args.early_stopping]
    rows = [run(env_id, proposer, args, early_stopping, prescreen) for env_id in args.envs
            for proposer in args.proposers if proposer != "replay" or _has_corpus(env_id)
            for prescreen in args.prescreen for early_stopping in settings]
    total_s = time.perf_counter() - start
    RESULTS.mkdir(exist_ok=True)
    data = {"args": recorded_args(args), "machine": machine, "total_s": total_s, "searches": rows}
    (RESULTS / f"{args.name}.json").write_text(json.dumps(data, indent=2) + "\n")
    text = markdown(rows, args, machine, total_s)
    (RESULTS / f"{args.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
