"""Wall time of a reward program's PPO training in the sandbox against the same training in-process.

The candidate is the human-written CartPole reward program (``reference_programs``);
both sides train ``rewardlab.agents.PPO`` on it with the same seed, budget, checkpoints and
evaluation episodes, with one torch thread. In-process means
``rewardlab.llm_reward.training.job.train_and_measure`` called here, with no process, limits
or audit hooks; sandboxed means ``rewardlab.llm_reward.evaluate`` (static checks, a worker
forked by the sandbox's fork server in its own namespaces, Landlock, seccomp, OS limits,
the audit-hook guard, the policy shipped back and its fitness measured here). The two are
timed in alternation,
``--repeats`` times each; the reported ratio is the median of sandboxed / in-process wall
time. CPU times (the worker's own, and this process's) are reported too, since wall time on
a shared machine moves with other load.

The first sandboxed evaluation also starts the fork server (it imports torch, the envs
and the agents once for all later candidates); that cold start is timed separately and
not in the ratio, since a search pays it once. The start overhead per candidate is the
wall time of a run too short to train (64 steps), sandboxed minus in-process. Writes
``benchmarks/results/sandbox_overhead.{json,md}``.

    python benchmarks/sandbox_overhead.py
    python benchmarks/sandbox_overhead.py --steps 20000 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from benchmarks.machine import describe_machine
from rewardlab import llm_reward
from rewardlab.llm_reward.programs.program import RewardFunction
from rewardlab.llm_reward.sandbox.isolation import describe_isolation
from rewardlab.llm_reward.sandbox.landlock import landlock_abi
from rewardlab.llm_reward.training.job import train_and_measure

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("llm_reward/sandbox/", "llm_reward/training/")

RESULTS = Path(__file__).parent / "results"


def time_in_process(
    program: llm_reward.RewardProgram, env_id: str, options: dict
) -> tuple[float, float, float]:
    """Wall and CPU seconds to train in this process, and the final fitness."""
    start, start_cpu = time.perf_counter(), time.process_time()
    function = RewardFunction(program, llm_reward.describe(env_id))
    checkpoints = train_and_measure(function, seed=0, **options)
    return time.perf_counter() - start, time.process_time() - start_cpu, checkpoints[-1].fitness


def time_sandboxed(
    program: llm_reward.RewardProgram, env_id: str, options: dict
) -> tuple[float, float, llm_reward.TrainingRun]:
    """Wall seconds to evaluate in the sandbox (checks to result), the CPU seconds of this
    process (it measures the fitness of the shipped policies), and the result."""
    start, start_cpu = time.perf_counter(), time.process_time()
    result = llm_reward.evaluate(
        program, env_id, steps=options["steps"], seeds=(0,), num_envs=options["num_envs"],
        num_checkpoints=options["num_checkpoints"], eval_episodes=options["eval_episodes"],
        timeout_s=1800, threads=1,
    )
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    if not result.ok:
        raise RuntimeError(f"the sandboxed run failed: {result.failure}")
    return seconds, cpu_seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS / "sandbox_overhead"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    program = llm_reward.reference_programs(args.env)["human"]
    options = {"steps": args.steps, "num_envs": args.num_envs, "num_checkpoints": 10, "eval_episodes": 10}

    time_in_process(program, args.env, {**options, "steps": 1024, "num_checkpoints": 1})  # lazy imports
    load_before = os.getloadavg()[0]
    cold_s, _, cold = time_sandboxed(program, args.env, options)
    print(f"cold sandboxed run (starts the fork server): {cold_s:.1f} s")
    in_process, sandboxed, worker_training, in_process_cpu, worker_cpu, fitness = [], [], [], [], [], []
    for repeat in range(args.repeats):
        seconds, cpu_seconds, in_fitness = time_in_process(program, args.env, options)
        in_process.append(seconds)
        in_process_cpu.append(cpu_seconds)
        seconds, caller_cpu, result = time_sandboxed(program, args.env, options)
        sandboxed.append(seconds)
        worker_training.append(result.seeds[0].wall_s)
        worker_cpu.append(result.cpu_s + caller_cpu)
        fitness.append((in_fitness, result.fitness))
        print(f"repeat {repeat}: in-process {in_process[-1]:.2f} s, sandboxed {sandboxed[-1]:.2f} s, "
              f"fitness {in_fitness:.1f} / {result.fitness:.1f}")
    # A candidate's start: a run too short to train, sandboxed minus in-process.
    tiny = {**options, "steps": 64, "num_checkpoints": 1, "eval_episodes": 2}
    starts = []
    for _ in range(args.repeats):
        in_s = time_in_process(program, args.env, tiny)[0]
        starts.append(time_sandboxed(program, args.env, tiny)[0] - in_s)
    ratios = [s / p for s, p in zip(sandboxed, in_process, strict=True)]
    cpu_ratios = [s / p for s, p in zip(worker_cpu, in_process_cpu, strict=True)]
    row = {
        "env_id": args.env,
        "steps": args.steps,
        "num_envs": args.num_envs,
        "repeats": args.repeats,
        "in_process_s": in_process,
        "sandboxed_s": sandboxed,
        "sandboxed_training_in_worker_s": worker_training,
        "median_in_process_s": statistics.median(in_process),
        "median_sandboxed_s": statistics.median(sandboxed),
        "median_sandboxed_training_in_worker_s": statistics.median(worker_training),
        "ratio_sandboxed_over_in_process": statistics.median(ratios),
        "in_process_cpu_s": in_process_cpu,
        "sandboxed_worker_cpu_s": worker_cpu,
        "cpu_ratio_sandboxed_over_in_process": statistics.median(cpu_ratios),
        "cold_sandboxed_s": cold_s,
        "start_overhead_s": starts,
        "median_start_overhead_s": statistics.median(starts),
        "isolation": describe_isolation(),
        "same_fitness": all(a == b for a, b in fitness),
        "worker_peak_rss_mb": cold.peak_rss_mb,
        "worker_peak_address_space_mb": cold.peak_vm_mb,
        "landlock_abi": landlock_abi(),
        "load_average_before_after": [load_before, os.getloadavg()[0]],
    }
    machine = describe_machine()
    lines = [
        f"# Sandbox overhead: PPO on {args.env} with a reward program",
        "",
        f"{args.steps:,} steps, {args.num_envs} envs, 10 checkpoints of 10 evaluation episodes, one "
        f"torch thread; median of {args.repeats} alternating runs.",
        f"Machine: {machine['summary']}.",
        "",
        "| in-process | sandboxed (checks to result) | of which training in the worker "
        "| sandboxed / in-process | start overhead per candidate | first sandboxed run (starts the fork server) |",
        "|---|---|---|---|---|---|",
        f"| {row['median_in_process_s']:.2f} s | {row['median_sandboxed_s']:.2f} s "
        f"| {row['median_sandboxed_training_in_worker_s']:.2f} s "
        f"| {row['ratio_sandboxed_over_in_process']:.3f} | {row['median_start_overhead_s']:.2f} s | {cold_s:.2f} s |",
        "",
        f"CPU time (less sensitive to other load on the machine): in-process "
        f"{statistics.median(in_process_cpu):.2f} s, sandboxed (the worker's training plus the caller's "
        f"fitness measurement) {statistics.median(worker_cpu):.2f} s, "
        f"median ratio {row['cpu_ratio_sandboxed_over_in_process']:.3f}.",
        "",
        f"Same final fitness on both sides: {row['same_fitness']}. Worker peak memory: "
        f"{row['worker_peak_rss_mb']:.0f} MB resident, {row['worker_peak_address_space_mb']:.0f} MB "
        f"address space (the default limit is 4096 MB). Isolation: {row['isolation']}. "
        f"Load average of the machine (other jobs): {load_before:.1f} before, "
        f"{row['load_average_before_after'][1]:.1f} after.",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"machine": machine, "result": row}, indent=2) + "\n")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
