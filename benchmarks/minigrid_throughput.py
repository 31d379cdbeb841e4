"""Steps per second of the batched MiniGrid next to MiniGrid's own envs in Gymnasium's vector envs, in one run.

For every task and batch size this times, with random actions drawn before the clock starts:

- ours, eager (``rewardlab.envs.make(env_id, num_envs)``) and compiled (``compile=True``),
  on ``--device`` (CPU or CUDA, the same code);
- MiniGrid's own env with the same observation (the flat ``7 x 7 x 3`` view,
  ``rewardlab.envs.minigrid.make_minigrid``) in Gymnasium's ``SyncVectorEnv`` (up to
  ``--sync-max`` envs: its rate does not depend on the batch, and 16384 MiniGrid envs take
  minutes a step) and ``AsyncVectorEnv`` (one process per env, up to ``--async-max`` envs).

It also times what our envs do outside the step: making the layout pool with MiniGrid's
generator (``layouts`` resets, once per env object) and compiling the step. The
implementations are timed in turns, ``--repeats`` times each, and the median is reported,
so that load from other processes falls on all of them alike. Results go to
``benchmarks/results/minigrid_throughput.json`` and ``.md``.

Usage::

    python -m benchmarks.minigrid_throughput                     # CPU, 1 to 16384 envs
    python -m benchmarks.minigrid_throughput --num-envs 4096 --no-compile
    python -m benchmarks.minigrid_throughput --device cuda --num-envs 4096 16384 65536
    python -m benchmarks.minigrid_throughput --envs my_module:MiniGrid-MyTask-v0 MiniGrid-DoorKey-8x8-v0
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium
import minigrid
import numpy as np
import torch
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from benchmarks.env_throughput import (
    ACTION_BATCHES,
    Timer,
    numpy_actions,
    rate,
    ratio,
    time_in_turns,
)
from benchmarks.machine import describe_machine, recorded_args
from rewardlab import envs
from rewardlab.envs.minigrid import make_minigrid

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("envs/batched_minigrid/", "envs/core.py", "rewardlab/common/compiled.py")

TASKS = ["MiniGrid-DoorKey-16x16-v0", "MiniGrid-KeyCorridorS4R3-v0", "MiniGrid-MultiRoom-N6-v0"]
NUM_ENVS = [1, 64, 4096, 16384]
RESULTS = Path(__file__).parent / "results" / "minigrid_throughput"


def our_env(env_id: str, num_envs: int, device: torch.device, layouts: int, compile: bool) -> tuple[Any, float]:
    """Our batched env (with validate_actions off, as a training loop runs it) and the
    seconds that making it took (the layout pool)."""
    start = time.perf_counter()
    env = envs.make(
        env_id, num_envs, device=device, seed=0, layouts=layouts, compile=compile, validate_actions=False
    )
    return env, time.perf_counter() - start


def our_timer(env: Any, name: str) -> tuple[Timer, float]:
    """A timer for one of our envs, and the seconds its first step took (the compile, if any)."""
    env.reset(seed=0)
    generator = torch.Generator(device=env.device).manual_seed(1)
    actions = [
        torch.randint(7, (env.num_envs,), generator=generator, device=env.device)
        for _ in range(ACTION_BATCHES)
    ]
    synchronize = torch.cuda.synchronize if env.device.type == "cuda" else (lambda: None)
    start = time.perf_counter()
    env.step(actions[0])
    synchronize()
    first_step = time.perf_counter() - start
    return Timer(name, env.num_envs, lambda i: env.step(actions[i]), synchronize), first_step


def compiled_agreement(eager: Any, compiled: Any, steps: int = 100) -> int:
    """Step both from the same seed with the same actions; the number of steps on which any
    observation, reward or flag differs (the compiled step is the same integer arithmetic)."""
    eager.reset(seed=3)
    compiled.reset(seed=3)
    generator = torch.Generator(device=eager.device).manual_seed(2)
    differing = 0
    for _ in range(steps):
        actions = torch.randint(7, (eager.num_envs,), generator=generator, device=eager.device)
        expected, got = eager.step(actions), compiled.step(actions)
        differing += int(not all(torch.equal(a, b) for a, b in zip(expected[:4], got[:4])))
    return differing


def minigrid_timer(env_id: str, num_envs: int, kind: str) -> Timer:
    """A timer for ``num_envs`` of MiniGrid's own envs in Gymnasium's sync or async vector env."""
    vector = SyncVectorEnv if kind == "sync" else AsyncVectorEnv
    vec = vector([lambda: make_minigrid(env_id)] * num_envs)
    vec.reset(seed=0)
    actions = numpy_actions(vec.single_action_space, num_envs, seed=1)
    timer = Timer(f"minigrid {kind}", num_envs, lambda i: vec.step(actions[i]))
    timer.close = vec.close  # type: ignore[attr-defined]
    return timer


def benchmark(env_id: str, num_envs: int, device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    """Time every implementation of ``env_id`` at ``num_envs``, in turns."""
    row: dict[str, Any] = {"env_id": env_id, "num_envs": num_envs}
    eager_env, row["layout_pool_seconds"] = our_env(env_id, num_envs, device, args.layouts, False)
    timers = [our_timer(eager_env, "ours, eager")[0]]
    if not args.no_compile and num_envs in args.compile_num_envs:
        compiled_env, _ = our_env(env_id, num_envs, device, args.layouts, True)
        timer, row["compile_seconds"] = our_timer(compiled_env, "ours, compiled")
        timers.append(timer)
        row["compiled_steps_differing"] = compiled_agreement(eager_env, compiled_env)
    if num_envs <= args.sync_max:
        timers.append(minigrid_timer(env_id, num_envs, "sync"))
    if num_envs <= args.async_max:
        timers.append(minigrid_timer(env_id, num_envs, "async"))
    row.update(time_in_turns(timers, args.repeats, args.seconds))
    return row


def markdown(rows: list[dict[str, Any]], machine: dict[str, Any], args: argparse.Namespace) -> str:
    """The results as a markdown table per task."""
    lines = [
        "# Batched MiniGrid throughput",
        "",
        "Env steps per second (batch size x calls) with random actions drawn before timing; "
        "median of the repeats, implementations timed in turns. `minigrid sync` and `minigrid "
        "async` are MiniGrid's own envs (flat 7 x 7 x 3 view) in Gymnasium's `SyncVectorEnv` "
        f"(up to {args.sync_max} envs) and `AsyncVectorEnv` (one process per env, up to "
        f"{args.async_max}); `vs sync` divides by the sync rate at the same batch size, or at "
        "the largest batch it was timed at (MiniGrid steps one env at a time in Python, so its "
        "rate does not grow with the batch). `pool (s)` is making our env: "
        f"{args.layouts} layouts from MiniGrid's own generator, once per env object. "
        "`compile (s)` is the first compiled step, compiling into the run's empty cache; "
        "`compiled = eager` counts the steps of 100 (same seed, same actions) on which any "
        "observation, reward or flag differed. The machine is shared: other processes load "
        "it, so absolute rates move between runs (see the load averages); the ratios come "
        "from implementations timed in turns.",
        "",
        f"Machine: {machine['summary']}; torch threads {machine['torch_threads']}, device "
        f"{machine['device']}; minigrid {machine['minigrid']}, gymnasium {machine['gymnasium']}; "
        f"commit {machine['commit']}, {machine['date']}; load average "
        f"{machine['load_average_before']} before, {machine['load_average_after']} after.",
        "",
    ]
    for env_id in dict.fromkeys(row["env_id"] for row in rows):
        env_rows = [row for row in rows if row["env_id"] == env_id]
        lines += [
            f"## {env_id}",
            "",
            "| envs | ours eager | ours compiled | minigrid sync | minigrid async | eager vs sync "
            "| compiled vs sync | pool (s) | compile (s) | compiled = eager |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        sync_rate = None
        for row in env_rows:
            rates = row["steps_per_second"]
            sync_rate = rates.get("minigrid sync", sync_rate)
            eager, compiled = rates.get("ours, eager"), rates.get("ours, compiled")
            compile_seconds = row.get("compile_seconds")
            differing = row.get("compiled_steps_differing")
            lines.append(
                f"| {row['num_envs']} | {rate(eager)} | {rate(compiled)} "
                f"| {rate(rates.get('minigrid sync'))} | {rate(rates.get('minigrid async'))} "
                f"| {ratio(eager, sync_rate)} | {ratio(compiled, sync_rate)} "
                f"| {row['layout_pool_seconds']:.1f} "
                f"| {'–' if compile_seconds is None else f'{compile_seconds:.1f}'} "
                f"| {'–' if differing is None else ('yes' if differing == 0 else f'{differing} steps differ')} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--envs", nargs="+", default=TASKS,
        help="MiniGrid ids; a user's MiniGridEnv as module:MiniGrid-Name-v0 (its module importable)",
    )
    parser.add_argument("--num-envs", nargs="+", type=int, default=NUM_ENVS)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled variant")
    parser.add_argument(
        "--compile-num-envs", nargs="+", type=int, default=[4096, 16384],
        help="batch sizes that also time the compiled step (each compiles once, tens of seconds)",
    )
    parser.add_argument("--layouts", type=int, default=4096, help="layouts in our envs' pools")
    parser.add_argument("--sync-max", type=int, default=4096, help="largest SyncVectorEnv timed")
    parser.add_argument("--async-max", type=int, default=64, help="largest AsyncVectorEnv timed")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5, help="per timing")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="the process's torch threads (default 1); rewardlab's envs step at their own "
        "threads setting, 1, whatever this is (benchmarks/threads_under_load.py times both)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS, help="results path, no suffix")
    args = parser.parse_args(argv)
    # compile=True's library cache, empty for this run: "compile (s)" is a compile
    os.environ["REWARDLAB_CACHE"] = tempfile.mkdtemp(prefix="minigrid-throughput-cache-")
    torch.set_num_threads(args.threads)
    device = envs.core.resolve_device(args.device)
    machine = describe_machine() | {
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
        "minigrid": minigrid.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": np.__version__,
        "load_average_before": [round(load, 2) for load in os.getloadavg()],
    }
    rows = []
    started = time.perf_counter()
    for env_id in args.envs:
        for count in args.num_envs:
            row = benchmark(env_id, count, device, args)
            rows.append(row)
            print(
                f"{env_id:28s} {count:6d} envs  "
                + "  ".join(f"{name}: {rate(value)}" for name, value in row["steps_per_second"].items()),
                flush=True,
            )
    machine["load_average_after"] = [round(load, 2) for load in os.getloadavg()]
    machine["wall_seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine, "settings": recorded_args(args), "rows": rows}
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rows, machine, args))
    print(markdown(rows, machine, args))


if __name__ == "__main__":
    main()
