"""HRA on fruit collection (van Seijen et al., 2017): env steps to 90 % of the best possible.

Methods, all on batched ``FruitCollection-v0`` with 32 envs:

- ``hra-mean+1``, ``hra-max+1``: ``rewardlab.agents.HRA`` with one head per fruit position (``fruit_0`` ..
  ``fruit_9``), bootstrapped with the mean over actions (the uniformly random policy's value)
  or the max (Q-learning per head), each head seeing only the agent's cell and its own fruit
  bit (the paper's "+1", ``env.feature_masks()``);
- ``hra-mean``, ``hra-max``: the same without feature masks;
- ``dqn``: ``HRA(env, components=["extrinsic"], bootstrap="max")``, one head on the summed
  reward with the same total capacity (250 hidden units; HRA gives each of its 10 heads 25)
  and every other setting the same;
- ``ppo``, ``ppo-decomposed``: ``rewardlab.agents.PPO`` with one critic head on the summed reward, or one
  per fruit component (``value_heads=["fruit_0", ...]``).

The measure is the fruits eaten per episode (the best possible is 5) on 64 fresh evaluation
episodes, run every ``--eval-every`` env steps (the same 64 start states each time) with the
policy as it acts once exploration has settled: epsilon-greedy with epsilon 0.05 for HRA and
DQN (the DQN papers' evaluation), sampled for PPO. A run reaches 90 % at the first evaluation
with a mean of at least 4.5 fruits, and stops there (``--full``: runs on to ``--steps``).
The mean episode length (the paper's measure: steps to eat every fruit, 300 at most; the
shortest possible averages about 24 steps) is kept too. (Averaging the training episodes
that end in a window instead is biased: short, complete episodes end more often.)

Writes ``benchmarks/results/hra_fruit.{json,md}``::

    python -m benchmarks.hra_fruit                     # 5 seeds: 23 min on 2 loaded cores
    python -m benchmarks.hra_fruit --seeds 3           # about 14 min there
    python -m benchmarks.hra_fruit --seeds 1 --steps 20000 --methods hra-mean+1,dqn --out /tmp/f
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch

from benchmarks.machine import describe_machine, recorded_args
from rewardlab import envs
from rewardlab.agents import HRA, PPO

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("agents/hra.py", "agents/ppo.py", "agents/base.py", "envs/fruit.py")

RESULTS = Path(__file__).parent / "results"
ENV_ID = "FruitCollection-v0"
NUM_ENVS = 32
BEST = 5.0
THRESHOLD = 0.9 * BEST
EVAL_EPISODES = 64
EVAL_EPSILON = 0.05
# Both learners call back every 2048 env steps (PPO: 64 steps x 32 envs per rollout), so
# every method is evaluated at the same steps.
CALLBACK_EVERY = 2048
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


class Evaluation:
    """Runs ``EVAL_EPISODES`` fresh episodes of a model at once and keeps the curve.

    :param seed: seeds the evaluation env (the same start states at every evaluation) and the
        exploration of the evaluated policy.
    """

    def __init__(self, seed: int) -> None:
        self.env = envs.make(ENV_ID, num_envs=EVAL_EPISODES, seed=10_000 + seed)
        self.seed = seed
        self.curve: list[dict[str, float]] = []
        self.reached: int | None = None

    def __call__(self, model: HRA | PPO) -> None:
        """Evaluate ``model`` and add a point to the curve.

        :param model: the learner, at ``model.num_timesteps``.
        """
        generator = torch.Generator().manual_seed(self.seed + model.num_timesteps)
        obs, _ = self.env.reset(seed=10_000 + self.seed)
        fruits = torch.zeros(EVAL_EPISODES)
        length = torch.zeros(EVAL_EPISODES)
        running = torch.ones(EVAL_EPISODES, dtype=torch.bool)
        while running.any():
            if isinstance(model, PPO):
                actions = model.predict(obs, deterministic=False)[0]
            else:
                greedy = model.predict(obs)[0]
                explore = torch.rand(EVAL_EPISODES, generator=generator) < EVAL_EPSILON
                random_actions = torch.randint(4, (EVAL_EPISODES,), generator=generator)
                actions = torch.where(explore, random_actions, greedy)
            obs, reward, terminated, truncated, _ = self.env.step(actions)
            fruits += reward * running
            length += running.float()
            running &= ~(terminated | truncated)
        point = {
            "step": model.num_timesteps,
            "fruits": float(fruits.mean()),
            "length": float(length.mean()),
        }
        self.curve.append(point)
        if self.reached is None and point["fruits"] >= THRESHOLD:
            self.reached = model.num_timesteps


def optimal_length(samples: int = 10_000) -> float:
    """The mean length of the shortest episodes: for sampled start states, the shortest walk
    that eats all 5 fruits (Manhattan distances, the best of the 120 orders)."""
    env = envs.make(ENV_ID, num_envs=samples, seed=0)
    env.reset()
    state = env.state
    positions = torch.tensor(env.fruit_positions, dtype=torch.float32)
    fruits = positions[(state[:, 2:] > 0.5).nonzero()[:, 1].view(samples, -1)]  # (S, 5, 2)
    best = torch.full((samples,), math.inf)
    for order in itertools.permutations(range(fruits.shape[1])):
        path = fruits[:, list(order)]
        steps = (path[:, 0] - state[:, :2]).abs().sum(dim=1)
        steps += (path[:, 1:] - path[:, :-1]).abs().sum(dim=(1, 2))
        best = torch.minimum(best, steps)
    return float(best.mean())


def make_model(method: str, env: Any, seed: int, steps: int) -> HRA | PPO:
    """The learner of ``method`` on ``env``.

    :param method: one of :data:`METHODS`.
    :param env: the FruitCollection env.
    :param seed: the run's seed.
    :param steps: the run's budget (sets HRA's exploration fraction).
    """
    if method.startswith("ppo"):
        heads = FRUITS if method == "ppo-decomposed" else None
        return PPO(env, seed=seed, value_heads=heads, **PPO_SETTINGS)
    settings = {
        **HRA_SETTINGS,
        "exploration_fraction": min(EXPLORATION_STEPS / steps, 1.0),
        "log_interval": CALLBACK_EVERY,
    }
    if method == "dqn":
        return HRA(env, components=["extrinsic"], bootstrap="max", seed=seed, **settings)
    bootstrap = "mean" if method.startswith("hra-mean") else "max"
    masks = env.feature_masks() if method.endswith("+1") else None
    return HRA(
        env, components=FRUITS, bootstrap=bootstrap, feature_masks=masks, seed=seed, **settings
    )


def run(method: str, seed: int, steps: int, eval_every: int, full: bool) -> dict[str, Any]:
    """Train one seed of ``method`` until it reaches 90 % (unless ``full``) or ``steps``.

    :param method: one of :data:`METHODS`.
    :param seed: seeds the env and the learner.
    :param steps: the budget in env steps.
    :param eval_every: env steps between evaluations.
    :param full: run to the budget even after reaching 90 %.
    """
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    env = envs.make(ENV_ID, num_envs=NUM_ENVS, seed=seed)
    model = make_model(method, env, seed, steps)
    evaluation = Evaluation(seed)
    next_eval = [eval_every]

    def callback(local: dict[str, Any]) -> bool:
        if model.num_timesteps >= next_eval[0]:
            evaluation(model)
            next_eval[0] += eval_every
        return full or evaluation.reached is None

    start = time.perf_counter()
    model.learn(steps, callback=callback)
    if not evaluation.curve or evaluation.curve[-1]["step"] != model.num_timesteps:
        evaluation(model)
    last = evaluation.curve[-1]
    return {
        "method": method,
        "seed": seed,
        "reached_90": evaluation.reached is not None,
        "steps_to_90": evaluation.reached,
        "steps": model.num_timesteps,
        "final_fruits": last["fruits"],
        "final_length": last["length"],
        "seconds": round(time.perf_counter() - start, 1),
        "curve": evaluation.curve,
    }


def summarise(
    runs: list[dict[str, Any]], methods: list[str], steps: int, checkpoints: list[int]
) -> dict[str, Any]:
    """Per method: seeds that reached 90 %, the median steps to it (unreached seeds count as
    never: the median is then a lower bound when it falls on them), its ratio to DQN's, and
    the mean fruits and episode length at each checkpoint that every seed reached."""
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
            "curve": {},
        }
        for checkpoint in checkpoints:
            points = [p for r in mine for p in r["curve"] if p["step"] == checkpoint]
            if points and len(points) == len(mine):
                summary[method]["curve"][checkpoint] = {
                    "fruits": statistics.fmean(p["fruits"] for p in points),
                    "length": statistics.fmean(p["length"] for p in points),
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
        f"per run{'' if args['full'] else ', stopped on reaching 90 %'}. Every "
        f"{args['eval_every']:,} env steps, {EVAL_EPISODES} evaluation episodes (epsilon "
        f"{EVAL_EPSILON} for HRA and DQN, sampled actions for PPO); 90 % = {THRESHOLD} of "
        f"{BEST:.0f} fruits per episode. The shortest possible episodes average "
        f"{result['optimal_length']:.1f} steps.",
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
    checkpoints = sorted({c for row in result["summary"].values() for c in row["curve"]}, key=int)
    lines += [
        "",
        "Fruits per episode / episode length at the evaluations (means over seeds; blank once a "
        "seed has stopped):",
        "",
        "| method | " + " | ".join(f"{int(c) // 1000}k" for c in checkpoints) + " |",
        "|---|" + "---|" * len(checkpoints),
    ]
    for method, row in result["summary"].items():
        cells = [row["curve"].get(c) for c in checkpoints]
        lines.append(
            f"| {method} | "
            + " | ".join(
                "" if p is None else f"{p['fruits']:.2f} / {p['length']:.0f}" for p in cells
            )
            + " |"
        )
    lines += [
        "",
        '"At the end": the last evaluation of each run (at 90 % or at the budget), averaged over '
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
    parser.add_argument(
        "--eval-every", type=int, default=2 * CALLBACK_EVERY, help="env steps between evaluations"
    )
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

    checkpoints = [
        k * args.eval_every for k in (2, 4, 6, 8, 12, 16, 24) if k * args.eval_every <= args.steps
    ]
    start = time.perf_counter()
    jobs = [(m, seed) for seed in range(args.seeds) for m in methods]
    runs = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [
            pool.submit(run, m, seed, args.steps, args.eval_every, args.full) for m, seed in jobs
        ]
        for future in futures:
            result = future.result()
            runs.append(result)
            brief = {k: v for k, v in result.items() if k != "curve"}
            print(json.dumps(brief), flush=True)
    result = {
        "command": " ".join(["python -m benchmarks.hra_fruit", *sys.argv[1:]]),
        "args": {**recorded_args(args), "methods": methods},
        "machine": describe_machine(),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "settings": {
            "hra": HRA_SETTINGS,
            "exploration_steps": EXPLORATION_STEPS,
            "ppo": PPO_SETTINGS,
        },
        "optimal_length": optimal_length(),
        "summary": summarise(runs, methods, args.steps, checkpoints),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    write_markdown(args.out.with_suffix(".md"), result)
    print(args.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
