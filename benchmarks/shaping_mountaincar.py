"""SB3 PPO on MountainCar-v0 with and without the built-in energy potential.

Default PPO hyperparameters, 8 envs, 100k steps, 5 seeds. The shaped runs train
on ``VecPotentialShaping`` (Monitor innermost, so ``ep_rew_mean`` is the true
return); both are evaluated on the plain, unshaped env with the deterministic
policy. Writes ``benchmarks/results/shaping_mountaincar.{json,md}``.

    python benchmarks/shaping_mountaincar.py            # the full run
    python benchmarks/shaping_mountaincar.py --seeds 0 --steps 20000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from benchmarks.machine import describe_machine, recorded_args
from rewardlab.shaping import VecPotentialShaping, potentials

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("shaping/core.py", "shaping/potentials.py", "shaping/sb3.py")

RESULTS = Path(__file__).parent / "results"
ENV_ID = "MountainCar-v0"


def train_and_evaluate(shaped: bool, seed: int, steps: int, weight: float, eval_episodes: int) -> dict:
    venv = make_vec_env(ENV_ID, n_envs=8, seed=seed)
    model_gamma = 0.99  # SB3 PPO's default discount, which the shaping must use
    if shaped:
        venv = VecPotentialShaping(venv, potentials.for_env(ENV_ID, weight=weight), gamma=model_gamma)
    model = PPO("MlpPolicy", venv, gamma=model_gamma, seed=seed, device="cpu")
    start = time.perf_counter()
    model.learn(steps)
    train_seconds = time.perf_counter() - start
    training_goal_episodes = sum(1 for ep in model.ep_info_buffer if ep["l"] < 200)
    eval_env = make_vec_env(ENV_ID, n_envs=1, seed=10_000 + seed)
    returns, lengths = evaluate_policy(
        model, eval_env, n_eval_episodes=eval_episodes, deterministic=True, return_episode_rewards=True
    )
    return {
        "shaped": shaped,
        "seed": seed,
        "eval_return_mean": float(np.mean(returns)),
        "eval_goal_rate": float(np.mean(np.array(lengths) < 200)),
        "reached_goal": bool(np.mean(np.array(lengths) < 200) > 0),
        "last_100_training_episodes_at_goal": training_goal_episodes,
        "train_seconds": train_seconds,
    }


def markdown(runs: list[dict], args: argparse.Namespace, machine: dict) -> str:
    lines = [
        f"# SB3 PPO on {ENV_ID}: plain vs built-in energy potential",
        "",
        f"Default PPO hyperparameters, 8 envs, {args.steps} steps per run, potential weight "
        f"{args.weight}; evaluation: {args.eval_episodes} deterministic episodes on the unshaped env.",
        f"Machine: {machine['summary']}.",
        "",
        "| reward | seed | true eval return | goal reached (eval rate) | train s |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        lines.append(
            f"| {'shaped' if run['shaped'] else 'plain'} | {run['seed']} | {run['eval_return_mean']:.1f} "
            f"| {'yes' if run['reached_goal'] else 'no'} ({run['eval_goal_rate']:.0%}) "
            f"| {run['train_seconds']:.0f} |"
        )
    lines += ["", "| reward | seeds reaching the goal | mean true eval return |", "|---|---|---|"]
    for shaped in sorted({r["shaped"] for r in runs}):
        group = [r for r in runs if r["shaped"] == shaped]
        lines.append(
            f"| {'shaped' if shaped else 'plain'} | {sum(r['reached_goal'] for r in group)} of {len(group)} "
            f"| {np.mean([r['eval_return_mean'] for r in group]):.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--weight", type=float, default=potentials.MountainCarEnergy().weight)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--rewards", default="plain,shaped", help="which of plain,shaped to run")
    parser.add_argument("--out", default=str(RESULTS / "shaping_mountaincar"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = []
    for seed in seeds:
        for shaped in [name == "shaped" for name in args.rewards.split(",")]:
            run = train_and_evaluate(shaped, seed, args.steps, args.weight, args.eval_episodes)
            print(json.dumps(run))
            runs.append(run)
    machine = describe_machine()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(
        json.dumps({"machine": machine, "args": recorded_args(args), "runs": runs}, indent=2) + "\n"
    )
    table = markdown(runs, args, machine)
    out.with_suffix(".md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
