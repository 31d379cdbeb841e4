"""Success rate of rewardlab's PPO on hard MiniGrid tasks, plain and with each intrinsic bonus,
against env steps and against wall time, on the batched MiniGrid (``rewardlab.envs``).

Methods (``--methods``): ``none`` (plain PPO), one bonus (``episodic``, ``rnd``, ``count``,
``e3b``) or a fusion ``<fusion>:<modules>`` (``noveld:rnd,episodic``,
``ngu:rnd,episodic``, ``product:rnd,episodic``, ...). The bonus is learnt by PPO's own
non-episodic intrinsic value head (RND's two streams), weighted ``--coef`` against the env's
reward head (weight 1).

A run's budget is ``--steps`` env steps, so that a seed gives the same figures on a quiet
machine and a loaded one; ``--minutes`` of wall time is only a safety cap (a run it stops
is marked ``stopped: wall``). Each run records its wall time and the load average.
An episode succeeds when its return is positive (MiniGrid pays ``1 - 0.9 * steps /
max_steps`` for the goal, 0 otherwise). Two measures, neither biased towards short episodes
(the last episodes to *end* are mostly the successful ones when failures run to the time
limit):

- the curve: the success rate of the training episodes (the policy's own, stochastic)
  grouped by the env step at which they *started*, in bins of ``--bin`` steps, with the
  wall time at which the bin's steps were taken; only bins whose every episode has ended;
- ``final_success``: after training, one fresh episode in each of ``--num-envs`` envs of
  new layouts (another seed), the trained policy sampling its actions as in training.

Each run appends one JSON line to ``--runs`` (default
``benchmarks/results/intrinsic_minigrid_runs.jsonl``: the machine, the command, the
settings and the curve), so that runs can be spread over several processes and sessions;
``--summarize`` gathers them into ``benchmarks/results/intrinsic_minigrid.{json,md}``. The
JSON keeps every run, so ``--summarize`` without a runs file rewrites the table from it::

    python -m benchmarks.intrinsic_minigrid --tasks MiniGrid-DoorKey-16x16-v0 \\
        --methods 'none;episodic' --seeds 0,1,2
    python -m benchmarks.intrinsic_minigrid --summarize
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.machine import describe_machine
from rewardlab import envs, intrinsic
from rewardlab.agents import PPO
from rewardlab.app.presets import MINIGRID_BONUS
from rewardlab.envs.core import BatchedWrapper

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("intrinsic/", "agents/ppo.py", "envs/batched_minigrid/")

RESULTS = Path(__file__).parent / "results"
RUNS = RESULTS / "intrinsic_minigrid_runs.jsonl"
SUMMARY = RESULTS / "intrinsic_minigrid"
TASKS = (
    "MiniGrid-DoorKey-16x16-v0",
    "MiniGrid-KeyCorridorS4R3-v0",
    "MiniGrid-MultiRoom-N6-v0",
    "MiniGrid-ObstructedMaze-1Dlhb-v0",
)
METHODS = ("none", "episodic", "noveld:rnd,episodic")
#: PPO's settings, the run settings and each task's budget and bonus weight are the preset that
#: ``rewardlab train --env MiniGrid-... --intrinsic ...`` trains with: one source for both
PPO_SETTINGS: dict[str, Any] = {**MINIGRID_BONUS.hyperparameters, "compile": MINIGRID_BONUS.settings["compile"]}


class EpisodeLog(BatchedWrapper):
    """Records, for every episode that ends, the env step at which it started and whether it
    reached the goal (a positive extrinsic reward at its last step)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.steps = 0
        self.start = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        self.starts: list[torch.Tensor] = []
        self.successes: list[torch.Tensor] = []

    def reset(self, **kwargs: Any) -> Any:
        self.start.fill_(self.steps)
        return self.env.reset(**kwargs)

    def step(self, actions: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self.steps += self.env.num_envs
        ended = terminated | truncated
        if bool(ended.any()):
            self.starts.append(self.start[ended].clone())
            self.successes.append(info["reward_components"]["extrinsic"][ended] > 0)
            self.start[ended] = self.steps
        return obs, reward, terminated, truncated, info


def success_by_start(log: EpisodeLog, bin_steps: int, horizon: int,
                     times: list[list[float]]) -> list[list[float]]:  # fmt: skip
    """``[bin end (env steps), wall s at that step, success rate, episodes]`` per complete bin.

    :param log: the run's episode log
    :param bin_steps: env steps per bin
    :param horizon: env steps after which every episode started in a bin has ended
    :param times: ``[env steps, wall s]`` after each rollout
    """
    if not log.starts:
        return []
    starts = torch.cat(log.starts).cpu().numpy()
    successes = torch.cat(log.successes).cpu().numpy()
    curve = []
    for end in range(bin_steps, log.steps - horizon + 1, bin_steps):
        chosen = (starts >= end - bin_steps) & (starts < end)
        if chosen.any():
            wall = next((t for steps, t in times if steps >= end), times[-1][1])
            curve.append([end, wall, round(float(successes[chosen].mean()), 4), int(chosen.sum())])
    return curve


def evaluate(model: PPO, task: str, num_envs: int, seed: int) -> float:
    """The success rate of one fresh episode per env (new layouts), actions sampled.

    :param model: the trained model
    :param task: the MiniGrid id
    :param num_envs: episodes to play, one per env
    :param seed: seeds the env's layouts and resets
    """
    env = envs.make(task, num_envs=num_envs, seed=seed)
    obs, _ = env.reset(seed=seed)
    finished = torch.zeros(num_envs, dtype=torch.bool)
    succeeded = torch.zeros(num_envs, dtype=torch.bool)
    while not bool(finished.all()):
        actions, _ = model.predict(obs, deterministic=False)
        obs, reward, terminated, truncated, info = env.step(actions)
        ended = (terminated | truncated) & ~finished
        succeeded |= ended & (info["reward_components"]["extrinsic"] > 0)
        finished |= ended
    return float(succeeded.float().mean())


def parse_method(method: str) -> tuple[str | None, str]:
    """``(modules, fusion)`` of a method name: ``none``, ``rnd`` or ``noveld:rnd,episodic``."""
    if method == "none":
        return None, "sum"
    if ":" in method:
        fusion, modules = method.split(":", 1)
        if fusion not in intrinsic.FUSIONS:
            raise ValueError(
                f"unknown fusion {fusion!r} in method {method!r}; choose from {intrinsic.FUSIONS}"
            )
        return modules, fusion
    return method, "sum"


def run(task: str, method: str, seed: int, *, num_envs: int, minutes: float, steps: int,
        coef: float, bin_steps: int, settings: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Train one PPO run and return its record (settings, curve, final success rate).

    :param task: a batched MiniGrid id
    :param method: see the module docstring
    :param seed: seeds the env's layouts and resets, the networks and the bonus
    :param num_envs: envs stepped in parallel
    :param minutes: the wall-time cap
    :param steps: the env-step budget
    :param coef: the intrinsic head's advantage weight
    :param bin_steps: env steps per bin of the curve
    :param settings: PPO's hyperparameters
    """
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    env = EpisodeLog(envs.make(task, num_envs=num_envs, seed=seed))
    made_env = time.perf_counter() - started
    modules, fusion = parse_method(method)
    module = None
    if modules is not None:
        module = intrinsic.make(modules, env.single_observation_space, env.single_action_space,
                                fusion=fusion, seed=seed)  # fmt: skip
    model = PPO(env, seed=seed, intrinsic=module, intrinsic_coef=coef, **settings)
    times: list[list[float]] = []
    deadline = started + 60.0 * minutes

    def callback(local: dict[str, Any]) -> bool:
        times.append([model.num_timesteps, round(time.perf_counter() - started, 2)])
        return time.perf_counter() < deadline

    model.learn(steps, callback=callback)
    wall = time.perf_counter() - started
    horizon = env.unwrapped.max_episode_steps * num_envs
    curve = success_by_start(env, bin_steps, horizon, times)
    final = evaluate(model, task, num_envs, seed + 10_000)
    return {
        "task": task,
        "method": method,
        "seed": seed,
        "num_envs": num_envs,
        "coef": coef,
        "settings": settings,
        "budget_steps": steps,
        "cap_minutes": minutes,
        "stopped": "steps" if model.num_timesteps >= steps else "wall",
        "env_steps": model.num_timesteps,
        "wall_s": round(wall, 1),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "env_made_s": round(made_env, 1),
        "steps_per_s": round(model.num_timesteps / wall),
        "final_success": final,
        "curve": curve,
    }


def load_runs(path: Path, out: Path = SUMMARY) -> list[dict[str, Any]]:
    """The recorded runs: those kept in the summary ``out.json``, then the JSON lines of
    ``path`` that it does not hold yet (new runs append there, and a summary keeps them all).

    :param path: the runs, one JSON line each
    :param out: the summary's path, without suffix
    """
    kept = out.with_suffix(".json")
    runs = json.loads(kept.read_text())["runs"] if kept.exists() else []
    known = {json.dumps(run, sort_keys=True) for run in runs}
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.strip() and json.dumps(json.loads(line), sort_keys=True) not in known:
            runs.append(json.loads(line))
            known.add(json.dumps(runs[-1], sort_keys=True))
    if not runs:
        raise FileNotFoundError(f"no runs: neither {path} nor {kept} holds any; run a task first")
    return runs


def budget(record: dict[str, Any]) -> str:
    """A run's budget as the table prints it: env steps (M), or wall minutes for runs made
    before the budget was counted in steps."""
    if "budget_steps" in record:
        return f"{record['budget_steps'] / 1e6:g}M steps"
    return "wall time"


def summarize(path: Path = RUNS, out: Path = SUMMARY, note: str = "") -> str:
    """Write every recorded run (``out.json``) and their summary table (``out.md``); returns
    the Markdown.

    :param path: the runs, one JSON line each (see :func:`load_runs`)
    :param out: the result's path, without suffix
    :param note: a paragraph to print under the table (what the runs alone do not say)
    """
    records = load_runs(path, out)
    lines = [
        "# Intrinsic bonuses on hard MiniGrid tasks (batched MiniGrid, rewardlab PPO)",
        "",
        "Written by `python -m benchmarks.intrinsic_minigrid --summarize` from "
        "`intrinsic_minigrid_runs.jsonl` (one line per run, with its command and machine).",
        "Final success: one fresh episode in each of the run's envs (new layouts) after "
        "training, actions sampled. `first >= 0.9`: the env steps (M) and wall minutes at the "
        "end of the first bin of training episodes, grouped by the step they started at, "
        "whose success rate reached 0.9 (`-`: none did).",
        "",
        "| task | method | coef | budget | seeds | final success per seed | seeds >= 0.9 | "
        "env steps (M) | wall (min) | steps/s (k) | first >= 0.9 (M steps / min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["task"], r["method"], r["coef"], budget(r)), []).append(r)
    if len({json.dumps(r["settings"], sort_keys=True) for r in records}) > 1:
        raise ValueError(f"{path} holds runs with different PPO settings; summarise them apart")
    for (task, method, coef, spent), runs in sorted(groups.items()):
        runs.sort(key=lambda r: r["seed"])
        finals = " ".join(f"{r['final_success']:.2f}" for r in runs)
        solved = sum(r["final_success"] >= 0.9 for r in runs)
        firsts = []
        for r in runs:
            hit = next((point for point in r["curve"] if point[2] >= 0.9), None)
            firsts.append("-" if hit is None else f"{hit[0] / 1e6:.1f}/{hit[1] / 60:.1f}")
        lines.append(
            f"| {task.removeprefix('MiniGrid-')} | {method} | {coef} | {spent} | {len(runs)} | "
            f"{finals} | {solved}/{len(runs)} | "
            f"{np.mean([r['env_steps'] for r in runs]) / 1e6:.1f} | "
            f"{np.mean([r['wall_s'] for r in runs]) / 60:.1f} | "
            f"{np.mean([r['steps_per_s'] for r in runs]) / 1e3:.1f} | {' '.join(firsts)} |"
        )
    if note:
        lines += ["", note]
    machines = sorted({r["machine"]["summary"] for r in records})
    commits = sorted({r["machine"]["commit"] for r in records})
    lines += ["", f"PPO settings: `{json.dumps(records[0]['settings'])}`, "
              f"{records[0]['num_envs']} envs; the bonus's value head non-episodic, weight `coef`.",
              "", "Machines: " + "; ".join(machines), "", "Commits: " + ", ".join(commits),
              "", "Commands:", ""]  # fmt: skip
    lines += [f"    {c}" for c in sorted({r["command"] for r in records})]
    text = "\n".join(lines) + "\n"
    out.with_suffix(".md").write_text(text)
    latest = max(records, key=lambda r: r["machine"]["date"])["machine"]
    result = {"machine": latest, "note": note, "runs": records}
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS[:1]))
    parser.add_argument(
        "--methods",
        default=";".join(METHODS),
        help="methods separated by ';' (a fusion's modules by ',')",
    )
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--num-envs", type=int, default=MINIGRID_BONUS.settings["num_envs"])
    parser.add_argument("--steps", type=int,
                        help="env steps per run (default: the task's budget in the preset, else 5M)")
    parser.add_argument(
        "--minutes",
        type=float,
        default=15.0,
        help="wall-time cap per run (a safety stop; the budget is --steps)",
    )
    parser.add_argument("--coef", type=float, help="the bonus's weight (default: the task's in the preset)")
    parser.add_argument("--bin", type=int, default=500_000, help="env steps per bin of the curve")
    parser.add_argument("--set", default="{}", help="PPO settings to change, as JSON")
    parser.add_argument(
        "--runs", type=Path, default=RUNS, help="the JSON-lines file runs append to"
    )
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--out", type=Path, default=SUMMARY,
                        help="with --summarize: the result's path, without suffix")
    parser.add_argument("--note", default="", help="with --summarize: a paragraph under the table")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(args.runs, args.out, note=args.note))
        return
    torch.set_num_threads(1)
    settings = {**PPO_SETTINGS, **json.loads(args.set)}
    command = "python -m benchmarks.intrinsic_minigrid " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    machine = describe_machine()
    for task in args.tasks.split(","):
        for method in args.methods.split(";"):
            for seed in (int(s) for s in args.seeds.split(",")):
                preset = MINIGRID_BONUS.settings_for(task)
                steps = args.steps if args.steps is not None else preset.get("steps", 5_000_000)
                coef = args.coef if args.coef is not None else preset["intrinsic_coef"]
                record = run(task, method, seed, num_envs=args.num_envs, minutes=args.minutes,
                             steps=steps, coef=coef, bin_steps=args.bin, settings=settings)  # fmt: skip
                record |= {"command": command, "machine": machine}
                with args.runs.open("a") as f:
                    f.write(json.dumps(record) + "\n")
                print(f"{task} {method} seed {seed}: final success {record['final_success']:.2f} "
                      f"after {record['env_steps'] / 1e6:.2f}M steps in {record['wall_s'] / 60:.1f} "
                      f"min ({record['steps_per_s']} steps/s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
