"""The ``rewardlab`` command.

Subcommands live with the code they drive and are gathered here through the
``rewardlab.commands`` entry-point group: each entry point names a function
``register(subparsers)`` that adds one subcommand whose ``func`` attribute runs it.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, entry_points, version

COMMAND_GROUP = "rewardlab.commands"


def package_version() -> str:
    try:
        return version("rewardlab")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rewardlab",
        description="Reward engineering for RL: shaping, intrinsic rewards, HRA and reward-code search.",
    )
    parser.add_argument("--version", action="version", version=f"rewardlab {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        entry.load()(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
