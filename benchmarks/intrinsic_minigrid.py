"""Success rate against env steps of SB3 PPO on MiniGrid with each intrinsic reward.

Methods: ``plain``, ``rnd``, ``count``, ``surprise`` and ``hybrid`` (Count and RND, summed).
Every bonus is first scaled by its running RMS (a one-module ``Hybrid``), so one coefficient,
``--coef``, means the same for all of them; it enters PPO's rollout buffer through
:class:`rewardlab.agents.sb3_intrinsic.IntrinsicRewardCallback` (GAE over the combined reward).

SB3 PPO with RL Zoo's MiniGrid settings (8 envs x 128 steps, 10 epochs of minibatches of 64,
lr 2.5e-4, gamma 0.99) plus entropy 0.01, ``MlpPolicy`` on the agent's flattened 7x7x3 view
(:func:`rewardlab.envs.minigrid.make_minigrid`). An episode succeeds when its return is positive
(the goal was reached); the success rate is reported per ``--bin`` env steps.

The full configuration (1M steps, 3 seeds, DoorKey-8x8 and MultiRoom-N2-S4: 30M steps in
all) takes tens of CPU-hours (5 ms per step on a shared 2-core machine); pass smaller
``--steps``, ``--seeds`` or ``--envs`` for a reduced run. Writes
``benchmarks/results/intrinsic_minigrid.{json,md}``::

    python -m benchmarks.intrinsic_minigrid --steps 1000000 --seeds 3
    python -m benchmarks.intrinsic_minigrid --envs MiniGrid-DoorKey-5x5-v0 --steps 100000 --seeds 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from benchmarks.machine import describe_machine
from rewardlab import intrinsic
from rewardlab.agents.sb3_intrinsic import IntrinsicRewardCallback
from rewardlab.envs.minigrid import make_minigrid_vec

RESULTS = Path(__file__).parent / "results"
ENVS = ("MiniGrid-DoorKey-8x8-v0", "MiniGrid-MultiRoom-N2-S4-v0")
METHODS = {
    "plain": None,
    "rnd": "rnd",
    "count": "count",
    "surprise": "surprise",
    "hybrid": "count,rnd",
}
N_ENVS = 8
PPO_SETTINGS = {
    "n_steps": 128,
    "batch_size": 64,
    "n_epochs": 10,
    "learning_rate": 2.5e-4,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "ent_coef": 0.01,
}


class Episodes(BaseCallback):
    """Records ``(env step, return)`` of every finished episode (from ``Monitor``)."""

    def __init__(self) -> None:
        super().__init__()
        self.episodes: list[tuple[int, float]] = []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.episodes.append((self.num_timesteps, float(info["episode"]["r"])))
        return True


def bonus_module(method: str, venv: Any, seed: int) -> intrinsic.IntrinsicModule | None:
    """The method's module, scaled by its running RMS; ``None`` for plain PPO.

    :param method: a key of :data:`METHODS`
    :param venv: the SB3 vec env
    :param seed: the run's seed
    """
    names = METHODS[method]
    if names is None:
        return None
    module = intrinsic.make(
        names, venv.observation_space, venv.action_space, fusion="sum", seed=seed
    )
    return (
        module
        if isinstance(module, intrinsic.Hybrid)
        else intrinsic.Hybrid([module], name=module.name)
    )


def run(env_id: str, method: str, seed: int, steps: int, coef: float) -> dict[str, Any]:
    """Train one SB3 PPO run and return its finished episodes.

    :param env_id: a MiniGrid id
    :param method: a key of :data:`METHODS`
    :param seed: the seed
    :param steps: env steps to train for
    :param coef: the weight of the (RMS-scaled) bonus
    """
    torch.set_num_threads(1)
    venv = make_minigrid_vec(env_id, N_ENVS, seed=seed)
    model = PPO("MlpPolicy", venv, seed=seed, device="cpu", **PPO_SETTINGS)
    episodes = Episodes()
    callbacks: list[BaseCallback] = [episodes]
    module = bonus_module(method, venv, seed)
    if module is not None:
        callbacks.append(IntrinsicRewardCallback(module, coef=coef))
    start = time.perf_counter()
    model.learn(steps, callback=CallbackList(callbacks))
    return {
        "env_id": env_id,
        "method": method,
        "seed": seed,
        "episodes": episodes.episodes,
        "seconds": round(time.perf_counter() - start, 1),
    }


def success_curve(runs: list[dict[str, Any]], steps: int, bin_steps: int) -> list[float | None]:
    """The success rate per bin of env steps, pooled over the runs' episodes."""
    curve = []
    for low in range(0, steps, bin_steps):
        returns = [r for run in runs for t, r in run["episodes"] if low < t <= low + bin_steps]
        curve.append(float(np.mean([r > 0 for r in returns])) if returns else None)
    return curve


