"""What a new machine pays before it is as fast as a warm one: ``rewardlab train --compile``
and, optionally, the README's test command, each from empty compile caches.

For each env, in turns, each in a fresh process with an empty Inductor cache
(``TORCHINDUCTOR_CACHE_DIR``, and a fresh ``TMPDIR``, where Inductor keeps its precompiled
headers) and an empty rewardlab cache (``REWARDLAB_CACHE``):

- ``rewardlab train --env ENV --algo ppo --compile --steps STEPS``: the wall time and the
  CPU time (compilers included) of the whole command;
- the same with ``--no-compile``; the difference is what compiling costs the run (its
  compile, less what the compiled steps save over so few steps);
- then ``--compile`` again on the now warm caches: what every later run pays.

With ``--suite`` it also runs the README's test command (``pytest``) once from empty caches
and reports its minutes (over an hour on two busy cores: not by default). With
``--jax-python`` it also times the PureJaxRL-style JAX PPO's compile
(``benchmarks/purejaxrl_ppo.py``, no persistent cache), the peer a cold start is weighed
against. The load averages are recorded: on a shared machine they decide the figures.

Usage::

    python -m benchmarks.cold_start                                  # CartPole, Acrobot, MiniGrid
    python -m benchmarks.cold_start --envs CartPole-v1 --jax-python PYTHON_WITH_JAX
    python -m benchmarks.cold_start --suite                          # and the test suite, cold
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.default_path import run_jax
from benchmarks.machine import describe_machine, recorded_args

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = (
    "rewardlab/common/compiled.py", "agents/ppo.py", "agents/fused.py",
    "envs/core.py",
)  # fmt: skip

ENVS = ("CartPole-v1", "Acrobot-v1", "MiniGrid-DoorKey-5x5-v0")
ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "cold_start"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], caches: Path, check: bool = True) -> dict[str, Any]:
    """Run ``command`` in the repository with its compile caches under ``caches``: its wall
    and CPU seconds (the CPU time of its whole process tree), and without ``check`` its exit
    code and the last lines it printed."""
    # Inductor keeps its precompiled headers under the temporary folder whatever its cache
    # folder: a fresh TMPDIR empties them too
    (caches / "tmp").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "REWARDLAB_CACHE": str(caches / "rewardlab"),
        "TMPDIR": str(caches / "tmp"),
    }
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if not check:
        return {
            "wall_seconds": round(wall, 1), "cpu_seconds": round(_children_cpu() - cpu, 1),
            "returncode": done.returncode, "tail": _summary(done.stdout.splitlines()),
        }  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:5])} ... failed ({done.returncode}): {done.stderr[-2000:]}"
        )
    return {"wall_seconds": round(wall, 1), "cpu_seconds": round(_children_cpu() - cpu, 1)}


def _summary(lines: list[str]) -> list[str]:
    """pytest's slowest tests and failures, then its last line."""
    kept = [line for line in lines if re.match(r"\d+\.\d+s (call|setup|teardown) |FAILED |ERROR ", line)]
    return [*kept, lines[-1] if lines else ""]


def train_command(env_id: str, steps: int, compile: bool, logdir: Path) -> list[str]:
    """``rewardlab train`` for ``env_id``, compiled or not, quiet."""
    rewardlab = str(Path(sys.executable).with_name("rewardlab"))
    return [
        rewardlab, "train", "--env", env_id, "--algo", "ppo", "--steps", str(steps), "--seed", "0",
        "--logdir", str(logdir), "--no-progress", "--compile" if compile else "--no-compile",
    ]  # fmt: skip


def cold_runs(env_id: str, steps: int) -> dict[str, Any]:
    """The eager run, the compiled run and the compiled run again, from empty caches."""
    row: dict[str, Any] = {"env_id": env_id, "steps": steps}
    with tempfile.TemporaryDirectory(prefix="cold-start-") as folder:
        root = Path(folder)
        row["eager"] = timed(
            train_command(env_id, steps, False, root / "eager"), root / "eager-caches"
        )
        row["compiled_cold"] = timed(
            train_command(env_id, steps, True, root / "cold"), root / "caches"
        )
        row["compiled_warm"] = timed(
            train_command(env_id, steps, True, root / "warm"), root / "caches"
        )
    return row


