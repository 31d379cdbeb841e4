"""``rewardlab search``: search for a reward program with an LLM (Eureka, Text2Reward) or without one.

Examples::

    # Eureka with any OpenAI-compatible endpoint (key from OPENAI_API_KEY or REWARDLAB_API_KEY)
    rewardlab search --env CartPole-v1 --task "keep the pole upright for 500 steps" \\
        --llm openai:gpt-4o --iterations 5 --samples 4 --steps 50000 --out runs/search_cp

    # a local model (Ollama), Text2Reward with three retrieved examples and human feedback
    rewardlab search --env Pendulum-v1 --task "swing up and balance" --mode text2reward \\
        --shots 3 --llm ollama:qwen2.5-coder:7b --interactive --out runs/search_pd

    # no LLM at all: the evolve proposer (offline; the baseline an LLM must beat)
    rewardlab search --env MountainCar-v0 --task "reach the flag" --proposer evolve \\
        --iterations 3 --samples 6 --steps 100000 --workers 4 --out runs/search_mc

    # on a Ray cluster, and continuing a run that was interrupted
    rewardlab search ... --executor ray --address ray://head:10001 --out runs/x --resume

The run directory holds ``report.md`` and its page ``report.html`` (plots; open it in a
browser), ``best_reward.py`` (``rewardlab train --reward-program``, whose printed command
trains into ``OUT/train``, or ``rewardlab.llm_reward.load_reward``), ``summary.json``, TensorBoard logs of every candidate and of
the final re-training (``rewardlab compare OUT/final/best OUT/final/human OUT/final/sparse``),
and ``journal.jsonl``, from which ``--resume`` continues without repeating an LLM call or a
finished evaluation.

LLM endpoint and key: ``--base-url`` / ``--api-key`` or the environment variables
``REWARDLAB_BASE_URL`` / ``REWARDLAB_API_KEY``, then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.
Providers: openai, vllm, ollama, llamacpp, lmstudio (local defaults) and compatible (any
other endpoint; needs --base-url). The key is never written to the run directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rewardlab.app.arguments import int_list, json_object, plain_text
from rewardlab.common.compile_budget import AUTO_COMPILE_STEPS
from rewardlab.common.terminal import terminal_line

if TYPE_CHECKING:
    from rewardlab.llm_reward.clients import OpenAICompatibleClient
    from rewardlab.llm_reward.search.config import SearchConfig
    from rewardlab.llm_reward.search.records import SearchResult

__all__ = ["register_search", "run_search"]

def _config(args: argparse.Namespace) -> SearchConfig:
    from rewardlab.llm_reward.search.config import SearchConfig

    if args.llm is None and not args.proposer.startswith("evolve"):
        raise ValueError("pass --llm PROVIDER:MODEL (e.g. openai:gpt-4o, ollama:qwen2.5-coder:7b), or "
                         "--proposer evolve to search without an LLM")
    if (args.feedback_file or args.interactive) and args.mode != "text2reward":
        raise ValueError("--feedback-file and --interactive are Text2Reward's human feedback; pass "
                         "--mode text2reward")
    if args.prescreen and args.prescreen_audit:
        raise ValueError("--prescreen rejects programs, --prescreen-audit only scores them; pass one")
    description = None
    if args.describe:
        from rewardlab import envs
        from rewardlab.envs.description_files import load_description

        envs.check_id(args.env)
        description = load_description(args.describe, args.env)[1]
    return SearchConfig(
        env_id=args.env, task=args.task, mode=args.mode,
        proposer=args.proposer, llm=args.llm,
        iterations=args.iterations, samples=args.samples, steps=args.steps, seeds=tuple(args.seeds),
        final_seeds=args.final_seeds, finalists=args.finalists, finalist_seeds=args.finalist_seeds,
        shots=args.shots,
        prescreen="reject" if args.prescreen else "audit" if args.prescreen_audit else "off",
        prescreen_tau=args.prescreen_tau, prescreen_steps=args.prescreen_steps, seed=args.seed,
        num_envs=args.num_envs, ppo_kwargs=args.ppo, num_checkpoints=args.checkpoints,
        eval_episodes=args.eval_episodes, timeout_s=args.timeout, description=description,
        env_source=args.env_source, compile=args.compile, early_stopping=args.early_stopping,
    )  # fmt: skip


def _client(args: argparse.Namespace) -> OpenAICompatibleClient | None:
    if args.llm is None:
        return None
    from rewardlab.llm_reward.clients import PriceTable, make_client

    prices = None
    if args.prices:
        try:
            data = json.loads(Path(args.prices).read_text())
        except (OSError, ValueError, RecursionError) as error:  # nested past the parser's limit too
            raise ValueError(f"cannot read --prices {args.prices}: {error}") from None
        if not isinstance(data, dict):
            raise ValueError(f"--prices {args.prices} must be a JSON object of model -> [input, output] "
                             'USD per million tokens, e.g. {"gpt-4o": [2.5, 10]}')
        prices = PriceTable.from_mapping(data)
    return make_client(
        args.llm, args.base_url, args.api_key, prices=prices, temperature=args.temperature,
        timeout_s=args.llm_timeout, retries=args.llm_retries, backoff_s=args.llm_backoff,
    )  # fmt: skip


def _print_result(result: SearchResult) -> None:
    from rewardlab.llm_reward.search.report import BEST_FILE, REPORT_FILE, train_command
    from rewardlab.llm_reward.search.report_html import HTML_FILE
    from rewardlab.llm_reward.search.verdict import references_tied, seed_failures, verdict

    best = result.best
    if best is None:
        print(f"no candidate trained successfully ({dict(result.failures)}); see {result.out / REPORT_FILE}")
        return
    print(f"best program: {best.key}, task fitness {best.fitness:.4g} (search seeds)")
    for label in ("best", "human", "sparse"):
        score = result.final.get(label)
        if score is not None and score.mean is not None:
            print(f"  {label:>6}: {score.mean:.4g} ± {score.std:.3g} over {len(score.values)} seeds")
    failures = seed_failures(result)
    if failures is not None:
        print(f"  {failures.message}")
    if result.normalized_score is not None:
        print(f"  normalised score (best - sparse) / |human - sparse| = {result.normalized_score:.3f}")
    elif {"sparse", "human"} <= set(result.final):
        print(f"  normalised score: undefined ({references_tied(result.final) or 'a reference failed'})")
    cost = "unknown" if result.cost_unknown else f"${result.cost_usd:.4f}"
    print(f"tokens {result.usage.total_tokens:,}, cost {cost}, failures {dict(result.failures) or 0}")
    print(f"wrote {result.out / REPORT_FILE}, {result.out / HTML_FILE} and {result.out / BEST_FILE}")
    outcome = verdict(result)
    if outcome.beat_sparse is False:  # a tie with the env's own reward is no program to train on
        print(outcome.message)
        return
    print(f"train on it: {shlex.join(train_command(result))}")


def run_search(args: argparse.Namespace) -> int:
    """The ``rewardlab search`` command.

    :param args: the parsed command line.
    :return: 0 when a program was found, 1 when none trained, 2 for an unusable LLM endpoint.
    """
    from rewardlab.llm_reward.clients import EndpointError
    from rewardlab.llm_reward.search.executors import make_executor
    from rewardlab.llm_reward.search.feedback import FileFeedback, TerminalFeedback
    from rewardlab.llm_reward.search.loop import search
    from rewardlab.llm_reward.search.progress import Progress

    for flag, value in (("--workers", args.workers), ("--llm-concurrency", args.llm_concurrency)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} {value} must be at least 1" + (
                "; leave it out for one evaluation per CPU" if flag == "--workers" else ""))
    config = _config(args)
    client = _client(args)
    feedback = FileFeedback(args.feedback_file) if args.feedback_file else TerminalFeedback() if args.interactive else None
    workers = max(1, os.cpu_count() or 1) if args.workers is None else args.workers
    executor = make_executor(args.executor, workers, args.address)
    progress = Progress(config.iterations, config.samples, enabled=not args.no_progress,
                        secrets=client.secrets if client else ())
    try:
        result = search(config, args.out, client=client, executor=executor, feedback=feedback,
                        resume=args.resume, progress=progress, llm_concurrency=args.llm_concurrency)
    except EndpointError as error:  # it quotes the server's words (its model list, its message)
        print(f"rewardlab search: error: {terminal_line(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: everything finished so far is saved in {args.out}; continue with the same "
              "command and --resume", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        # Threads still wait on sandboxed evaluations, which die with this process; everything
        # finished is already on disk, so exit now rather than wait for them.
        os._exit(130)
    finally:
        executor.shutdown()
    _print_result(result)
    return 0 if result.best is not None else 1


def register_search(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rewardlab search`` to the command line.

    :param subparsers: the ``rewardlab`` command's subparsers.
    """
    parser = subparsers.add_parser(
        "search",
        description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    what = parser.add_argument_group("what to search")
    what.add_argument("--env", required=True,
                      help="any Gymnasium id (CartPole-v1, MiniGrid-Empty-5x5-v0) or module:Env-v0 for your own")
    what.add_argument("--describe", metavar="FILE",
                      help="a TOML/JSON file naming the observation's variables (docs/reward_programs.md)")
    what.add_argument("--env-source", choices=("auto", "always", "never"), default="auto",
                      help="show the env's source code in the prompt (auto: for envs without a built-in description)")
    what.add_argument("--task", required=True, help="the task in words")
    what.add_argument("--mode", choices=("eureka", "text2reward"), default="eureka")
    what.add_argument("--shots", type=int, default=0,
                      help="Text2Reward: the N most similar library examples in the prompt (default 0)")
    what.add_argument("--feedback-file", help="Text2Reward: human feedback rounds, separated by '---' lines")
    what.add_argument("--interactive", action="store_true", help="Text2Reward: ask for feedback at the terminal")
    proposer = parser.add_argument_group("who proposes programs")
    proposer.add_argument("--llm", help="PROVIDER:MODEL, e.g. openai:gpt-4o, vllm:MODEL, ollama:qwen2.5-coder:7b")
    proposer.add_argument("--proposer", choices=("llm", "evolve", "evolve-random"), default="llm",
                          help="evolve: search without an LLM (the description's terms, signs from the task, "
                               "Optuna-tuned weights); evolve-random: random terms and signs (default llm)")
    proposer.add_argument("--base-url", help="the endpoint (else REWARDLAB_BASE_URL, OPENAI_BASE_URL, the provider's)")
    proposer.add_argument("--api-key", help="the key (prefer REWARDLAB_API_KEY or OPENAI_API_KEY)")
    proposer.add_argument("--prices", help="JSON {model: [input, output] USD per million tokens}")
    proposer.add_argument("--temperature", type=float, default=1.0)
    proposer.add_argument("--llm-timeout", type=float, default=120.0, help="seconds per request try")
    proposer.add_argument("--llm-retries", type=int, default=4, help="retries of timeouts, 429 and 5xx")
    proposer.add_argument("--llm-backoff", type=float, default=2.0, help="first retry wait, doubling")
    proposer.add_argument("--llm-concurrency", type=int, default=4, help="requests in flight (1: in order)")
    budget = parser.add_argument_group("budget")
    budget.add_argument("--iterations", type=int, default=5)
    budget.add_argument("--samples", type=int, default=4, help="programs per iteration")
    budget.add_argument("--steps", type=int,
                        help="env steps per candidate and seed (default: the env's budget, where the human reward solves)")
    budget.add_argument("--seeds", type=int_list, default=[0], help="training seeds of candidates, e.g. 0,1")
    budget.add_argument("--final-seeds", type=int, default=5, help="seeds of the final re-training (0: skip)")
    budget.add_argument("--finalists", type=int, default=3,
                        help="the best K candidates are trained again with --finalist-seeds more seeds, and the "
                             "best over all its seeds is the best program (0: the best by its training seed)")
    budget.add_argument("--finalist-seeds", type=int, default=2, help="extra seeds per finalist")
    budget.add_argument("--num-envs", type=int, help="batched envs per training (default: the env's budget)")
    budget.add_argument("--ppo", type=json_object("--ppo", '{"n_steps": 64}'), help="PPO hyperparameters as JSON (default: the env's budget)")
    budget.add_argument("--checkpoints", type=int, default=10, help="fitness measurements per training")
    budget.add_argument("--eval-episodes", type=int, default=10)
    budget.add_argument("--timeout", type=float, default=1800.0, help="seconds per evaluation")
    budget.add_argument("--seed", type=int, default=0, help="seeds the evolve proposer and the prescreen")
    screen = parser.add_argument_group("prescreen (CARD's trajectory preference evaluation)")
    screen.add_argument("--prescreen", action="store_true",
                        help="score programs on stored trajectories first; train only those that rank them well")
    screen.add_argument("--prescreen-audit", action="store_true",
                        help="score every program but train all, to see what --prescreen would reject")
    screen.add_argument("--prescreen-tau", type=float, default=0.2, help="lowest Kendall tau that passes")
    screen.add_argument("--prescreen-steps", type=int, help="PPO steps for the stored trajectories (default --steps)")
    run = parser.add_argument_group("where and how it runs")
    run.add_argument("--workers", type=int, help="evaluations at once (default: CPU count)")
    run.add_argument("--executor", choices=("local", "ray"), default="local")
    run.add_argument("--address", help="the Ray cluster (with --executor ray)")
    run.add_argument("--out", required=True, help="the run directory")
    run.add_argument("--resume", action="store_true", help="continue the run in --out")
    run.add_argument("--no-progress", action="store_true", help="no live progress line")
    run.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                     help="train candidates with PPO's compiled update (the first search of a budget compiles "
                          "it for tens of seconds before the first candidate trains, later ones load it from "
                          "the cache) or eagerly (--no-compile); default: compiled where the search's "
                          f"trainings add up to at least {AUTO_COMPILE_STEPS:,} steps, as rewardlab train "
                          "compiles a run")
    run.add_argument("--early-stopping", action=argparse.BooleanOptionalAction, default=True,
                     help="stop a candidate whose fitness at a third of its budget is in the bottom half of "
                          "the earlier iterations' candidates there and no higher than at a ninth (default: on; "
                          "the finalists and the final re-training always train to the end)")
    parser.set_defaults(func=run_search)
