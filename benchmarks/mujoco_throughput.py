"""Env steps per second of the batched MuJoCo tasks next to Gymnasium's vector envs, in one run.

For every task and number of envs this times full ``step`` calls (physics, observations,
rewards, termination and resets), with random actions drawn before the clock starts, of:

- ours: ``rewardlab.envs.make(env_id, num_envs, backend="cpu")``, ``mujoco.batch`` on every CPU,
  torch tensors out;
- the raw physics of that same env: ``env.backend.batch.step(nstep=frame_skip)`` and
  nothing else (no observations, rewards or resets), a rough ceiling for ours;
- Gymnasium's ``SyncVectorEnv`` of ``gymnasium.make(env_id)`` (with its default wrappers);
- Gymnasium's ``AsyncVectorEnv``, one worker process per env, up to ``--async-max`` envs
  (see ``ASYNC_LEFT_OUT`` for why not beyond).

The implementations are timed in turns, ``--repeats`` times each, and the median is
reported, so that load from other processes falls on all of them alike. While ours is
timed, the seconds its steps spend inside ``Batch.step`` are added up as well: the rest is
the cost of our torch layer, reported as its overhead over the physics it ran. Results go
to ``benchmarks/results/mujoco_throughput.json`` and ``.md``.

Usage::

    python -m benchmarks.mujoco_throughput                  # everything (about 3 minutes)
    python -m benchmarks.mujoco_throughput --quick          # HalfCheetah-v5 only, shorter
    python -m benchmarks.mujoco_throughput --envs Ant-v5 --num-envs 64 256 --async-max 0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium
import mujoco
import numpy as np
import torch

from benchmarks.env_throughput import Timer, numpy_actions, rate, ratio
from benchmarks.machine import describe_machine, recorded_args
from rewardlab import envs

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("envs/mujoco/", "envs/core.py")

MUJOCO_IDS = ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "InvertedPendulum-v5"]
NUM_ENVS = [64, 1024]
ASYNC_MAX = 64
ASYNC_LEFT_OUT = (
    "AsyncVectorEnv runs one worker process per env. At 1024 envs on this 2-core machine a "
    "one-off probe (HalfCheetah-v5) took 52 s to start and 12.5 s to close its 1024 "
    "processes, held 7.2 GiB (7 MiB private per worker), stepped at 0.9k steps/s (below its "
    "own 4.1k at 64 envs and far below SyncVectorEnv) and left the load average at 40 for "
    "the next minutes; a minute of setup per task for a number that cannot be Gymnasium's "
    "best, so it is timed up to --async-max envs only"
)
RESULTS = Path(__file__).parent / "results" / "mujoco_throughput"


class PhysicsClock:
    """Stands in for a ``mujoco.batch.Batch`` and adds up the calls to and seconds in its ``step``.

    :param batch: the batch whose ``step`` is timed; everything else is passed through
    """

    def __init__(self, batch: Any):
        self.batch = batch
        self.calls = 0
        self.seconds = 0.0

    def step(self, *args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        self.batch.step(*args, **kwargs)
        self.seconds += time.perf_counter() - start
        self.calls += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.batch, name)


def our_timers(env_id: str, num_envs: int) -> tuple[Timer, Timer, PhysicsClock, Any]:
    """Timers for our env's ``step`` and for its bare ``Batch.step``, the clock inside it, the env."""
    env = envs.make(env_id, num_envs, seed=0, backend="cpu")
    env.reset(seed=0)
    actions = [
        torch.as_tensor(batch) for batch in numpy_actions(env.single_action_space, num_envs, 1)
    ]
    batch = env.backend.batch
    clock = PhysicsClock(batch)
    env.backend.batch = clock
    ours = Timer("ours", num_envs, lambda i: env.step(actions[i]))
    raw = Timer("raw Batch.step", num_envs, lambda i: batch.step(nstep=env.frame_skip))
    return ours, raw, clock, env


