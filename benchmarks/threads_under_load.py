"""Our batched envs' eager step at torch's default threads and at one, on a machine that
other work keeps busy, beside Gymnasium's vector env, in one run.

torch starts with one intra-op thread per core. Our envs step at their own ``threads``
setting (``rewardlab.common.threads``: 1 by default, the caller's count restored after
each step); ``env.threads = None`` steps at torch's setting instead, as every step did
before that setting existed. This times, in turns and with random actions drawn before the
clock starts:

- ours, eager, at torch's default threads (``env.threads = None``);
- ours, eager, at one thread (the default);
- the reference: Gymnasium's numpy ``CartPoleVectorEnv`` for CartPole, MiniGrid's own env
  in Gymnasium's ``SyncVectorEnv`` for MiniGrid (both one thread, numpy);

while ``--busy`` processes of its own spin on the CPU, so that each of torch's threads
shares its core, as it does on a machine that runs other jobs (CI, a second training, a
build). The load averages before and after are recorded: other users of the machine add to
it. Results go to ``benchmarks/results/threads_under_load.json`` and ``.md``.

Usage::

    python -m benchmarks.threads_under_load                     # one busy process
    python -m benchmarks.threads_under_load --busy 0            # the machine as it is
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.env_throughput import Timer, gymnasium_timer, rate, ratio, time_in_turns
from benchmarks.env_throughput import our_timer as classic_timer
from benchmarks.machine import describe_machine, recorded_args
from benchmarks.minigrid_throughput import minigrid_timer
from benchmarks.minigrid_throughput import our_timer as minigrid_our_timer
from rewardlab import envs
from rewardlab.common.threads import torch_threads

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = (
    "envs/core.py",
    "envs/classic/",
    "envs/batched_minigrid/",
    "rewardlab/common/threads.py",
)

TASKS = ["CartPole-v1", "MiniGrid-DoorKey-16x16-v0"]
RESULTS = Path(__file__).parent / "results" / "threads_under_load"


def spin() -> None:
    """A busy process: pure Python arithmetic, forever (ended by the benchmark)."""
    value = 0
    while True:
        value = (value * 7 + 1) % 1_000_003


def switch_microseconds(calls: int = 100_000) -> float:
    """What holding a step at one thread adds to it: entering and leaving
    ``torch_threads(1)`` from torch's default count, in microseconds per step."""
    start = time.perf_counter()
    for _ in range(calls):
        with torch_threads(1):
            pass
    return (time.perf_counter() - start) / calls * 1e6


def timers(env_id: str, num_envs: int, default_threads: int) -> tuple[list[Timer], str]:
    """The timers of one task: ours at torch's default threads and at one, and the reference."""
    minigrid = env_id.startswith("MiniGrid")
    ours: list[Timer] = []
    for threads, label in ((None, f"ours, {default_threads} threads"), (1, "ours, 1 thread")):
        if minigrid:
            env = envs.make(env_id, num_envs, seed=0, validate_actions=False)
            env.threads = threads
            ours.append(minigrid_our_timer(env, label)[0])
        else:
            env = envs.make(env_id, num_envs, seed=0)
            env.threads = threads
            ours.append(classic_timer(env, label)[0])
    if minigrid:
        reference, kind = minigrid_timer(env_id, num_envs, "sync"), "MiniGrid in SyncVectorEnv"
    else:
        reference, kind = gymnasium_timer(env_id, num_envs)
    reference.name = "reference"
    return [*ours, reference], kind


def benchmark(
    env_id: str, num_envs: int, args: argparse.Namespace, default_threads: int
) -> dict[str, Any]:
    """Time ours at both settings and the reference on ``env_id`` at ``num_envs``, in turns."""
    row: dict[str, Any] = {"env_id": env_id, "num_envs": num_envs}
    task_timers, row["reference"] = timers(env_id, num_envs, default_threads)
    row.update(time_in_turns(task_timers, args.repeats, args.seconds))
    return row


def markdown(rows: list[dict[str, Any]], machine: dict[str, Any], args: argparse.Namespace) -> str:
    """The results as one table."""
    threads = machine["torch_default_threads"]
    lines = [
        "# Batched envs' eager step at torch's default threads and at one, under load",
        "",
        f"Env steps per second (batch size x calls), eager, {args.num_envs} envs, random "
        "actions drawn before timing; median of the repeats, implementations timed in turns. "
        f"`{threads} threads` is torch's default on this machine (`env.threads = None`: the "
        "step at the process's setting, as every step ran before envs held their own); `1 "
        "thread` is the envs' default `threads` setting. The reference is Gymnasium's numpy "
        "`CartPoleVectorEnv` for CartPole and MiniGrid's own env in `SyncVectorEnv` for "
        f"MiniGrid. {args.busy} busy process(es) of this benchmark spun on the CPU throughout, "
        "besides whatever else ran on the shared machine (the load averages).",
        "",
        f"Machine: {machine['summary']}; torch's default threads {threads}; commit "
        f"{machine['commit']}, {machine['date']}; load average {machine['load_average_before']} "
        f"before (without the busy processes), {machine['load_average_after']} after.",
        "",
        "Holding a step at one thread (setting the count on entry and restoring it after) "
        f"costs {machine['switch_microseconds']:.2f} us per step, under load.",
        "",
        f"| task | ours, {threads} threads | ours, 1 thread | reference | 1 thread vs {threads} "
        f"| {threads} threads vs reference | 1 thread vs reference |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        rates = row["steps_per_second"]
        many, one = rates[f"ours, {threads} threads"], rates["ours, 1 thread"]
        reference = rates["reference"]
        lines.append(
            f"| {row['env_id']} ({row['reference']}) | {rate(many)} | {rate(one)} "
            f"| {rate(reference)} | {ratio(one, many)} | {ratio(many, reference)} "
            f"| {ratio(one, reference)} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=TASKS)
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--busy", type=int, default=1, help="busy processes to start")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5, help="per timing")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results path, no suffix")
    args = parser.parse_args(argv)
    default_threads = torch.get_num_threads()
    machine = describe_machine() | {
        "torch_default_threads": default_threads,
        "load_average_before": [round(load, 2) for load in os.getloadavg()],
    }
    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for process in busy:
        process.start()
    rows = []
    started = time.perf_counter()
    try:
        machine["switch_microseconds"] = round(switch_microseconds(), 3)
        for env_id in args.envs:
            row = benchmark(env_id, args.num_envs, args, default_threads)
            rows.append(row)
            print(
                f"{env_id:28s} "
                + "  ".join(
                    f"{name}: {rate(value)}" for name, value in row["steps_per_second"].items()
                ),
                flush=True,
            )
        machine["load_average_after"] = [round(load, 2) for load in os.getloadavg()]
    finally:
        for process in busy:
            process.terminate()
            process.join()
    machine["wall_seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine, "settings": recorded_args(args), "rows": rows}
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rows, machine, args))
    print(markdown(rows, machine, args))


if __name__ == "__main__":
    main()
