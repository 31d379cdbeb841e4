"""Do ``rewardlab.agents.PPO``'s defaults solve? The default config against the previous one.

``PPO(envs.make(env_id, num_envs))`` with no hyperparameters given, trained for 100,000 env
steps, then 32 deterministic evaluation episodes; next to it the previous defaults
(``n_steps=128`` whatever the number of envs, SB3's learning rate 3e-4), same seeds.
Solved: CartPole-v1 >= 475, Acrobot-v1 >= -100 (mean over seeds).

    python -m benchmarks.ppo_defaults
    python -m benchmarks.ppo_defaults --envs CartPole-v1 --num-envs 64 --seeds 3

Writes ``benchmarks/results/ppo_defaults.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.machine import describe_machine, recorded_args
from rewardlab import envs
from rewardlab.agents import PPO
from rewardlab.agents.evaluation import play_episodes

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("agents/ppo.py", "envs/classic/")

RESULTS = Path(__file__).parent / "results"
SOLVED = {"CartPole-v1": 475.0, "Acrobot-v1": -100.0}
CONFIGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "previous defaults (n_steps 128, lr 3e-4)": {"n_steps": 128, "learning_rate": 3e-4},
}


def run(env_id: str, num_envs: int, seed: int, changes: dict[str, Any], steps: int) -> dict[str, Any]:
    model = PPO(envs.make(env_id, num_envs=num_envs, seed=seed), seed=seed, **changes)
    start = time.perf_counter()
    model.learn(steps)
    wall = time.perf_counter() - start
    episodes = play_episodes(model, envs.make(env_id, num_envs=32, seed=10_000 + seed))
    return {"return": episodes.mean_return, "train_s": wall, "n_steps": model.n_steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(SOLVED))
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for env_id in args.envs:
        for num_envs in args.num_envs:
            for label, changes in CONFIGS.items():
                runs = [run(env_id, num_envs, seed, changes, args.steps) for seed in range(args.seeds)]
                returns = [r["return"] for r in runs]
                rows.append({"env_id": env_id, "num_envs": num_envs, "config": label, "n_steps": runs[0]["n_steps"],
                             "returns": returns, "mean": statistics.fmean(returns),
                             "solved": statistics.fmean(returns) >= SOLVED[env_id],
                             "train_s": statistics.fmean(r["train_s"] for r in runs)})
                print(rows[-1], flush=True)
    machine = describe_machine()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ppo_defaults.json").write_text(
        json.dumps({"args": recorded_args(args), "machine": machine, "rows": rows}, indent=2) + "\n")
    lines = [
        "# PPO's default hyperparameters: do they solve within 100,000 steps?",
        "",
        f"`PPO(envs.make(env_id, num_envs), seed=seed)` with nothing else given, {args.steps:,} steps, "
        f"{args.seeds} seeds, then 32 deterministic evaluation episodes per seed; one torch thread. "
        f"Machine: {machine['summary']}.",
        "",
        "| env | envs | config | n_steps | mean return | per seed | solved | train s |",
        "|---|---|---|---|---|---|---|---|",
        *(f"| {r['env_id']} | {r['num_envs']} | {r['config']} | {r['n_steps']} | {r['mean']:.1f} | "
          f"{', '.join(f'{v:.0f}' for v in r['returns'])} | {'yes' if r['solved'] else 'no'} | {r['train_s']:.1f} |"
          for r in rows),
        "",
        f"Reproduce: `python -m benchmarks.ppo_defaults --envs {' '.join(args.envs)} --num-envs "
        f"{' '.join(map(str, args.num_envs))} --seeds {args.seeds}`.",
        "",
    ]
    (RESULTS / "ppo_defaults.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
