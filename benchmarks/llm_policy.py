"""An LLM as the policy: true return, invalid answers, tokens, cost and latency per env.

For each env, the LLM plays ``--episodes`` episodes without shaping and, where the env has
a built-in potential, with it (its term reaches the prompt as dense feedback); a uniformly
random policy plays the same seeds beside it in the same run, as the reference. Writes
``benchmarks/results/llm_policy.{json,md}`` (or under ``--out``).

Needs an OpenAI-compatible endpoint; without ``--llm`` (or ``REWARDLAB_LLM``), or when
the endpoint cannot be reached, it says so and exits with 0, writing nothing.

    python -m benchmarks.llm_policy --llm ollama:qwen2.5:7b
    python -m benchmarks.llm_policy --llm compatible:my-model --base-url http://host:8000/v1 \\
        --envs CartPole-v1,DeepSea-v0 --episodes 4
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.machine import describe_machine
from rewardlab.agents.llm_policy import LLMPolicy
from rewardlab.agents.llm_policy.codecs import codec_for
from rewardlab.app.llm_play import make_env, play
from rewardlab.common.terminal import terminal_line
from rewardlab.llm_reward.clients import EndpointError, LLMError, make_client
from rewardlab.shaping import potentials

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("agents/llm_policy/", "rewardlab/app/llm_play.py")

RESULTS = Path(__file__).parent / "results"
ENVS = ("CartPole-v1", "MountainCar-v0", "Acrobot-v1", "Pendulum-v1", "DeepSea-v0", "FruitCollection-v0")


class RandomPolicy:
    """Uniformly random actions, through the interface :func:`play` uses.

    :param action_space: one env's action space.
    :param seed: seeds the space's sampler.
    """

    def __init__(self, action_space: Any, seed: int) -> None:
        self.action_space = action_space
        self.action_space.seed(seed)

    def predict(self, obs: Any, active: Any = None) -> tuple[np.ndarray, None]:
        return np.stack([self.action_space.sample() for _ in range(len(obs))]), None

    def record_step(self, reward_components: Any, done: Any = None) -> None:
        pass

    def reset(self) -> None:
        pass


def measure(client: Any, env_id: str, shaping: str, args: argparse.Namespace) -> dict[str, Any]:
    """One env and shaping: the LLM's episodes and the random policy's on the same seeds."""
    env = make_env(env_id, args.episodes, shaping, args.seed, gamma=LLMPolicy.gamma)
    policy = LLMPolicy(
        client, codec_for(env_id), history=args.history, max_concurrency=args.max_concurrency,
        fatal_errors=(EndpointError,),
    )  # fmt: skip
    started = time.perf_counter()
    try:
        episodes = play(policy, env, args.episodes, seed=args.seed)
    finally:
        policy.close()
    wall = time.perf_counter() - started
    random_env = make_env(env_id, args.episodes, "none", args.seed, gamma=LLMPolicy.gamma)
    space = getattr(random_env, "single_action_space", None) or random_env.action_space
    random_episodes = play(RandomPolicy(space, args.seed), random_env, args.episodes, seed=args.seed)
    env.close()
    random_env.close()
    stats = policy.stats()
    steps = sum(e["length"] for e in episodes)
    return {
        "env": env_id,
        "shaping": shaping,
        "episodes": len(episodes),
        "return_mean": float(np.mean([e["return"] for e in episodes])),
        "return_std": float(np.std([e["return"] for e in episodes])),
        "random_return_mean": float(np.mean([e["return"] for e in random_episodes])),
        "steps": steps,
        "invalid_rate": stats["invalid_rate"],
        "fallback_rate": stats["fallback_rate"],
        "failures": stats["failures"],
        "tokens": stats["tokens"],
        "tokens_per_step": stats["tokens"] / max(steps, 1),
        "cost_usd": stats["cost_usd"],
        "latency_s_mean": stats["latency_s_mean"],
        "latency_s_max": stats["latency_s_max"],
        "wall_s": wall,
    }


def markdown(rows: list[dict[str, Any]], model: str, args: argparse.Namespace, machine: dict) -> str:
    lines = [
        f"# An LLM as the policy: {model}",
        "",
        f"{args.episodes} episodes per row (seed {args.seed}), history {args.history}, "
        f"{args.max_concurrency} requests at once. Return: the env's own (true) return; random: "
        "a uniformly random policy on the same seeds.",
        "",
        "| env | shaping | return | random | invalid | fallback | tokens/step | latency s | cost USD |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cost = "?" if row["cost_usd"] is None else f"{row['cost_usd']:.4f}"
        lines.append(
            f"| {row['env']} | {row['shaping']} | {row['return_mean']:.2f} ± {row['return_std']:.2f} "
            f"| {row['random_return_mean']:.2f} | {row['invalid_rate']:.1%} | {row['fallback_rate']:.1%} "
            f"| {row['tokens_per_step']:.0f} | {row['latency_s_mean']:.2f} | {cost} |"
        )
    lines += ["", f"Machine: {json.dumps(machine)}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm", default=os.environ.get("REWARDLAB_LLM"), help="PROVIDER:MODEL")
    parser.add_argument("--base-url", dest="base_url")
    parser.add_argument("--envs", default=",".join(ENVS), help="comma-separated env ids")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--history", type=int, default=4)
    parser.add_argument("--max-concurrency", dest="max_concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the result files")
    args = parser.parse_args(argv)
    if not args.llm:
        print("no LLM endpoint given (--llm PROVIDER:MODEL [--base-url URL], or REWARDLAB_LLM); "
              "nothing measured, nothing written")  # fmt: skip
        return 0
    try:
        client = make_client(args.llm, base_url=args.base_url, temperature=0.0,
                             timeout_s=args.timeout, retries=1)  # fmt: skip
        client.check()
    except (ValueError, LLMError) as error:
        print(f"no usable LLM endpoint ({terminal_line(str(error))}); nothing measured, nothing written")
        return 0
    rows = []
    try:
        for env_id in args.envs.split(","):
            shapings = ["none", "builtin"] if env_id in potentials.available() else ["none"]
            for shaping in shapings:
                rows.append(measure(client, env_id, shaping, args))
                print(json.dumps(rows[-1]), flush=True)
    except EndpointError as error:
        print(f"the endpoint stopped serving ({terminal_line(str(error))}); nothing written")
        return 0
    machine = describe_machine()
    result = {"llm": client.describe(), "args": {k: str(v) for k, v in vars(args).items()},
              "machine": machine, "rows": rows}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "llm_policy.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "llm_policy.md").write_text(markdown(rows, client.describe(), args, machine))
    print(f"wrote {args.out / 'llm_policy.json'} and {args.out / 'llm_policy.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
