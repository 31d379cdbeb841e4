"""What reading an LLM answer in a child process costs a search candidate, against reading it in-process.

A search reads each answer (finds the code, normalises it, runs the static checks) in a
child forked for the purpose, under CPU, wall-clock and memory limits
(:mod:`rewardlab.llm_reward.training.checking`), so that no answer can raise out of the
search or hold its GIL. This measures that child's price side by side with the same work
done in this process (``RewardProgram.from_llm_answer`` and ``check``), on every program of
the Text2Reward example library written out as an LLM answer (prose and one fenced block),
alternating, ``--repeats`` times each, in a process that holds idle threads as a search
does (its LLM and candidate pools). The overhead per candidate is the median difference;
the candidate's own cost for comparison is the sandbox's start and training time, read
from ``sandbox_overhead.json`` when it is there. Writes
``benchmarks/results/answer_checking.{json,md}``.

    python -m benchmarks.answer_checking
    python -m benchmarks.answer_checking --repeats 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from pathlib import Path

import torch

from benchmarks.machine import describe_machine, recorded_args
from rewardlab import llm_reward
from rewardlab.llm_reward.programs.program import RewardProgram
from rewardlab.llm_reward.search.examples import EXAMPLES
from rewardlab.llm_reward.training.checking import check_answer

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("llm_reward/training/checking.py", "llm_reward/programs/")

RESULTS = Path(__file__).parent / "results"


def in_process(answer: str, description: llm_reward.EnvDescription) -> None:
    """The same reading and checks, here."""
    RewardProgram.from_llm_answer(answer).check(description)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=8, help="idle threads held in this process, as a search holds")
    parser.add_argument("--out", default=str(RESULTS / "answer_checking"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    answers = [(f"Here is a reward function for: {e.instruction}\n```python\n{e.program}```\nIt pays for progress.",
                llm_reward.describe(e.env_id)) for e in EXAMPLES]
    stop = threading.Event()
    idle = [threading.Thread(target=stop.wait, daemon=True) for _ in range(args.threads)]
    for thread in idle:
        thread.start()
    for answer, description in answers:  # warm: lazy imports, caches of the checks
        in_process(answer, description)
        assert check_answer(answer, description).failure is None
    load_before = os.getloadavg()[0]
    child_ms, here_ms = [], []
    for _ in range(args.repeats):
        for answer, description in answers:
            start = time.perf_counter()
            check_answer(answer, description)
            child_ms.append(1000 * (time.perf_counter() - start))
            start = time.perf_counter()
            in_process(answer, description)
            here_ms.append(1000 * (time.perf_counter() - start))
    stop.set()
    overhead_ms = [c - h for c, h in zip(child_ms, here_ms, strict=True)]
    row = {
        "answers": len(answers),
        "repeats": args.repeats,
        "idle_threads": args.threads,
        "median_child_ms": statistics.median(child_ms),
        "median_in_process_ms": statistics.median(here_ms),
        "median_overhead_ms": statistics.median(overhead_ms),
        "p95_overhead_ms": sorted(overhead_ms)[int(0.95 * (len(overhead_ms) - 1))],
        "max_child_ms": max(child_ms),
        "load_average_before_after": [load_before, os.getloadavg()[0]],
    }
    sandbox = RESULTS / "sandbox_overhead.json"
    context = ""
    if sandbox.exists():
        measured = json.loads(sandbox.read_text())["result"]
        row["sandbox_start_overhead_s"] = measured["median_start_overhead_s"]
        row["sandboxed_candidate_s"] = measured["median_sandboxed_s"]
        context = (f" For comparison (sandbox_overhead.json): a candidate's sandbox start costs "
                   f"{measured['median_start_overhead_s']:.2f} s and a {measured['steps']:,}-step CartPole "
                   f"candidate {measured['median_sandboxed_s']:.2f} s in all, so reading its answer in a child adds "
                   f"{row['median_overhead_ms'] / 10 / measured['median_sandboxed_s']:.2f}% to it.")
    machine = describe_machine()
    lines = [
        "# Reading an answer in a child process: the price per candidate",
        "",
        f"{len(answers)} answers (the Text2Reward example library, each as prose and a fenced block), "
        f"{args.repeats} alternating rounds, {args.threads} idle threads in the process.",
        f"Machine: {machine['summary']}.",
        "",
        "| in a child (limits, fork, pipe) | in-process | overhead per candidate (median) | overhead p95 |",
        "|---|---|---|---|",
        f"| {row['median_child_ms']:.1f} ms | {row['median_in_process_ms']:.1f} ms | "
        f"{row['median_overhead_ms']:.1f} ms | {row['p95_overhead_ms']:.1f} ms |",
        "",
        f"Load average of the machine (other jobs): {load_before:.1f} before, "
        f"{row['load_average_before_after'][1]:.1f} after.{context}",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"machine": machine, "args": recorded_args(args), "result": row},
                                                   indent=2) + "\n")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
