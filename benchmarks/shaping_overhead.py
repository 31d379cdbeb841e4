"""Steps/s of CartPole-v1 with and without each shaping wrapper, measured in one run.

Three settings: a single Gymnasium env, Gymnasium's vector CartPole (its numpy
``vector_entry_point``) with 64 envs, and SB3's ``DummyVecEnv`` with 8 envs.
Plain and wrapped envs are timed in alternation, ``--repeats`` times each, and
the median ratio of steps/s is reported. Writes
``benchmarks/results/shaping_overhead.{json,md}``.

    python benchmarks/shaping_overhead.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env

from benchmarks.machine import describe_machine
from rewardlab.shaping import (
    PotentialShaping,
    PotentialShapingVector,
    VecPotentialShaping,
    potentials,
)

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("shaping/",)

RESULTS = Path(__file__).parent / "results"
ENV_ID = "CartPole-v1"


def time_single(env: gym.Env, steps: int) -> float:
    actions = np.random.default_rng(0).integers(0, 2, size=steps)
    env.reset(seed=0)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def time_gym_vector(env: gym.vector.VectorEnv, steps: int) -> float:
    calls = steps // env.num_envs
    actions = np.random.default_rng(0).integers(0, 2, size=(calls, env.num_envs))
    env.reset(seed=0)
    start = time.perf_counter()
    for batch in actions:
        env.step(batch)
    return calls * env.num_envs / (time.perf_counter() - start)


def time_sb3(venv, steps: int) -> float:
    calls = steps // venv.num_envs
    actions = np.random.default_rng(0).integers(0, 2, size=(calls, venv.num_envs))
    venv.reset()
    start = time.perf_counter()
    for batch in actions:
        venv.step(batch)
    return calls * venv.num_envs / (time.perf_counter() - start)


def settings(phi) -> list[tuple[str, Callable, Callable, Callable, int]]:
    """(name, make plain, make wrapped, timer, steps per measurement)."""
    return [
        (
            "single env",
            lambda: gym.make(ENV_ID),
            lambda: PotentialShaping(gym.make(ENV_ID), phi),
            time_single,
            20_000,
        ),
        (
            "Gymnasium vector, 64 envs",
            lambda: gym.make_vec(ENV_ID, 64, vectorization_mode="vector_entry_point"),
            lambda: PotentialShapingVector(
                gym.make_vec(ENV_ID, 64, vectorization_mode="vector_entry_point"), phi
            ),
            time_gym_vector,
            640_000,
        ),
        (
            "SB3 DummyVecEnv, 8 envs",
            lambda: make_vec_env(ENV_ID, n_envs=8, seed=0),
            lambda: VecPotentialShaping(make_vec_env(ENV_ID, n_envs=8, seed=0), phi),
            time_sb3,
            40_000,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS / "shaping_overhead"))
    args = parser.parse_args()
    phi = potentials.for_env(ENV_ID)
    rows = []
    for name, make_plain, make_wrapped, timer, steps in settings(phi):
        plain_env, wrapped_env = make_plain(), make_wrapped()
        timer(plain_env, steps // 10)  # warm-up
        timer(wrapped_env, steps // 10)
        plain, wrapped = [], []
        for _ in range(args.repeats):
            plain.append(timer(plain_env, steps))
            wrapped.append(timer(wrapped_env, steps))
        ratios = [w / p for w, p in zip(wrapped, plain)]
        row = {
            "setting": name,
            "plain_steps_per_s": statistics.median(plain),
            "shaped_steps_per_s": statistics.median(wrapped),
            "ratio_shaped_over_plain": statistics.median(ratios),
            "overhead": 1 / statistics.median(ratios) - 1,
        }
        print(json.dumps(row))
        rows.append(row)
    machine = describe_machine()
    lines = [
        f"# Shaping wrapper overhead on {ENV_ID}",
        "",
        f"Median of {args.repeats} alternating measurements; random actions drawn before timing.",
        f"Machine: {machine['summary']}.",
        "",
        "| setting | plain steps/s | shaped steps/s | shaped / plain | overhead |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['setting']} | {row['plain_steps_per_s']:,.0f} | {row['shaped_steps_per_s']:,.0f} "
            f"| {row['ratio_shaped_over_plain']:.2f} | {row['overhead']:.1%} |"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