def gymnasium_timer(env_id: str, num_envs: int, kind: str) -> tuple[Timer, Any, float]:
    """A timer for Gymnasium's ``kind`` (``"sync"``, ``"async"``) vector env, it, and its start seconds."""
    start = time.perf_counter()
    make = gymnasium.vector.SyncVectorEnv if kind == "sync" else gymnasium.vector.AsyncVectorEnv
    vec = make([lambda: gymnasium.make(env_id)] * num_envs)
    vec.reset(seed=0)
    seconds = time.perf_counter() - start
    actions = numpy_actions(vec.single_action_space, num_envs, seed=1)
    name = "gymnasium SyncVectorEnv" if kind == "sync" else "gymnasium AsyncVectorEnv"
    return Timer(name, num_envs, lambda i: vec.step(actions[i])), vec, seconds


def benchmark(
    env_id: str, num_envs: int, async_max: int, repeats: int, min_seconds: float
) -> dict[str, Any]:
    """Time every implementation of ``env_id`` at ``num_envs``, in turns."""
    row: dict[str, Any] = {"env_id": env_id, "num_envs": num_envs, "start_seconds": {}}
    ours, raw, clock, env = our_timers(env_id, num_envs)
    timers = [ours, raw]
    vector_envs = []
    for kind in ("sync", "async"):
        if kind == "async" and num_envs > async_max:
            row["async_left_out"] = f"num_envs {num_envs} > --async-max {async_max}"
            continue
        timer, vec, row["start_seconds"][timer.name] = gymnasium_timer(env_id, num_envs, kind)
        timers.append(timer)
        vector_envs.append(vec)
    for timer in timers:
        timer.run(min_seconds=0.1, min_steps=2)  # warm-up
        timer.rates.clear()
    physics_rates = []
    for _ in range(repeats):
        for timer in timers:
            clock.calls, clock.seconds = 0, 0.0
            timer.run(min_seconds)
            if timer is ours:
                physics_rates.append(clock.calls * num_envs / clock.seconds)
    for vec in vector_envs:
        vec.close()
    env.close()
    rates = {timer.name: timer.median for timer in timers}
    gymnasium_rates = {name: value for name, value in rates.items() if name.startswith("gym")}
    best = max(gymnasium_rates, key=gymnasium_rates.get)
    physics_rate = statistics.median(physics_rates)
    row.update(
        steps_per_second=rates,
        all_rates={timer.name: timer.rates for timer in timers},
        best_gymnasium=best,
        ours_vs_best_gymnasium=rates["ours"] / gymnasium_rates[best],
        physics_rate_within_ours=physics_rate,
        all_physics_rates_within_ours=physics_rates,
        # seconds outside Batch.step per second inside it, over the same steps
        torch_layer_overhead=physics_rate / rates["ours"] - 1.0,
    )
    return row


