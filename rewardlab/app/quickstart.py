"""``rewardlab quickstart``: the main job, plain against shaped on MountainCar-v0.

Trains PPO on MountainCar-v0 with and without the built-in energy potential, three
seeds each, through ``rewardlab train`` (one run directory per seed), then
compares them with ``rewardlab compare``: it prints the table, writes the plot and
says how to open the curves in TensorBoard. The logged return is always the true
(unshaped) one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rewardlab.app.arguments import int_list, plain_text
from rewardlab.app.rundirs import run_dir_for
from rewardlab.app.train import DEFAULTS, check_config, settle_compile, train_seed
from rewardlab.common.seeds import check_seeds

ENV_ID = "MountainCar-v0"
GOAL_RETURN = -199.0  # any return above -200 means the car reached the flag


def run_quickstart(args: argparse.Namespace) -> int:
    from rewardlab.app.compare import compare, markdown_table

    logdir = Path(args.logdir)
    seeds = args.seeds
    check_seeds(seeds, "--seeds")
    for shaping, name in (("none", "plain"), ("builtin", "shaped")):
        config = {
            **DEFAULTS, "env": ENV_ID, "algo": args.algo, "steps": args.steps,
            "seeds": seeds, "shaping": shaping,
        }  # fmt: skip
        settle_compile(config)
        check_config(config)
        for seed in seeds:
            run_dir = run_dir_for(logdir / name, seed)
            if (run_dir / "metrics.json").exists():
                print(f"{name} seed {seed}: already trained in {run_dir}")
                continue
            metrics = train_seed(config, seed, run_dir, resume=True, progress=not args.no_progress)
            print(
                f"{name} seed {seed}: true eval return {metrics['eval_return_mean']:.1f} "
                f"({metrics['wall_time_s']:.0f} s)",
                flush=True,
            )
    out = logdir / "compare"
    tag = "rollout/ep_rew_mean"
    rows = compare([logdir / "plain", logdir / "shaped"], tag, out, GOAL_RETURN)
    print()
    print(markdown_table(rows, tag))
    print(f"plot: {out / 'curves.png'}   tables: {out / 'summary.md'}, {out / 'summary.csv'}")
    print(f"curves in TensorBoard: tensorboard --logdir {logdir}  (then open http://localhost:6006)")
    return 0


def register_quickstart(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "quickstart",
        description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # rewardlab's own PPO on the batched env: the same story (plain 0 of 3, shaped 3 of 3)
    # in about a third of SB3's time; --algo sb3-ppo reproduces the shaping benchmark
    parser.add_argument("--algo", default="ppo", help="the learner: ppo (default) or sb3-ppo, as in the shaping benchmark")
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per run")
    parser.add_argument("--seeds", type=int_list, default=[0, 1, 2], help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--logdir", default="runs/quickstart", help="where the runs go")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run_quickstart)
