"""HRA on fruit collection (van Seijen et al., 2017): env steps to 90 % of the best possible.

Methods, all on batched ``FruitCollection-v0`` with 32 envs:

- ``hra-mean+1``, ``hra-max+1``: ``agents.HRA`` with one head per fruit position (``fruit_0`` ..
  ``fruit_9``), bootstrapped with the mean over actions (the uniformly random policy's value)
  or the max (Q-learning per head), each head seeing only the agent's cell and its own fruit
  bit (the paper's "+1", ``env.feature_masks()``);
- ``hra-mean``, ``hra-max``: the same without feature masks;
- ``dqn``: ``HRA(env, components=["extrinsic"], bootstrap="max")``, one head on the summed
  reward with the same total capacity (250 hidden units; HRA gives each of its 10 heads 25)
  and every other setting the same;
- ``ppo``, ``ppo-decomposed``: ``agents.PPO`` with one critic head on the summed reward, or one
  per fruit component (``value_heads=["fruit_0", ...]``).

The measure is the fruits eaten per training episode (the best possible is 5): the episodes
that end in each window of ``--window`` env steps are averaged, and a run reaches 90 % at the
end of the first window whose mean is at least 4.5 (over at least 16 episodes). The mean
episode length (the paper's measure: steps to eat every fruit, 300 at most) is kept too.
Runs stop when they reach 90 %, or at ``--steps``; ``--full`` runs every method to ``--steps``.

Writes ``benchmarks/results/hra_fruit.{json,md}``::

    python -m benchmarks.hra_fruit                     # 5 seeds, ~10 min on 2 loaded cores
    python -m benchmarks.hra_fruit --seeds 1 --steps 20000 --methods hra-mean+1,dqn --out /tmp/f
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch

import envs
from agents import HRA, PPO
from benchmarks.machine import describe_machine
from envs.core import BatchedWrapper

RESULTS = Path(__file__).parent / "results"
ENV_ID = "FruitCollection-v0"
NUM_ENVS = 32
BEST = 5.0
THRESHOLD = 0.9 * BEST
MIN_EPISODES = 16
FRUITS = [f"fruit_{k}" for k in range(10)]
METHODS = ("hra-mean+1", "hra-max+1", "hra-mean", "hra-max", "dqn", "ppo", "ppo-decomposed")
# Shared by every HRA variant and DQN. Epsilon falls from 1 to 0.05 over the first
# EXPLORATION_STEPS env steps of every run, whatever its budget.
HRA_SETTINGS = {
    "net_arch": [250],
    "learning_rate": 3e-3,
    "batch_size": 512,
    "gamma": 0.99,
    "buffer_size": 100_000,
    "learning_starts": 1_000,
    "target_update_interval": 512,
    "exploration_final_eps": 0.05,
}
EXPLORATION_STEPS = 10_000
PPO_SETTINGS = {
    "n_steps": 64,
    "learning_rate": 1e-3,
    "n_epochs": 4,
    "ent_coef": 0.01,
    "gamma": 0.99,
}


class EpisodeLog(BatchedWrapper):
    """Averages the fruits and lengths of the episodes that end in each window of env steps.

    Sums stay on the device; each window is read once, when it closes. Counting restarts at
    every reset (the learners reset the env when ``learn`` starts).

    :param env: the batched FruitCollection env.
    :param window: env steps (over all envs) per window.
    """

    def __init__(self, env: Any, window: int) -> None:
        super().__init__(env)
        self.window = window
        self.curve: list[dict[str, float]] = []
        self.reached: int | None = None

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset the env and the log.

        :param seed: the seed, or ``None``.
        :param options: the reset options, or ``None``.
        """
        self.steps, self.curve, self.reached = 0, [], None
        device = self.env.device
        self._running = torch.zeros((2, self.env.num_envs), device=device)  # fruits, length
        self._window_sums = torch.zeros(3, device=device)  # fruits, length, episodes
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: Any) -> Any:
        """Step the env and add the episodes that ended to the current window.

        :param actions: the batch of actions.
        """
        obs, reward, terminated, truncated, info = self.env.step(actions)
        ended = (terminated | truncated).float()
        self._running[0] += info["reward_components"]["extrinsic"]
        self._running[1] += 1.0
        self._window_sums[:2] += (self._running * ended).sum(dim=1)
        self._window_sums[2] += ended.sum()
        self._running *= 1.0 - ended
        self.steps += self.env.num_envs
        if self.steps % self.window < self.env.num_envs:
            self._close_window()
        return obs, reward, terminated, truncated, info

    def _close_window(self) -> None:
        fruits, length, episodes = self._window_sums.tolist()
        self._window_sums.zero_()
        if episodes == 0:
            return
        point = {
            "step": self.steps,
            "fruits": fruits / episodes,
            "length": length / episodes,
            "episodes": int(episodes),
        }
        self.curve.append(point)
        if self.reached is None and episodes >= MIN_EPISODES and point["fruits"] >= THRESHOLD:
            self.reached = self.steps


