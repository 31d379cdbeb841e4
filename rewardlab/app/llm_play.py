"""``rewardlab llm-play``: an LLM plays episodes, logged like an RL run so ``rewardlab compare`` shows both.

The run directory is laid out as ``rewardlab train`` lays it out::

    runs/NAME/seed_0/
        config.json      the resolved settings (never the API key)
        tb/              TensorBoard: rollout/ep_rew_mean (the true return), rollout/ep_len_mean,
                         reward/<c> (mean per step), episode/<c> (sum per episode),
                         llm/invalid_rate, llm/fallback_rate, llm/tokens, llm/latency_s, llm/cost_usd
        metrics.json     returns, invalid-answer rate, tokens, cost and latency

Example::

    rewardlab llm-play --env CartPole-v1 --llm ollama:qwen2.5:7b --episodes 4 \\
        --shaping builtin --history 4 --logdir runs/llm_cartpole
    rewardlab compare runs/ppo_cartpole runs/llm_cartpole --out cmp
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from rewardlab.app.arguments import plain_text
from rewardlab.common.seeds import check_seeds
from rewardlab.common.terminal import terminal_line

SHAPINGS = ("none", "builtin")
EPISODE_WINDOW = 100  # rollout/ep_rew_mean averages the last 100 episodes, as SB3 does


def make_env(env_id: str, num_envs: int, shaping: str, seed: int, gamma: float) -> Any:
    """The env the policy plays: a batched env (optionally shaped), or MiniGrid as a vector env.

    :param env_id: a batched env id (``rewardlab.envs.registered()``), a MiniGrid id (the agent's
        view and mission) or any other id Gymnasium can make.
    :param num_envs: how many copies.
    :param shaping: ``"none"`` or ``"builtin"`` (the env's potential, ``rewardlab.shaping.potentials``).
    :param seed: seeds the env.
    :param gamma: the discount of the shaping term: the player's (``LLMPolicy.gamma``).
    :raises ValueError: an unknown env or shaping.
    """
    from rewardlab import envs
    from rewardlab.shaping import BatchedPotentialShaping, potentials

    if shaping not in SHAPINGS:
        raise ValueError(f"unknown shaping {shaping!r}; choose from {', '.join(SHAPINGS)}")
    from rewardlab.envs.minigrid import is_minigrid_id

    if env_id.startswith("MiniGrid-") or is_minigrid_id(env_id):  # a user's MiniGridEnv too
        if shaping != "none":
            raise ValueError(
                "--shaping builtin on MiniGrid needs a fully observed grid, and llm-play shows the "
                "agent's own view; use --shaping none"
            )
        import gymnasium

        from rewardlab.envs.minigrid import make_minigrid

        return gymnasium.vector.SyncVectorEnv(
            [lambda i=i: make_minigrid(env_id, seed=seed + i) for i in range(num_envs)],
            autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP,
        )
    env = envs.make(env_id, num_envs=num_envs, seed=seed)  # any id Gymnasium can make, too
    if shaping == "builtin":
        env = BatchedPotentialShaping(env, potentials.for_env(env_id), gamma=gamma)
    return env


def _numpy(value: Any) -> np.ndarray:
    import torch  # imported once the command runs, not while its arguments are read

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def play(policy: Any, env: Any, episodes: int, seed: int = 0, logger: Any = None) -> list[dict[str, Any]]:
    """Play ``episodes`` episodes, each env of the batch one episode per round.

    Every round resets the env and runs until each of its envs (at most the episodes still
    wanted) has ended one episode; envs that are done are not asked again, so every
    episode counts once and short episodes are not favoured. After each step the policy gets
    the step's reward components (:meth:`rewardlab.agents.LLMPolicy.record_step`).

    :param policy: an :class:`rewardlab.agents.LLMPolicy` (``predict(obs, active=...)``, ``record_step``,
        ``reset``, ``stats``).
    :param env: a batched or Gymnasium vector env.
    :param episodes: how many episodes.
    :param seed: the first round's reset seed (round ``k`` uses ``seed + k``).
    :param logger: a :class:`rewardlab.agents.logger.TensorBoardLogger`, written after every episode.
    :return: one ``{"return", "length", "components"}`` per episode, ``return`` the true
        (extrinsic) return.
    """
    num_envs = env.num_envs
    finished: list[dict[str, Any]] = []
    window: deque[dict[str, Any]] = deque(maxlen=EPISODE_WINDOW)
    step_sums: dict[str, float] = {}
    steps = 0
    for round_index in range(-(-episodes // num_envs)):
        wanted = min(num_envs, episodes - len(finished))
        obs, _ = env.reset(seed=seed + round_index)
        policy.reset()
        running = np.arange(num_envs) < wanted
        sums: dict[str, np.ndarray] = {}
        lengths = np.zeros(num_envs, dtype=np.int64)
        while running.any():
            actions, _ = policy.predict(obs, active=running)
            obs, reward, terminated, truncated, info = env.step(actions)
            components = info.get("reward_components") or {"extrinsic": reward}
            components = {name: _numpy(value).astype(np.float64).reshape(-1) for name, value in components.items()}
            done = _numpy(terminated).reshape(-1) | _numpy(truncated).reshape(-1)
            policy.record_step(components, done)
            for name, values in components.items():
                sums.setdefault(name, np.zeros(num_envs))[running] += values[running]
                step_sums[name] = step_sums.get(name, 0.0) + float(values[running].sum())
            lengths += running
            steps += int(running.sum())
            for i in np.flatnonzero(done & running):
                episode = {
                    "return": float(sums["extrinsic"][i]),
                    "length": int(lengths[i]),
                    "components": {name: float(total[i]) for name, total in sums.items()},
                }
                finished.append(episode)
                window.append(episode)
                if logger is not None:
                    logger.record(_scalars(window, finished, step_sums, steps, policy.stats()), steps)
            running &= ~done
    return finished


def _scalars(
    window: deque, finished: list[dict], step_sums: dict[str, float], steps: int, stats: dict
) -> dict[str, float]:
    scalars = {
        "rollout/ep_rew_mean": float(np.mean([e["return"] for e in window])),
        "rollout/ep_len_mean": float(np.mean([e["length"] for e in window])),
        "llm/invalid_rate": stats["invalid_rate"],
        "llm/fallback_rate": stats["fallback_rate"],
        "llm/tokens": float(stats["tokens"]),
        "llm/latency_s": stats["latency_s_mean"],
    }
    if stats["cost_usd"] is not None:
        scalars["llm/cost_usd"] = stats["cost_usd"]
    for name, total in step_sums.items():
        scalars[f"reward/{name}"] = total / steps
        scalars[f"episode/{name}"] = float(np.mean([e["components"][name] for e in finished]))
    return scalars


def run_llm_play(args: argparse.Namespace) -> int:
    """Run the ``llm-play`` command."""
    from rewardlab.agents.llm_policy import LLMPolicy
    from rewardlab.agents.llm_policy.codecs import codec_for
    from rewardlab.agents.logger import TensorBoardLogger
    from rewardlab.app.rundirs import prepare_run_dir, write_json
    from rewardlab.llm_reward.clients import EndpointError, LLMError, make_client

    if args.episodes < 1:
        raise ValueError(f"--episodes {args.episodes} must be at least 1")
    check_seeds([args.seed], "--seed")
    if args.num_envs is not None and args.num_envs < 1:
        raise ValueError(f"--num-envs {args.num_envs} must be at least 1; leave it out for one env per episode")
    num_envs = args.episodes if args.num_envs is None else min(args.num_envs, args.episodes)
    config = {
        "env": args.env, "algo": "llm", "llm": args.llm, "base_url": args.base_url,
        "episodes": args.episodes, "shaping": args.shaping, "history": args.history,
        "num_envs": num_envs, "max_concurrency": args.max_concurrency,
        "temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed,
        "describe": args.describe,
    }  # fmt: skip
    options: dict[str, Any] = {"temperature": args.temperature, "timeout_s": args.timeout, "retries": args.retries}
    if args.max_tokens is not None:
        options["max_tokens"] = args.max_tokens
    client = make_client(args.llm, base_url=args.base_url, **options)
    if args.describe:  # the prompt names the file's variables, with their meanings and units
        from rewardlab import envs
        from rewardlab.envs.description_files import load_description, use_description

        envs.check_id(args.env)
        use_description(load_description(args.describe, args.env)[1])
    codec = codec_for(args.env)
    env = make_env(args.env, num_envs, args.shaping, args.seed, gamma=LLMPolicy.gamma)
    try:
        client.check()
    except LLMError as error:
        raise ValueError(str(error)) from None
    run_dir = Path(args.logdir) / f"seed_{args.seed}"
    prepare_run_dir(run_dir, config, resume=False)
    logger = TensorBoardLogger(run_dir / "tb", "run")
    policy = LLMPolicy(
        client, codec, history=args.history, max_concurrency=args.max_concurrency,
        fatal_errors=(EndpointError,),
    )  # fmt: skip
    started = time.perf_counter()
    try:
        episodes = play(policy, env, args.episodes, seed=args.seed, logger=logger)
    except EndpointError as error:
        raise ValueError(str(error)) from None
    finally:
        logger.close()
        policy.close()
        env.close()
    returns = [episode["return"] for episode in episodes]
    stats = policy.stats()
    metrics = {
        "status": "complete", "env": args.env, "algo": "llm", "llm": client.describe(),
        "seed": args.seed, "num_timesteps": int(sum(e["length"] for e in episodes)),
        "wall_time_s": time.perf_counter() - started,
        "eval_return_mean": float(np.mean(returns)), "eval_return_std": float(np.std(returns)),
        "eval_episodes": len(returns), "episodes": episodes,
        **{key: value for key, value in stats.items() if key != "last_error"},
    }  # fmt: skip
    write_json(run_dir / "metrics.json", metrics)
    cost = "unknown" if stats["cost_usd"] is None else f"${stats['cost_usd']:.4f}"
    print(
        f"{len(returns)} episodes: true return {metrics['eval_return_mean']:.2f} "
        f"+- {metrics['eval_return_std']:.2f}; invalid answers {stats['invalid_rate']:.1%}, "
        f"fallbacks {stats['fallback_rate']:.1%}; {stats['tokens']} tokens, cost {cost}, "
        f"latency {stats['latency_s_mean']:.2f} s per request"
    )
    if stats["last_error"]:
        # the server's words (an error body's message): a terminal acts on none of them
        print(f"last failed request: {terminal_line(stats['last_error'])}")
    print(f"run in {run_dir}; compare with: rewardlab compare {args.logdir} RL_RUNS --out cmp")
    return 0


def register_llm_play(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``llm-play`` subcommand.

    :param subparsers: the ``rewardlab`` command's subparsers.
    """
    parser = subparsers.add_parser(
        "llm-play",
        description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--env", required=True, help="env id, e.g. CartPole-v1 or MiniGrid-DoorKey-5x5-v0")
    parser.add_argument("--llm", required=True, help="PROVIDER:MODEL, e.g. openai:gpt-4o-mini or ollama:qwen2.5:7b")
    parser.add_argument("--base-url", dest="base_url", help="the OpenAI-compatible endpoint")
    parser.add_argument("--episodes", type=int, default=4, help="episodes to play (default 4)")
    parser.add_argument("--describe", metavar="FILE",
                        help="a TOML/JSON description file naming the observation's variables for the prompt "
                             "(as search --describe takes it; envs without a codec of their own)")
    parser.add_argument("--shaping", default="none", choices=SHAPINGS,
                        help="builtin: the env's potential; its term reaches the prompt")  # fmt: skip
    parser.add_argument("--history", type=int, default=4, help="past steps per prompt (default 4)")
    parser.add_argument("--num-envs", dest="num_envs", type=int,
                        help="episodes played at once (default: all)")  # fmt: skip
    parser.add_argument("--max-concurrency", dest="max_concurrency", type=int, default=8,
                        help="requests in flight at once (default 8)")  # fmt: skip
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", dest="max_tokens", type=int, help="tokens per answer")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    parser.add_argument("--retries", type=int, default=2, help="retries of a failed request (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--logdir", required=True, help="parent folder of the run directory")
    parser.set_defaults(func=run_llm_play)
