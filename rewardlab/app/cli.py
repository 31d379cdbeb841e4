"""The ``rewardlab`` command.

Subcommands live with the code they drive and are gathered here: each entry of
``COMMANDS`` names a function ``register(subparsers)`` (as ``"module:function"``)
that adds one subcommand whose ``func`` default runs it. Modules are imported
only when the command line is built, so this file depends on none of them.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from rewardlab import __version__
from rewardlab.app.arguments import join_leading_minus_values

COMMANDS: list[str] = [
    "rewardlab.app.quickstart:register_quickstart",
    "rewardlab.app.train:register_train",
    "rewardlab.app.compare:register_compare",
    "rewardlab.app.llm_play:register_llm_play",
    "rewardlab.app.search:register_search",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rewardlab",
        description="Reward engineering for RL: shaping, intrinsic rewards, HRA and reward-code search.",
    )
    parser.add_argument("--version", action="version", version=f"rewardlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for target in COMMANDS:
        module_name, function_name = target.split(":")
        getattr(import_module(module_name), function_name)(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(join_leading_minus_values(sys.argv[1:] if argv is None else argv))
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except ValueError as error:
        # Bad input from the user: say what was wrong, without a traceback.
        print(f"rewardlab {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
