"""``rewardlab quickstart``: the main job, plain against shaped on MountainCar-v0.

Trains SB3 PPO on MountainCar-v0 with and without the built-in energy
potential, a few seeds each, evaluates every run on the true (unshaped) reward,
prints a table and leaves TensorBoard logs to compare the curves.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ENV_ID = "MountainCar-v0"


def run_quickstart(args: argparse.Namespace) -> int:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    from shaping import VecPotentialShaping, potentials

    torch.set_num_threads(1)
    logdir = Path(args.logdir)
    seeds = [int(s) for s in args.seeds.split(",")]
    results: dict[str, list[tuple[float, float]]] = {"plain": [], "shaped": []}
    for reward in ("plain", "shaped"):
        for seed in seeds:
            started = time.perf_counter()
            venv = make_vec_env(ENV_ID, n_envs=8, seed=seed)  # Monitor innermost: true returns
            if reward == "shaped":
                venv = VecPotentialShaping(venv, potentials.for_env(ENV_ID), gamma=0.99)
            model = PPO(
                "MlpPolicy", venv, gamma=0.99, seed=seed, device="cpu",
                tensorboard_log=str(logdir),
            )
            model.learn(args.steps, tb_log_name=f"{reward}_seed{seed}")
            returns, lengths = evaluate_policy(
                model, make_vec_env(ENV_ID, n_envs=1, seed=10_000 + seed),
                n_eval_episodes=5, deterministic=True, return_episode_rewards=True,
            )
            goal_rate = float(np.mean(np.array(lengths) < 200))
            results[reward].append((float(np.mean(returns)), goal_rate))
            print(
                f"{reward:>6} seed {seed}: true eval return {np.mean(returns):7.1f}, "
                f"goal reached in {goal_rate:.0%} of eval episodes "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    print("\n| reward | seeds | mean true eval return | seeds reaching the goal |\n|---|---|---|---|")
    for reward, runs in results.items():
        print(
            f"| {reward} | {len(runs)} | {np.mean([r for r, _ in runs]):.1f} "
            f"| {sum(rate > 0 for _, rate in runs)} of {len(runs)} |"
        )
    print(f"\nCompare the curves: tensorboard --logdir {logdir}")
    return 0


def register_quickstart(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "quickstart",
        help="train PPO on MountainCar-v0 with and without shaping and compare",
        description=__doc__,
    )
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per run")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--logdir", default="runs/quickstart", help="TensorBoard log directory")
    parser.set_defaults(func=run_quickstart)