def markdown(
    rows: list[dict[str, Any]],
    suite: dict[str, Any] | None,
    jax: list[dict[str, Any]],
    machine: dict[str, Any],
    args: argparse.Namespace,
) -> str:
    """The results as tables."""
    lines = [
        "# Cold start: `rewardlab train --compile` and the test suite from empty compile caches",
        "",
        f"`rewardlab train --env ENV --algo ppo --steps {args.steps}`, each run a fresh "
        "process; `cold`: "
        "empty Inductor and rewardlab caches, `warm`: the caches the cold run filled, `eager`: "
        "`--no-compile`. Wall and CPU seconds of the whole command (the compilers' processes "
        "included). `compile costs` is the cold compiled run's wall time less the eager run's.",
        "",
        f"Machine: {machine['summary']}; commit {machine['commit']}, {machine['date']}; "
        "load average "
        f"{machine['load_average_before']} before, {machine['load_average_after']} after (a shared "
        "machine: other work ran beside it).",
        "",
        "| env | eager wall (cpu) s | compiled cold wall (cpu) s | compiled warm wall (cpu) s "
        "| compile costs s |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        eager, cold, warm = row["eager"], row["compiled_cold"], row["compiled_warm"]
        lines.append(
            f"| {row['env_id']} | {eager['wall_seconds']:.1f} ({eager['cpu_seconds']:.0f}) "
            f"| {cold['wall_seconds']:.1f} ({cold['cpu_seconds']:.0f}) "
            f"| {warm['wall_seconds']:.1f} ({warm['cpu_seconds']:.0f}) "
            f"| {cold['wall_seconds'] - eager['wall_seconds']:.1f} |"
        )
    if jax:
        lines += [
            "",
            "The JAX peer's compile (`benchmarks/purejaxrl_ppo.py`, tuned, no persistent cache):",
            "", "| env | JAX compile s |", "|---|---:|",
        ]  # fmt: skip
        lines += [f"| {run['env_id']} | {run['compile_seconds']:.1f} |" for run in jax]
    if suite is not None:
        lines += [
            "", f"The README's test command (`pytest`) from empty caches: "
            f"{suite['wall_seconds'] / 60:.1f} min wall, {suite['cpu_seconds'] / 60:.1f} min CPU; "
            f"it ended `{suite['tail'][-1] if suite['tail'] else ''}` (exit {suite['returncode']}). "
            "Its slowest tests:", "", "```", *suite["tail"][:-1], "```",
        ]  # fmt: skip
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--suite", action="store_true", help="also run pytest from empty caches")
    parser.add_argument("--jax-python", help="a Python with JAX, to time the JAX peer's compile")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results path, no suffix")
    args = parser.parse_args(argv)
    machine = describe_machine() | {"load_average_before": [round(x, 2) for x in os.getloadavg()]}
    rows = []
    for env_id in args.envs:
        rows.append(cold_runs(env_id, args.steps))
        print(json.dumps(rows[-1]), flush=True)
    jax = [
        run_jax(env_id, 0, args.jax_python)
        for env_id in args.envs
        if args.jax_python and not env_id.startswith("MiniGrid")
    ]
    suite = None
    if args.suite:
        with tempfile.TemporaryDirectory(prefix="cold-suite-") as folder:
            # the README's command, with the slowest tests listed; a failure is reported
            # beside the time, not raised, so that the minutes are not lost
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            suite = timed([*command, "--durations=15"], Path(folder), check=False)
    machine["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "machine": machine,
        "settings": recorded_args(args),
        "rows": rows,
        "jax": jax,
        "suite": suite,
    }
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rows, suite, jax, machine, args))
    print(markdown(rows, suite, jax, machine, args))


if __name__ == "__main__":
    main()