def make_model(method: str, env: Any, seed: int, steps: int) -> HRA | PPO:
    """The learner of ``method`` on ``env``.

    :param method: one of :data:`METHODS`.
    :param env: the (logged) FruitCollection env.
    :param seed: the run's seed.
    :param steps: the run's budget (sets HRA's exploration fraction).
    """
    if method.startswith("ppo"):
        heads = FRUITS if method == "ppo-decomposed" else None
        return PPO(env, seed=seed, value_heads=heads, **PPO_SETTINGS)
    settings = {
        **HRA_SETTINGS,
        "exploration_fraction": min(EXPLORATION_STEPS / steps, 1.0),
        "log_interval": env.window,
    }
    if method == "dqn":
        return HRA(env, components=["extrinsic"], bootstrap="max", seed=seed, **settings)
    bootstrap = "mean" if method.startswith("hra-mean") else "max"
    masks = env.unwrapped.feature_masks() if method.endswith("+1") else None
    return HRA(
        env, components=FRUITS, bootstrap=bootstrap, feature_masks=masks, seed=seed, **settings
    )


def run(method: str, seed: int, steps: int, window: int, full: bool) -> dict[str, Any]:
    """Train one seed of ``method`` until it reaches 90 % (unless ``full``) or ``steps``.

    :param method: one of :data:`METHODS`.
    :param seed: seeds the env and the learner.
    :param steps: the budget in env steps.
    :param window: env steps per point of the curve.
    :param full: run to the budget even after reaching 90 %.
    """
    torch.set_num_threads(1)
    env = EpisodeLog(envs.make(ENV_ID, num_envs=NUM_ENVS, seed=seed), window)
    model = make_model(method, env, seed, steps)
    start = time.perf_counter()
    model.learn(steps, callback=lambda _: full or env.reached is None)
    last = env.curve[-1] if env.curve else {"fruits": math.nan, "length": math.nan}
    return {
        "method": method,
        "seed": seed,
        "reached_90": env.reached is not None,
        "steps_to_90": env.reached,
        "steps": env.steps,
        "final_fruits": last["fruits"],
        "final_length": last["length"],
        "seconds": round(time.perf_counter() - start, 1),
        "curve": env.curve,
    }


def summarise(runs: list[dict[str, Any]], methods: list[str], steps: int) -> dict[str, Any]:
    """Per method: seeds that reached 90 %, the median steps to it (unreached seeds count as
    never: the median is then a lower bound when it falls on them) and its ratio to DQN's."""
    summary: dict[str, Any] = {}
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        to_90 = sorted(r["steps_to_90"] if r["reached_90"] else math.inf for r in mine)
        median = statistics.median(to_90) if to_90 else math.inf
        summary[method] = {
            "reached": sum(r["reached_90"] for r in mine),
            "seeds": len(mine),
            "median_steps_to_90": None if math.isinf(median) else median,
            "steps_to_90": [r["steps_to_90"] for r in mine],
            "final_fruits_mean": statistics.fmean(r["final_fruits"] for r in mine),
            "final_length_mean": statistics.fmean(r["final_length"] for r in mine),
            "seconds": round(sum(r["seconds"] for r in mine), 1),
        }
    if "dqn" in summary:
        dqn = summary["dqn"]["median_steps_to_90"]
        for row in summary.values():
            mine = row["median_steps_to_90"]
            # DQN not reaching 90 % within the budget makes every ratio a lower bound.
            row["dqn_over_method"] = None if mine is None else (dqn or steps) / mine
            row["ratio_is_lower_bound"] = dqn is None
    return summary


