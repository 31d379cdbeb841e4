"""The largest DeepSea(N) our PPO solves with each intrinsic reward, within a fixed budget.

Methods: ``none`` (plain PPO), ``rnd``, ``count``, ``surprise`` and ``Hybrid(count, rnd)`` with
each HIRE fusion (``hybrid-sum``, ``hybrid-product``, ``hybrid-cycle``, ``hybrid-max``).

For each N of ``--sizes`` and each seed, ``rewardlab.agents.PPO`` trains on batched ``DeepSea-v0`` of size
N for at most ``--episodes`` episodes (``episodes * N`` env steps) and stops at the first
treasure. N counts as solved when the treasure is found in at least ``--need`` of the
``--seeds`` seeds. A method climbs the sizes in order and stops at the first N it does not
solve; an N stops as soon as too many seeds have failed for it to be solved.

Every bonus is scaled by its running RMS before it reaches PPO (single modules through a
one-module ``Hybrid``), so that single modules and fusions are on equal footing: an unscaled
count bonus ``1 / sqrt(n)`` shrinks until the cost of moving right outweighs it.

PPO: 64 envs, one episode per env per rollout (``n_steps = N``), lr 1e-3, 4 epochs,
entropy 0.1. With a bonus the critic has RND's two heads: extrinsic (episodic) and intrinsic
(non-episodic), both with gamma 0.99 and advantage weight 1 (RND's weight 2 on the extrinsic
head lets the cost of moving right outweigh the bonus sooner). ``--set`` changes PPO's
settings: at N = 40 (count, seeds 0 and 3) a learning rate of 3e-3 found the treasure in
100k and 151k env steps against 215k and 279k at 1e-3, and 1e-2 in 207k and 282k; an
entropy coefficient of 0.01 or 0.03 found it in neither seed within 402k.

Writes ``benchmarks/results/intrinsic_deepsea.{json,md}``::

    python -m benchmarks.intrinsic_deepsea             # the full run: 6 min on 2 idle cores
    python -m benchmarks.intrinsic_deepsea --sizes 8 --seeds 2 --episodes 300 --out /tmp/ds
    python -m benchmarks.intrinsic_deepsea --methods count,hybrid-max --sizes 10,20,30,40,50,60,70,80 \
        --set '{"learning_rate": 0.003}' --workers 1 --out benchmarks/results/intrinsic_deepsea_large
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import torch

from benchmarks.machine import describe_machine
from rewardlab import envs, intrinsic
from rewardlab.agents.ppo import PPO
from rewardlab.envs.core import BatchedWrapper

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("intrinsic/", "agents/ppo.py", "envs/deepsea.py")

RESULTS = Path(__file__).parent / "results"
METHODS = (
    "none",
    "rnd",
    "count",
    "surprise",
    "hybrid-sum",
    "hybrid-product",
    "hybrid-cycle",
    "hybrid-max",
)
NUM_ENVS = 64
PPO_SETTINGS = {"learning_rate": 1e-3, "n_epochs": 4, "ent_coef": 0.1, "gamma": 0.99}
TWO_HEADS = {
    "extrinsic": {"gamma": 0.99, "weight": 1.0},
    "intrinsic": {"gamma": 0.99, "weight": 1.0, "episodic": False},
}
MODULE_OPTIONS = {"surprise": {"epochs": 2}}


class TreasureLog(BatchedWrapper):
    """Counts env steps and remembers the step at which the treasure was first found."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.steps = 0
        self.first_treasure: int | None = None

    def step(self, actions: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self.steps += self.env.num_envs
        if self.first_treasure is None and bool(
            (info["reward_components"]["extrinsic"] > 0.5).any()
        ):
            self.first_treasure = self.steps
        return obs, reward, terminated, truncated, info


def make_module(method: str, env: Any, seed: int) -> intrinsic.IntrinsicModule | None:
    """The intrinsic module of ``method`` for ``env`` (``None`` for plain PPO).

    :param method: one of :data:`METHODS`
    :param env: the batched DeepSea env
    :param seed: the run's seed
    """
    if method == "none":
        return None
    names, fusion = (
        ("count,rnd", method.split("-")[1]) if method.startswith("hybrid") else (method, "sum")
    )
    module = intrinsic.make(
        names,
        env.single_observation_space,
        env.single_action_space,
        fusion=fusion,
        num_envs=env.num_envs,
        seed=seed,
        options={name: MODULE_OPTIONS[name] for name in names.split(",") if name in MODULE_OPTIONS},
    )
    # A one-module Hybrid scales the bonus by its running RMS, as the fusions do.
    return (
        module
        if isinstance(module, intrinsic.Hybrid)
        else intrinsic.Hybrid([module], name=module.name)
    )


def run(method: str, size: int, seed: int, episodes: int, ppo: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train until the first treasure or the budget; one process, one thread.

    :param method: one of :data:`METHODS`
    :param size: N
    :param seed: seed of the env (its action mapping), the agent and the module
    :param episodes: the budget, in episodes of every env together
    :param ppo: PPO's settings (:data:`PPO_SETTINGS` where None)
    """
    torch.set_num_threads(1)
    env = TreasureLog(envs.make("DeepSea-v0", num_envs=NUM_ENVS, size=size, seed=seed))
    module = make_module(method, env, seed)
    model = PPO(
        env,
        seed=seed,
        n_steps=size,
        intrinsic=module,
        value_heads=None if module is None else TWO_HEADS,
        **(PPO_SETTINGS if ppo is None else ppo),
    )
    start = time.perf_counter()
    model.learn(episodes * size, callback=lambda _: env.first_treasure is None)
    return {
        "method": method,
        "size": size,
        "seed": seed,
        "found": env.first_treasure is not None,
        "first_treasure_step": env.first_treasure,
        "steps": env.steps,
        "seconds": round(time.perf_counter() - start, 2),
    }


def sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Climb the sizes for every method, in parallel over ``--workers`` processes."""
    sizes = sorted(args.sizes)
    runs: list[dict[str, Any]] = []
    level = {method: 0 for method in args.methods}
    open_futures: dict[Future, tuple[str, int]] = {}

    def submit(method: str) -> None:
        size = sizes[level[method]]
        for seed in range(args.seeds):
            future = pool.submit(run, method, size, seed, args.episodes, args.ppo)
            open_futures[future] = (method, size)

    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for method in args.methods:
            submit(method)
        while open_futures:
            done, _ = wait(open_futures, return_when=FIRST_COMPLETED)
            for future in done:
                method, size = open_futures.pop(future)
                if future.cancelled():
                    continue
                result = future.result()
                runs.append(result)
                print(json.dumps(result), flush=True)
                mine = [r for r in runs if r["method"] == method and r["size"] == size]
                failed = sum(not r["found"] for r in mine)
                pending = [f for f, key in open_futures.items() if key == (method, size)]
                if failed > args.seeds - args.need:
                    for other in pending:
                        other.cancel()
                elif not pending and level[method] + 1 < len(sizes):
                    level[method] += 1
                    submit(method)
    return runs


def summarise(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Per method: the largest N solved and, per N, seeds that found the treasure and when."""
    summary: dict[str, Any] = {}
    for method in args.methods:
        per_size = {}
        for size in sorted(args.sizes):
            mine = [r for r in runs if r["method"] == method and r["size"] == size]
            if not mine:
                continue
            found = [r["first_treasure_step"] for r in mine if r["found"]]
            per_size[size] = {
                "found": len(found),
                "run": len(mine),
                "median_first_treasure_step": statistics.median(found) if found else None,
                "solved": len(found) >= args.need,
            }
        solved = [size for size, row in per_size.items() if row["solved"]]
        summary[method] = {"largest_solved": max(solved, default=None), "sizes": per_size}
    return summary


def write_markdown(path: Path, result: dict[str, Any]) -> None:
    config, summary = result["config"], result["summary"]
    sizes = sorted(config["sizes"])
    lines = [
        "# Intrinsic rewards on DeepSea: the largest N solved",
        "",
        f"Our PPO on batched `DeepSea-v0`, budget {config['episodes']} episodes per N "
        f"(episodes x N env steps), {config['seeds']} seeds; N is solved when the treasure is "
        f"found in at least {config['need']} seeds. A cell shows the seeds that found it and the "
        "median env steps to the first treasure; `-` is an N not tried (a smaller one failed) "
        "or stopped once it could no longer be solved.",
        "",
        "| method | largest N solved | " + " | ".join(f"N={n}" for n in sizes) + " |",
        "| --- | --- | " + " | ".join("---" for _ in sizes) + " |",
    ]
    for method, row in summary.items():
        cells = []
        for size in sizes:
            cell = row["sizes"].get(size)
            if cell is None:
                cells.append("-")
                continue
            median = cell["median_first_treasure_step"]
            when = f" ({median / 1000:.1f}k)" if median is not None else ""
            cells.append(f"{cell['found']}/{cell['run']}{when}")
        largest = row["largest_solved"] if row["largest_solved"] is not None else "none"
        lines.append(f"| {method} | {largest} | " + " | ".join(cells) + " |")
    if result.get("note"):
        lines += ["", result["note"]]
    lines += [
        "",
        f"PPO: {json.dumps(config['ppo'])}, {config['num_envs']} envs, n_steps = N; with a bonus, "
        f"value heads {json.dumps(config['value_heads'])}. Hybrids fuse Count and RND.",
        "",
        f"Wall time {result['wall_seconds'] / 60:.1f} min with {config['workers']} worker processes "
        f"(one torch thread each; {result['run_seconds'] / 60:.0f} min summed over runs) on: "
        f"{result['machine']['summary']}. Load average (1 min) {result['load_average']['before']:.1f} "
        f"before and {result['load_average']['after']:.1f} after, counting its own workers.",
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=lambda s: [int(v) for v in s.split(",")], default=[10, 20, 30]
    )
    parser.add_argument("--methods", type=lambda s: s.split(","), default=list(METHODS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--need", type=int, default=4, help="seeds that must find the treasure")
    parser.add_argument(
        "--episodes", type=int, default=10_000, help="budget per run, in episodes (bsuite's)"
    )
    parser.add_argument(
        "--set", type=json.loads, default={}, metavar="JSON",
        help="PPO settings over the defaults, e.g. '{\"learning_rate\": 0.003}'",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "intrinsic_deepsea")
    args = parser.parse_args()
    args.ppo = {**PPO_SETTINGS, **args.set}
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    start, load_before = time.perf_counter(), os.getloadavg()
    machine = describe_machine()  # the commit whose code this process loaded, not a later one
    runs = sweep(args)
    result = {
        "config": {
            "sizes": args.sizes,
            "methods": args.methods,
            "seeds": args.seeds,
            "need": args.need,
            "episodes": args.episodes,
            "workers": args.workers,
            "num_envs": NUM_ENVS,
            "ppo": args.ppo,
            "value_heads": TWO_HEADS,
            "module_options": MODULE_OPTIONS,
        },
        "summary": summarise(runs, args),
        "runs": sorted(runs, key=lambda r: (r["method"], r["size"], r["seed"])),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "run_seconds": round(sum(r["seconds"] for r in runs), 1),
        "load_average": {"before": load_before[0], "after": os.getloadavg()[0]},
        "machine": machine,
        "command": " ".join(["python -m benchmarks.intrinsic_deepsea", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    (args.out.parent / f"{args.out.name}.json").write_text(json.dumps(result, indent=2))
    write_markdown(args.out.parent / f"{args.out.name}.md", result)
    print((args.out.parent / f"{args.out.name}.md").read_text())


if __name__ == "__main__":
    main()
