"""The extra wall time an intrinsic module adds to a PPO update, on CartPole-sized networks.

Our PPO on batched ``CartPole-v1`` (16 envs x 128 steps = 2048 transitions per update, 10
epochs of minibatches of 512, a 64x64 actor and critic), plain and with each module (RND with
its defaults, Count with SimHash, Surprise), in the same process. Each model trains in
turn for ``--iterations`` updates, ``--repeats`` times, and the medians are reported:

- ``module_s``: the time in the module's ``compute`` and ``update`` per PPO iteration;
- ``ppo_update_s``: the time in PPO's gradient phase (``PPO._update``) per iteration;
- ``extra_per_update``: ``module_s / ppo_update_s``, the overhead relative to the update;
- ``extra_per_iteration``: ``iteration_s / plain_iteration_s - 1``, relative to a whole
  iteration (rollout, scoring and update) of plain PPO timed alongside.

Writes ``benchmarks/results/intrinsic_overhead.{json,md}``::

    python -m benchmarks.intrinsic_overhead
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.machine import describe_machine
from rewardlab import envs, intrinsic
from rewardlab.agents.ppo import PPO

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("intrinsic/", "agents/ppo.py")

RESULTS = Path(__file__).parent / "results"
NUM_ENVS, N_STEPS = 16, 128
PPO_SETTINGS = {"n_steps": N_STEPS, "n_epochs": 10, "batch_size": 512, "learning_rate": 3e-4}
MODULES = {
    "rnd": lambda space, actions: intrinsic.RND(space, num_envs=NUM_ENVS, seed=0),
    "count": lambda space, actions: intrinsic.Count(space, num_envs=NUM_ENVS, seed=0),
    "surprise": lambda space, actions: intrinsic.Surprise(space, actions, seed=0),
}


class Stopwatch:
    """Accumulates the time spent in the methods it wraps."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def build(name: str | None) -> tuple[PPO, Stopwatch, Stopwatch]:
    """A PPO model (with module ``name``) whose update and module calls are timed."""
    env = envs.make("CartPole-v1", num_envs=NUM_ENVS, seed=0)
    module = None
    module_clock, update_clock = Stopwatch(), Stopwatch()
    if name is not None:
        module = MODULES[name](env.single_observation_space, env.single_action_space)
        module.compute = module_clock.wrap(module.compute)
        module.update = module_clock.wrap(module.update)
    model = PPO(env, seed=0, intrinsic=module, **PPO_SETTINGS)
    model._update = update_clock.wrap(model._update)
    return model, module_clock, update_clock


def measure(args: argparse.Namespace) -> dict[str, Any]:
    names: list[str | None] = [None, *args.modules]
    models = {name: build(name) for name in names}
    steps = args.iterations * NUM_ENVS * N_STEPS
    samples: dict[str | None, list[dict[str, float]]] = {name: [] for name in names}
    for model, _, _ in models.values():  # warm-up: first-call costs, allocations
        model.learn(NUM_ENVS * N_STEPS)
    for _ in range(args.repeats):
        for name, (model, module_clock, update_clock) in models.items():
            module_clock.seconds = update_clock.seconds = 0.0
            start = time.perf_counter()
            model.learn(steps, reset_num_timesteps=False)
            samples[name].append(
                {
                    "iteration_s": (time.perf_counter() - start) / args.iterations,
                    "module_s": module_clock.seconds / args.iterations,
                    "ppo_update_s": update_clock.seconds / args.iterations,
                }
            )
    medians = {
        name or "plain": {
            key: statistics.median(s[key] for s in samples[name]) for key in samples[name][0]
        }
        for name in names
    }
    for name in args.modules:
        row = medians[name]
        row["extra_per_update"] = row["module_s"] / row["ppo_update_s"]
        row["extra_per_iteration"] = row["iteration_s"] / medians["plain"]["iteration_s"] - 1.0
    return medians


def write_markdown(path: Path, result: dict[str, Any]) -> None:
    rows = result["medians"]
    plain = rows["plain"]
    lines = [
        "# Intrinsic modules: extra wall time per PPO update (CartPole-sized networks)",
        "",
        f"Our PPO on batched CartPole-v1, {NUM_ENVS} envs x {N_STEPS} steps per update, "
        f"{json.dumps(PPO_SETTINGS)}; medians of {result['config']['repeats']} alternating runs of "
        f"{result['config']['iterations']} updates each. Plain PPO: "
        f"{plain['iteration_s'] * 1000:.0f} ms per iteration, of which "
        f"{plain['ppo_update_s'] * 1000:.0f} ms in the update.",
        "",
        "| module | module ms / iteration | PPO update ms | extra / update | extra / iteration |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, row in rows.items():
        if name == "plain":
            continue
        lines.append(
            f"| {name} | {row['module_s'] * 1000:.1f} | {row['ppo_update_s'] * 1000:.0f} | "
            f"{row['extra_per_update']:.1%} | {row['extra_per_iteration']:+.1%} |"
        )
    lines += [
        "",
        "`extra / update` is the module's time (compute + update) over PPO's gradient phase; "
        "`extra / iteration` compares whole iterations against plain PPO timed in turn with it "
        "(noisier: it includes the rollout and any load from other processes).",
        "",
        f"Machine: {result['machine']['summary']}, torch threads {result['config']['threads']}.",
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modules", type=lambda s: s.split(","), default=list(MODULES))
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "intrinsic_overhead")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    result = {
        "config": {
            "modules": args.modules,
            "iterations": args.iterations,
            "repeats": args.repeats,
            "threads": args.threads,
            "num_envs": NUM_ENVS,
            "ppo": PPO_SETTINGS,
        },
        "medians": measure(args),
        "machine": describe_machine(),
        "command": " ".join(["python -m benchmarks.intrinsic_overhead", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    (args.out.parent / f"{args.out.name}.json").write_text(json.dumps(result, indent=2))
    write_markdown(args.out.parent / f"{args.out.name}.md", result)
    print((args.out.parent / f"{args.out.name}.md").read_text())


if __name__ == "__main__":
    main()