def write_markdown(path: Path, result: dict[str, Any]) -> None:
    config = result["config"]
    bins = [(i + 1) * config["bin"] for i in range(len(next(iter(result["curves"].values()))))]
    lines = [
        "# Intrinsic rewards on MiniGrid: success rate against env steps (SB3 PPO)",
        "",
        f"{config['seeds']} seed(s), {config['steps']} env steps per run, bonus coefficient "
        f"{config['coef']} on RMS-scaled bonuses. A cell is the fraction of episodes that ended "
        f"in the {config['bin']} env steps up to that column which reached the goal (pooled over "
        "seeds); `-` where no episode ended.",
        "",
        "| env | method | " + " | ".join(f"{b / 1000:g}k" for b in bins) + " | minutes |",
        "| --- | --- | " + " | ".join("---" for _ in bins) + " | --- |",
    ]
    for key, curve in result["curves"].items():
        env_id, method = key.split(" ")
        cells = ["-" if v is None else f"{v:.2f}" for v in curve]
        minutes = result["minutes"][key]
        lines.append(f"| {env_id} | {method} | " + " | ".join(cells) + f" | {minutes:.1f} |")
    if result.get("note"):
        lines += ["", result["note"]]
    lines += [
        "",
        f"SB3 PPO {json.dumps(PPO_SETTINGS)}, {N_ENVS} envs, MlpPolicy on the flattened view.",
        f"Minutes: summed over seeds, {config['workers']} runs at a time, one torch thread each, on "
        f"{result['machine']['summary']}.",
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", type=lambda s: s.split(","), default=list(ENVS))
    parser.add_argument("--methods", type=lambda s: s.split(","), default=list(METHODS))
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--coef", type=float, default=0.01)
    parser.add_argument("--bin", type=int, default=50_000, help="env steps per success-rate bin")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "intrinsic_minigrid")
    parser.add_argument("--note", default="", help="a paragraph for the result files")
    args = parser.parse_args()
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    jobs = [(e, m, s) for e in args.envs for m in args.methods for s in range(args.seeds)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(run, e, m, s, args.steps, args.coef) for e, m, s in jobs]
        runs = []
        for future in futures:
            runs.append(future.result())
            done = runs[-1]
            print(
                f"{done['env_id']} {done['method']} seed {done['seed']}: {done['seconds']} s",
                flush=True,
            )
    curves, minutes = {}, {}
    for env_id in args.envs:
        for method in args.methods:
            mine = [r for r in runs if r["env_id"] == env_id and r["method"] == method]
            curves[f"{env_id} {method}"] = success_curve(mine, args.steps, args.bin)
            minutes[f"{env_id} {method}"] = sum(r["seconds"] for r in mine) / 60
    result = {
        "config": {
            "envs": args.envs,
            "methods": args.methods,
            "steps": args.steps,
            "seeds": args.seeds,
            "coef": args.coef,
            "bin": args.bin,
            "workers": args.workers,
            "n_envs": N_ENVS,
            "ppo": PPO_SETTINGS,
        },
        "curves": curves,
        "minutes": minutes,
        "runs": runs,
        "machine": describe_machine(),
        "note": args.note,
        "command": " ".join(["python -m benchmarks.intrinsic_minigrid", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    (args.out.parent / f"{args.out.name}.json").write_text(json.dumps(result))
    write_markdown(args.out.parent / f"{args.out.name}.md", result)
    print((args.out.parent / f"{args.out.name}.md").read_text())


if __name__ == "__main__":
    main()
