"""A new user's first command, everything included: ``rewardlab train`` with no flags against
the JAX peer, both from a fresh process and an empty compile cache.

For each env and seed, interleaved, each in a fresh process:

- **ours**: ``rewardlab train --env ENV --algo ppo --seed S --logdir DIR --no-progress``, the
  command the README shows, with an empty Inductor cache (``TORCHINDUCTOR_CACHE_DIR``): the
  wall time of the whole command (interpreter start, imports, checks, training its default
  100,000 steps, the final evaluation, the files it writes) and its true evaluation return.
  Its run trains the whole budget, solved or not.
- **jax**: ``benchmarks/purejaxrl_ppo.py`` (PureJaxRL's algorithm in JAX, its ``tuned``
  config for the env, one thread) with no persistent compile cache, PureJaxRL's default: the
  wall time of the whole process until its first evaluation at or above the threshold,
  less the time those evaluations took (the benchmark's instrument, not the learner's
  work); its compile is included, as a new user pays it.

A run counts as solved when its evaluation reaches the threshold (``ppo_speed.THRESHOLDS``).
Ratio: the JAX peer's median wall time over ours (above 1: ours is ready sooner).

    python -m benchmarks.default_path --jax-python PYTHON_WITH_JAX
    python -m benchmarks.default_path --envs CartPole-v1 --seeds 0 --jax-python PYTHON --out /tmp/dp
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import describe_machine, recorded_args
from benchmarks.ppo_speed import THRESHOLDS

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("rewardlab/app/", "agents/ppo.py", "agents/ppo_config.py", "benchmarks/purejaxrl_ppo.py")

RESULTS = Path(__file__).parent / "results"
#: the tasks whose README command is timed (those of ppo_speed's JAX comparison)
ENVS = ("CartPole-v1", "Acrobot-v1")
ROOT = Path(__file__).resolve().parent.parent


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done


def run_ours(env_id: str, seed: int) -> dict[str, Any]:
    """The README's command in a fresh process with an empty Inductor cache."""
    with tempfile.TemporaryDirectory(prefix="rl-default-") as folder:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(folder) / "inductor")}
        logdir = Path(folder) / "runs"
        rewardlab = str(Path(sys.executable).with_name("rewardlab"))
        seconds, _ = _timed([rewardlab, "train", "--env", env_id, "--algo", "ppo", "--seed", str(seed),
                             "--logdir", str(logdir), "--no-progress"], env)
        metrics = json.loads((logdir / f"seed_{seed}" / "metrics.json").read_text())
        config = json.loads((logdir / f"seed_{seed}" / "config.json").read_text())
    value = metrics.get("eval_return_mean")
    return {"learner": "ours", "env_id": env_id, "seed": seed, "wall_seconds": round(seconds, 2),
            "eval_return": value, "solved": value is not None and value >= THRESHOLDS[env_id],
            "steps": metrics.get("num_timesteps"), "compiled": bool(config.get("compile"))}


def run_jax(env_id: str, seed: int, python: str) -> dict[str, Any]:
    """The JAX peer in a fresh process, no compile cache, until it solves."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seconds, done = _timed([python, "-m", "benchmarks.purejaxrl_ppo", "--env", env_id, "--config", "tuned",
                            "--seed", str(seed), "--threads", "1", "--threshold", str(THRESHOLDS[env_id])], env)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"learner": "jax", "env_id": env_id, "seed": seed,
            "wall_seconds": round(seconds - result["eval_seconds"], 2), "eval_seconds": result["eval_seconds"],
            "eval_return": result["final_eval_return"], "solved": result["solved"],
            "steps": result["steps_to_solve"] or result["steps_trained"],
            "compile_seconds": round(result["warm_up_seconds"], 2)}


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for env_id in dict.fromkeys(run["env_id"] for run in runs):
        medians = {}
        for learner in ("ours", "jax"):
            group = [run for run in runs if run["env_id"] == env_id and run["learner"] == learner]
            if not group:
                continue
            medians[learner] = statistics.median(run["wall_seconds"] for run in group)
            rows.append({"env_id": env_id, "learner": learner, "solved": sum(run["solved"] for run in group),
                         "seeds": len(group), "median_wall_seconds": medians[learner],
                         "median_steps": statistics.median(run["steps"] for run in group),
                         "returns": [run["eval_return"] for run in group]})
        if len(medians) == 2:
            rows[-2]["ratio"] = medians["jax"] / medians["ours"]
    return rows


def write(args: argparse.Namespace, runs: list[dict[str, Any]], load: tuple[float, float], wall: float) -> None:
    machine, out = describe_machine(), args.out
    command = f"--envs {','.join(args.envs)} --seeds {','.join(map(str, args.seeds))}"
    command += " --jax-python PYTHON_WITH_JAX" if args.jax_python else ""
    rows = summarize(runs)
    lines = [
        "# A new user's first command: `rewardlab train` with no flags against the JAX peer, fresh caches",
        "",
        f"Machine: {machine['summary']}. Load average (1 min) {load[0]:.1f} before, {load[1]:.1f} after; "
        f"the whole run took {wall / 60:.1f} min.",
        f"Command: `python -m benchmarks.default_path {command}`",
        "",
        "Ours: the whole command `rewardlab train --env ENV --algo ppo --seed S --logdir DIR --no-progress` "
        "(interpreter start, imports, its default 100,000 steps, eagerly as the default is for a run that "
        "short, the final 10-episode evaluation, its files), an empty Inductor cache. JAX: PureJaxRL's "
        "algorithm (`benchmarks/purejaxrl_ppo.py`, `tuned` config, one thread), the whole process until its "
        "first evaluation at the threshold (interpreter start, imports, its compile with no persistent "
        "cache), less its evaluations' time. Ratio: JAX's median wall time over ours. A run of ours that ends "
        "below the threshold counts at its whole wall time all the same (`solved` says how many did not).",
        "",
        "| env | learner | solved | median wall s, everything | median env steps | ratio | eval returns |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = f"{row['ratio']:.2f}x" if "ratio" in row else ""
        returns = ", ".join(f"{value:.0f}" if value is not None else "-" for value in row["returns"])
        lines.append(f"| {row['env_id']} | {row['learner']} | {row['solved']}/{row['seeds']} | "
                     f"{row['median_wall_seconds']:.2f} | {row['median_steps']:,.0f} | {ratio} | {returns} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"machine": machine, "args": recorded_args(args), "rows": rows, "runs": runs}, indent=2) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=lambda s: s.split(","), default=list(ENVS))
    parser.add_argument("--seeds", type=lambda s: [int(v) for v in s.split(",")], default=[0, 1, 2, 3, 4])
    parser.add_argument("--jax-python", default=None, help="a Python with jax and gymnax (the bench extra)")
    parser.add_argument("--out", type=Path, default=RESULTS / "default_path")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.envs) - set(ENVS))
    if unknown:
        parser.error(f"--envs {unknown}: choose from {', '.join(ENVS)}")
    runs, load, start = [], os.getloadavg()[0], time.perf_counter()
    for env_id in args.envs:
        for seed in args.seeds:
            runs.append(run_ours(env_id, seed))
            print(json.dumps(runs[-1]), flush=True)
            if args.jax_python:
                runs.append(run_jax(env_id, seed, args.jax_python))
                print(json.dumps(runs[-1]), flush=True)
    write(args, runs, (load, os.getloadavg()[0]), time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