def write_markdown(path: Path, result: dict[str, Any]) -> None:
    """The table of ``result`` as Markdown."""
    args, machine = result["args"], result["machine"]
    lines = [
        "# HRA on fruit collection: env steps to 90 % of the best possible",
        "",
        f"`{result['command']}`",
        "",
        f"Machine: {machine['summary']}. Wall time {result['wall_seconds']:.0f} s with "
        f"{args['workers']} worker process(es), one torch thread each.",
        "",
        f"{ENV_ID}, {NUM_ENVS} envs, {args['seeds']} seeds, at most {args['steps']:,} env steps "
        f"per run{'' if args['full'] else ', stopped on reaching 90 %'}. "
        f"Fruits per training episode, averaged over the episodes ending in each window of "
        f"{args['window']:,} steps; 90 % = {THRESHOLD} of {BEST:.0f} fruits.",
        "",
        "| method | seeds reaching 90 % | median steps to 90 % | DQN / method | per seed | "
        "fruits at the end | episode length at the end |",
        "|---|---|---|---|---|---|---|",
    ]
    for method, row in result["summary"].items():
        median = row["median_steps_to_90"]
        ratio = row.get("dqn_over_method")
        ratio_text = (
            "—" if ratio is None else f"{'≥ ' if row['ratio_is_lower_bound'] else ''}{ratio:.1f}x"
        )
        per_seed = ", ".join("—" if s is None else f"{s // 1000}k" for s in row["steps_to_90"])
        lines.append(
            f"| {method} | {row['reached']}/{row['seeds']} | "
            f"{'> budget' if median is None else f'{median:,.0f}'} | {ratio_text} | {per_seed} | "
            f"{row['final_fruits_mean']:.2f} | {row['final_length_mean']:.0f} |"
        )
    lines += [
        "",
        '"At the end": the last window of each run (at 90 % or at the budget), averaged over '
        "seeds. A median over seeds of which some never reached 90 % counts those as never; "
        '"> budget" means half or more did not. When DQN does not reach 90 % the ratios use '
        "the budget for DQN and are lower bounds (≥).",
        "",
        "Settings: HRA and DQN " + json.dumps(HRA_SETTINGS) + f", epsilon 1 -> 0.05 over "
        f"{EXPLORATION_STEPS:,} steps, one gradient step per call of env.step ({NUM_ENVS} "
        "transitions); PPO " + json.dumps(PPO_SETTINGS) + ".",
        "",
    ]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated, of " + ", ".join(METHODS)
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100_000, help="budget per run, env steps")
    parser.add_argument("--window", type=int, default=5_000, help="env steps per curve point")
    parser.add_argument(
        "--full", action="store_true", help="run to the budget after reaching 90 %%"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "hra_fruit")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")

    start = time.perf_counter()
    jobs = [(m, seed) for seed in range(args.seeds) for m in methods]
    runs = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [
            pool.submit(run, m, seed, args.steps, args.window, args.full) for m, seed in jobs
        ]
        for future in futures:
            result = future.result()
            runs.append(result)
            brief = {k: v for k, v in result.items() if k != "curve"}
            print(json.dumps(brief), flush=True)
    result = {
        "command": " ".join(["python -m benchmarks.hra_fruit", *sys.argv[1:]]),
        "args": {**vars(args), "out": str(args.out), "methods": methods},
        "machine": describe_machine(),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "settings": {
            "hra": HRA_SETTINGS,
            "exploration_steps": EXPLORATION_STEPS,
            "ppo": PPO_SETTINGS,
        },
        "summary": summarise(runs, methods, args.steps),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    write_markdown(args.out.with_suffix(".md"), result)
    print(args.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
