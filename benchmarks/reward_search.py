"""Reward-program search per env: the best program's 5-seed fitness against the sparse and human rewards.

For each env, ``rewardlab.llm_reward.search`` runs ``--iterations`` x ``--samples`` candidates with
``--proposer evolve`` (no LLM, the default) or an LLM (``--llm PROVIDER:MODEL``, Eureka
mode), then re-trains the best program with 5 new seeds next to the env's sparse and
human reference rewards (same budget and PPO settings) and reports Eureka's normalised
score ``(best - sparse) / |human - sparse|``. Every candidate is also prescreened in
audit mode (scored on stored trajectories, trained anyway) to measure what
``--prescreen`` would have saved and whether it would have rejected the eventual best.
Envs without a registered description (DeepSea, FruitCollection) are listed as skipped.

``--replay-corpus`` runs the search on the corpus of LLM-style answers in
``tests/support/llm_answers.py`` instead (served by ``--llm replay:``, one iteration of all
of an env's answers): the share of correct answers that reach training, and the best of
them re-trained next to the references; it writes ``reward_search_replay.{json,md}``.

Two suites: ``classic`` (the default: classic control, DeepSea, FruitCollection) writes
``benchmarks/results/reward_search.{json,md}``; ``mujoco`` (the MuJoCo behaviour
``HalfCheetah-Backward-v0``, trained with observation and reward normalisation, its success
rates next to the fitness) writes ``reward_search_mujoco.{json,md}``; both add ``_llm``
with --llm.

    python -m benchmarks.reward_search                       # evolve, the budget of the results file
    python -m benchmarks.reward_search --envs CartPole-v1 --iterations 2 --samples 2
    python -m benchmarks.reward_search --suite mujoco --iterations 4 --samples 4
    python -m benchmarks.reward_search --llm openai:gpt-4o   # key from OPENAI_API_KEY
    python -m benchmarks.reward_search --replay-corpus --envs CartPole-v1 Ant-v5
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
from rewardlab.envs.descriptions import registered_descriptions
from rewardlab.llm_reward.search import SearchConfig, search
from rewardlab.llm_reward.search.report import summary
from rewardlab.llm_reward.search.store import RunStore

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = (
    "llm_reward/programs/",
    "llm_reward/training/checking.py",
    "llm_reward/search/evolve.py",
)

RESULTS = Path(__file__).parent / "results"
ENVS = ("CartPole-v1", "MountainCar-v0", "Acrobot-v1", "Pendulum-v1", "DeepSea-v0", "FruitCollection-v0")
MUJOCO_ENVS = ("HalfCheetah-Backward-v0",)
SUITES = {"classic": ENVS, "mujoco": MUJOCO_ENVS}
TASKS = {
    "CartPole-v1": "Keep the pole balanced upright for as long as possible (500 steps at most).",
    "MountainCar-v0": "Drive the car up the right hill and reach the flag as quickly as possible.",
    "Acrobot-v1": "Swing the tip of the acrobot above the line as quickly as possible.",
    "Pendulum-v1": "Swing the pendulum up and keep it balanced upright with little torque.",
    "HalfCheetah-Backward-v0": "Run backwards until the torso's x position is at most -20 m.",
}
# Env steps per candidate and seed, sized so that the whole benchmark fits about 15 minutes
# on 2 cores; far below what PPO needs to solve MountainCar and Pendulum. The MuJoCo suite
# is sized for about 30 minutes: enough for the human reward to reach the behaviour.
STEPS = {"CartPole-v1": 20_000, "MountainCar-v0": 20_000, "Acrobot-v1": 20_000, "Pendulum-v1": 30_000,
         "HalfCheetah-Backward-v0": 60_000, "Ant-v5": 30_000}
# PPO settings other than agents.PPO's defaults: MuJoCo rewards and observations need normalising.
PPO_KWARGS: dict[str, dict[str, Any]] = {"HalfCheetah-Backward-v0": {"normalize_obs": True, "normalize_reward": True},
                                         "Ant-v5": {"normalize_obs": True, "normalize_reward": True}}
TASKS["Ant-v5"] = "Walk forward (+x) as fast as possible without falling over."
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "support" / "llm_answers.py"


def corpus_answers(env_id: str) -> list[Any]:
    """The corpus's answers for ``env_id`` (loaded from its file: tests are no package)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("llm_answers", CORPUS)
    module = importlib.util.module_from_spec(spec)
    sys.modules["llm_answers"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return [answer for answer in module.ANSWERS if answer.env_id == env_id]


def prescreen_cell(row: dict) -> str:
    """The table cell saying how many programs the prescreen would reject, and whether the best."""
    screen = row["prescreen"] or {}
    cell = (f"{screen.get('rejected', 0)} of {screen.get('scored', 0)} "
            f"({'yes' if screen.get('rejected_eventual_best') else 'no'})")
    if screen.get("inconclusive"):
        cell += f"; {screen['inconclusive']} inconclusive"
    return cell


def run_env(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """One search on ``env_id``; its summary with the wall time."""
    if env_id not in registered_descriptions():
        return {"env_id": env_id, "skipped": "no registered description of its state variables"}
    client = None
    llm, iterations, samples = args.llm, args.iterations, args.samples
    out = Path(args.out) / env_id
    shutil.rmtree(out, ignore_errors=True)
    answers = corpus_answers(env_id) if args.replay_corpus else []
    if args.replay_corpus:
        out.parent.mkdir(parents=True, exist_ok=True)
        corpus_file = out.parent / f"{env_id}.corpus.jsonl"
        corpus_file.write_text("".join(json.dumps({"text": answer.text}) + "\n" for answer in answers))
        llm, iterations, samples = f"replay:{corpus_file}", 1, len(answers)
    if llm:
        from rewardlab.llm_reward.clients import make_client

        client = make_client(llm, args.base_url)
    config = SearchConfig(
        env_id=env_id, task=TASKS.get(env_id, "Maximise the episode return."),
        proposer="llm" if llm else "evolve", llm=llm, iterations=iterations,
        samples=samples, steps=args.steps or STEPS.get(env_id, 20_000), final_seeds=args.final_seeds,
        prescreen="audit", num_envs=8, ppo_kwargs=PPO_KWARGS.get(env_id, {}), num_checkpoints=args.checkpoints,
        eval_episodes=args.eval_episodes, timeout_s=1800.0,
    )  # fmt: skip
    start = time.perf_counter()
    result = search(config, out, client=client, workers=args.workers)
    data = summary(result)
    data["wall_s"] = time.perf_counter() - start
    data["out"] = str(out)
    data["ppo_kwargs"] = config.ppo_kwargs
    data["success"] = success_rates(out, result.best.key if result.best else None)
    data["best_source"] = result.best.source if result.best else None
    if answers:
        trained = {c.key: c.ok for c in result.candidates}
        correct = [f"it00_s{i:02d}" for i, answer in enumerate(answers) if answer.outcome == "trains"]
        data["corpus"] = {
            "answers": len(answers), "correct": len(correct),
            "correct_trained": sum(trained.get(key, False) for key in correct),
            "other_trained": sum(ok for key, ok in trained.items() if key not in correct),
            "outcomes": {answer.name: {"expected": answer.outcome, "trained": trained.get(f"it00_s{i:02d}", False)}
                         for i, answer in enumerate(answers)},
        }
    return data


def success_rates(out: Path, best_key: str | None) -> dict[str, Any]:
    """The success rates of the run (``None`` where the task has no success rule), from its journal.

    :param out: the search's run directory.
    :param best_key: the best candidate.
    :return: ``{"best_in_search": rate, "final": {label: {"mean", "per_seed"}}}``.
    """
    store = RunStore(out)
    evaluation = store.get("evaluation", best_key) if best_key else None
    final: dict[str, dict[str, Any]] = {}
    for record in store.records("final"):
        per_seed = final.setdefault(record["label"], {"per_seed": {}})["per_seed"]
        per_seed[str(record["seed"])] = record["result"]["success_rate"]
    for score in final.values():
        score["per_seed"] = dict(sorted(score["per_seed"].items(), key=lambda item: int(item[0])))
        rates = [rate for rate in score["per_seed"].values() if rate is not None]
        score["mean"] = sum(rates) / len(rates) if rates else None
    return {"best_in_search": evaluation["result"]["success_rate"] if evaluation else None, "final": final}


def _value(value: float | None, digits: str = ".1f") -> str:
    return "-" if value is None else format(value, digits)


def _final(row: dict[str, Any], label: str) -> str:
    score = row["final"].get(label)
    if score is None or score["mean"] is None:
        return "-"
    return f"{score['mean']:.1f} ± {score['std']:.1f}"


def _score_cells(row: dict[str, Any]) -> str:
    """Best in search | best, 5 seeds | human | sparse | normalised score."""
    return (f"{_value(row['best']['fitness'] if row['best'] else None)} | {_final(row, 'best')} | "
            f"{_final(row, 'human')} | {_final(row, 'sparse')} | {_value(row['normalized_score'], '.2f')}")


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
        lines.append(
            f"| {row['env_id']} | {row['steps']:,} | {row['trained']} of {row['candidates']} | "
            f"{_score_cells(row)} | {prescreen_cell(row)} | {row['wall_s']:.0f} |"
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


def replay_markdown(rows: list[dict[str, Any]], args: argparse.Namespace, machine: dict[str, Any],
                    total_s: float, load: dict[str, Any]) -> str:
    """The replay table: how many of the corpus's correct answers trained, and the best's scores."""
    lines = [
        "# Reward-program search replaying the corpus of LLM-style answers",
        "",
        "Every answer of an env in `tests/support/llm_answers.py` (typing signatures, `@torch.jit.script`, "
        "prose around fences, per-state Python, numpy, in-place idioms; unsafe and buggy ones too) served by "
        "`--llm replay:` as one iteration; each trained with rewardlab's PPO in the sandbox, the best "
        f"re-trained with {args.final_seeds} seeds next to the sparse and human references.",
        f"Machine: {machine['summary']}; load average {load['before']} before, {load['after']} after; "
        f"total {total_s / 60:.1f} min.",
        "",
        "| env | steps | answers | correct answers that trained | other answers that trained | best in search "
        "| best, 5 seeds | human, 5 seeds | sparse, 5 seeds | normalised score | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['env_id']} | skipped: {row['skipped']} |" + " |" * 9)
            continue
        corpus = row["corpus"]
        lines.append(
            f"| {row['env_id']} | {row['steps']:,} | {corpus['answers']} | {corpus['correct_trained']} of "
            f"{corpus['correct']} | {corpus['other_trained']} | {_score_cells(row)} | {row['wall_s']:.0f} |"
        )
    lines += ["", f"Reproduce: `python -m benchmarks.reward_search --replay-corpus --envs {' '.join(args.envs)} "
                  f"--final-seeds {args.final_seeds} --workers {args.workers}`."]
    return "\n".join(lines) + "\n"


def _rates(score: dict[str, Any] | None) -> str:
    if score is None or score["mean"] is None:
        return "-"
    per_seed = ", ".join(_value(rate, ".1f") for rate in score["per_seed"].values())
    return f"{score['mean']:.2f} ({per_seed})"


def mujoco_markdown(rows: list[dict[str, Any]], args: argparse.Namespace, machine: dict[str, Any],
                    total_s: float, load: dict[str, list[float]]) -> str:
    """The MuJoCo suite's table: success rates of the best program and the references."""
    proposer = f"LLM {args.llm} (Eureka mode)" if args.llm else "evolve (no LLM)"
    lines = [
        f"# Reward-program search on a MuJoCo behaviour: {proposer}",
        "",
        "HalfCheetah-Backward-v0 (`envs/mujoco/behaviours.py`): run backwards; an episode succeeds on the first "
        "step with the torso's x <= -20 m (it starts within 0.1 m of 0), which ends it with the env's only "
        "reward, 1; otherwise it lasts 1000 steps of 0.05 s. So the fitness (the env's own return of "
        "deterministic evaluation episodes) is the success rate.",
        "",
        f"{args.iterations} iterations x {args.samples} candidates, each trained with rewardlab's PPO (8 envs, "
        "normalised observations and rewards, otherwise rewardlab.agents.PPO's defaults; "
        f"{args.checkpoints} checkpoints of {args.eval_episodes} evaluation episodes) on one seed; the best "
        f"re-trained with {args.final_seeds} new seeds next to the sparse reference (the env's own reward) and "
        "the human one (backward velocity - 0.1 * sum(action**2) + 1 on success) with the same budget; "
        f"{args.workers} evaluations at a time.",
        "",
        "Budget: reduced to the env steps per candidate and seed below (PPO trains HalfCheetah for about 10^6), "
        "sized with a short trial before the run: PPO with these settings on the human reward for 50,000 steps "
        "reached the success rule on 2 of 2 seeds from 40,000 steps on (on the sparse reward, on neither); the "
        f"budget adds a margin. The whole run had 30 minutes and took {total_s / 60:.1f} min. "
        f"Machine: {machine['summary']}, shared with other jobs: load average (1, 5, 15 min) "
        f"{load['before']} before and {load['after']} after, counting this run's own workers.",
        "",
        f"| env | steps | trained | best in search: success | best, {args.final_seeds} seeds: success (per seed) "
        f"| human, {args.final_seeds} seeds | sparse, {args.final_seeds} seeds | normalised score "
        "| prescreen would reject (best?) | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['env_id']} | skipped: {row['skipped']} |" + " |" * 8)
            continue
        rejected = prescreen_cell(row)
        success = row["success"]
        lines.append(
            f"| {row['env_id']} | {row['steps']:,} | {row['trained']} of {row['candidates']} | "
            f"{_value(success['best_in_search'], '.2f')} | {_rates(success['final'].get('best'))} | "
            f"{_rates(success['final'].get('human'))} | {_rates(success['final'].get('sparse'))} | "
            f"{_value(row['normalized_score'], '.2f')} | {rejected} | {row['wall_s']:.0f} |"
        )
    lines += [
        "",
        "Normalised score: Eureka's (best - sparse) / |human - sparse| of the mean fitness (here the mean success "
        "rate); undefined when the two references tie. Prescreen: Kendall tau of each program's return against "
        "the true return on stored trajectories, threshold 0.2; audit mode trains every program anyway.",
    ]
    for row in rows:
        if row.get("best_source"):
            lines += ["", f"Best program for {row['env_id']} ({row['best']['key']}):", "", "```python",
                      row["best_source"].rstrip(), "```"]
    lines += [
        "",
        f"Reproduce: `python -m benchmarks.reward_search --suite mujoco --iterations {args.iterations} --samples "
        f"{args.samples} --final-seeds {args.final_seeds} --workers {args.workers}`.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=sorted(SUITES), default="classic",
                        help="the envs (unless --envs) and the results file")
    parser.add_argument("--envs", nargs="+", help="default: the suite's")
    parser.add_argument("--llm", help="PROVIDER:MODEL (default: the evolve proposer, no LLM)")
    parser.add_argument("--base-url", help="the LLM endpoint (else REWARDLAB_BASE_URL / OPENAI_BASE_URL)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--steps", type=int, help="env steps per candidate (default: per env, see STEPS)")
    parser.add_argument("--final-seeds", type=int, default=5)
    parser.add_argument("--checkpoints", type=int, default=5)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--replay-corpus", action="store_true",
                        help="replay the corpus of LLM-style answers (tests/support/llm_answers.py)")
    parser.add_argument("--out", default="runs/benchmark_reward_search")
    args = parser.parse_args()
    args.envs = args.envs or list(SUITES[args.suite])
    machine = describe_machine()
    load = {"before": [round(value, 2) for value in os.getloadavg()]}
    start = time.perf_counter()
    rows = []
    for env_id in args.envs:
        rows.append(run_env(env_id, args))
        print(json.dumps({k: rows[-1].get(k) for k in ("env_id", "skipped", "normalized_score", "wall_s")}))
    total_s = time.perf_counter() - start
    load["after"] = [round(value, 2) for value in os.getloadavg()]
    name = "reward_search" + ("_mujoco" if args.suite == "mujoco" else "") + ("_llm" if args.llm else "")
    name = "reward_search_replay" if args.replay_corpus else name
    RESULTS.mkdir(exist_ok=True)
    data = {"args": recorded_args(args), "machine": machine, "total_s": total_s, "envs": rows}
    if args.replay_corpus:
        data["load_average"] = load
        text = replay_markdown(rows, args, machine, total_s, load)
    elif args.suite == "mujoco":
        data["load_average"] = load
        text = mujoco_markdown(rows, args, machine, total_s, load)
    else:
        text = markdown(rows, args, machine, total_s)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