def markdown(rows: list[dict[str, Any]], machine: dict[str, Any], settings: dict[str, Any]) -> str:
    """The results as one markdown table."""
    left_out = [f"{row['env_id']} at {row['num_envs']}" for row in rows if "async_left_out" in row]
    lines = [
        "# Batched MuJoCo throughput",
        "",
        "Env steps per second (batch size x calls) of full `step` calls, observations, "
        "rewards and resets included, with random actions drawn before timing; median of "
        f"{settings['repeats']} repeats of at least {settings['seconds']} s, implementations "
        "timed in turns so that other load falls on all alike. `ours` is "
        '`rewardlab.envs.make(id, n, backend="cpu")` (`mujoco.batch` on every CPU, torch tensors '
        "out); `raw Batch.step` steps that env's `mujoco.batch.Batch` by `frame_skip` and "
        "does nothing else: no observations, rewards or resets, the last actions held, so its "
        "states drift from ours (fallen Hoppers and Walkers stay down) and its rate is a "
        "rough ceiling only. Gymnasium's vector envs wrap `gymnasium.make(id)` with its "
        "default wrappers. `ours vs best gym` divides ours by the faster of Sync and Async. "
        "`torch overhead` is the time our steps spend outside `Batch.step` over the time they "
        "spend inside it, both clocked within the same steps (so on the same states).",
        "",
        f"Machine: {machine['summary']}; MuJoCo {machine['mujoco']}, gymnasium "
        f"{machine['gymnasium']}, torch on {machine['torch_threads']} thread(s); load average {machine['load_average_before']} before, "
        f"{machine['load_average_after']} after (other engineers' jobs share the machine); "
        f"{machine['wall_seconds']:.0f} s wall.",
        "",
        "| task | envs | ours | raw Batch.step | Sync | Async | ours vs best gym "
        "| torch overhead |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        rates = row["steps_per_second"]
        lines.append(
            f"| {row['env_id']} | {row['num_envs']} | {rate(rates['ours'])} "
            f"| {rate(rates['raw Batch.step'])} "
            f"| {rate(rates.get('gymnasium SyncVectorEnv'))} "
            f"| {rate(rates.get('gymnasium AsyncVectorEnv'))} "
            f"| {ratio(rates['ours'], rates[row['best_gymnasium']])} "
            f"| {row['torch_layer_overhead']:.0%} |"
        )
    if left_out:
        lines += ["", f"Async left out ({', '.join(left_out)}): {ASYNC_LEFT_OUT}."]
    lines += [
        "",
        "Start-up seconds of Gymnasium's vector envs (make and reset): "
        + "; ".join(
            f"{row['env_id']} {row['num_envs']}: "
            + ", ".join(
                f"{name.split()[-1]} {seconds:.1f}"
                for name, seconds in row["start_seconds"].items()
            )
            for row in rows
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=None, choices=MUJOCO_IDS)
    parser.add_argument("--num-envs", nargs="+", type=int, default=NUM_ENVS)
    parser.add_argument("--quick", action="store_true", help="HalfCheetah-v5 only, short timings")
    parser.add_argument("--repeats", type=int, default=None, help="timings of each (default 5)")
    parser.add_argument("--seconds", type=float, default=None, help="per timing (default 0.5)")
    parser.add_argument(
        "--async-max",
        type=int,
        default=ASYNC_MAX,
        help=f"time AsyncVectorEnv up to this many envs (default {ASYNC_MAX}: one process per env)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: a step's torch math is small, and on a loaded machine "
        "a second OpenMP thread fights MuJoCo's pool for the cores)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results path, no suffix")
    args = parser.parse_args(argv)
    env_ids = args.envs or (MUJOCO_IDS[:1] if args.quick else MUJOCO_IDS)
    repeats = args.repeats or (3 if args.quick else 5)
    seconds = args.seconds or (0.2 if args.quick else 0.5)
    torch.set_num_threads(args.threads)

    machine = describe_machine() | {
        "mujoco": mujoco.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": np.__version__,
        "load_average_before": [round(load, 2) for load in os.getloadavg()],
    }
    rows = []
    started = time.perf_counter()
    # Smallest batches first: AsyncVectorEnv forks this process, and after Ant at 1024 envs
    # its heap keeps the 23 GiB that ours and SyncVectorEnv reserved for MuJoCo arenas (ant.xml
    # asks for 14 MiB per MjData), a mapping the kernel's overcommit check refuses to fork.
    for count in sorted(args.num_envs):
        for env_id in env_ids:
            row = benchmark(env_id, count, args.async_max, repeats, seconds)
            rows.append(row)
            print(
                f"{env_id:20s} {count:5d} envs  "
                + "  ".join(
                    f"{name}: {rate(value)}" for name, value in row["steps_per_second"].items()
                )
                + f"  ours/best {row['ours_vs_best_gymnasium']:.2f}x"
                + f"  torch overhead {row['torch_layer_overhead']:.0%}",
                flush=True,
            )
    machine["load_average_after"] = [round(load, 2) for load in os.getloadavg()]
    machine["wall_seconds"] = round(time.perf_counter() - started, 1)
    settings = recorded_args(args) | {"envs": env_ids, "repeats": repeats, "seconds": seconds}
    rows.sort(key=lambda row: (env_ids.index(row["env_id"]), row["num_envs"]))
    report = {
        "machine": machine,
        "settings": settings,
        "async_left_out_because": ASYNC_LEFT_OUT,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rows, machine, settings))
    print(markdown(rows, machine, settings))


if __name__ == "__main__":
    main()
