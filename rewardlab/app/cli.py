"""The ``rewardlab`` command.

Subcommands live with the code they drive and are gathered here: each entry of
``COMMANDS`` names a function ``register(subparsers)`` (as ``"module:function"``) that adds
one subcommand whose ``func`` default runs it, and the one-line help ``rewardlab --help``
lists. Only the module of the command given is imported, and only once the command line
names it, so ``rewardlab --help`` and ``--version`` import none of them (nor torch) and a
mistyped flag is answered before anything heavy loads.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Iterable
from importlib import import_module
from typing import Any, NoReturn

from rewardlab import __version__
from rewardlab.app.arguments import join_leading_minus_values
from rewardlab.common.terminal import escape_controls, terminal_line

#: command -> ("module:register_function", the help line ``rewardlab --help`` shows)
COMMANDS: dict[str, tuple[str, str]] = {
    "quickstart": ("rewardlab.app.quickstart:register_quickstart",
                   "train PPO on MountainCar-v0 with and without shaping and compare"),
    "train": ("rewardlab.app.train:register_train",
              "train an agent, with or without shaping and intrinsic rewards"),
    "compare": ("rewardlab.app.compare:register_compare",
                "compare runs: mean curves with confidence bands and tables"),
    "llm-play": ("rewardlab.app.llm_play:register_llm_play",
                 "an LLM plays episodes as the policy, logged like an RL run"),
    "search": ("rewardlab.app.search:register_search",
               "search for a reward program (Eureka / Text2Reward with an LLM, or evolve)"),
}  # fmt: skip


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors show control characters as escapes too (they
    quote the command line, which a script may have filled from a file)."""

    def error(self, message: str) -> NoReturn:
        super().error(terminal_line(message))


class _Subparsers:
    """The subparsers as one command's ``register`` sees them: its parser gets the help line
    of ``COMMANDS``, written once there."""

    def __init__(self, subparsers: argparse._SubParsersAction, help_line: str):
        self._subparsers, self._help = subparsers, help_line

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return self._subparsers.add_parser(name, help=self._help, **kwargs)


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``rewardlab`` parser.

    :param commands: the commands whose modules are imported to add their arguments (the
        others are listed by name and help only); None: every command.
    """
    wanted = set(COMMANDS) if commands is None else set(commands)
    parser = _Parser(
        prog="rewardlab",
        description="Reward engineering for RL: shaping, intrinsic rewards, HRA and reward-code search.",
    )
    parser.add_argument("--version", action="version", version=f"rewardlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (target, help_line) in COMMANDS.items():
        if name in wanted:
            module_name, function_name = target.split(":")
            getattr(import_module(module_name), function_name)(_Subparsers(subparsers, help_line))
        else:
            subparsers.add_parser(name, help=help_line, add_help=False)
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the top level takes
    no option with a value)."""
    return next((token for token in argv if not token.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = join_leading_minus_values(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    parser = build_parser([command] if command in COMMANDS else [])
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    from rewardlab.envs.gymnasium_env import look_in_working_folder

    # the module of a module:Env-v0 id the user types is found where they run, as python -m finds it
    look_in_working_folder(os.getcwd())
    try:
        return int(args.func(args) or 0)
    except ValueError as error:
        # Bad input from the user: say what was wrong, without a traceback.
        _print_error(args.command, _value_error_line(error))
        return 2
    except OSError as error:
        # A folder or file the command cannot write or read (--logdir, --out): name it.
        _print_error(args.command, _os_error_line(error))
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:  # a bug: its traceback, whose values may have come from a file or a reply
        print(escape_controls(traceback.format_exc()), file=sys.stderr, end="")
        return 1


def _print_error(command: str, message: str) -> None:
    """Print ``message`` as the command's one error line, every control character in it shown
    as its escape: the values it names come from files and replies, which may hold terminal
    escapes (a window title, a cleared screen, a forged line)."""
    print(f"rewardlab {command}: error: {terminal_line(message)}", file=sys.stderr)


def _value_error_line(error: ValueError) -> str:
    """``error``'s message for the error line: a rejected program's findings, which its message
    lists on lines of their own, joined into one (else each break would show as an escape).

    :param error: the bad input's error.
    """
    from rewardlab.llm_reward.programs.checks import CheckError

    return error.text(one_line=True) if isinstance(error, CheckError) else str(error)


def _os_error_line(error: OSError) -> str:
    """``error`` as one line naming the path(s) and what to do."""
    paths = " -> ".join(str(path) for path in (error.filename, error.filename2) if path is not None)
    reason = error.strerror or str(error)
    where = f"{paths}: " if paths else ""
    return f"{where}{reason}; give a path you can write to (e.g. --logdir runs/NAME, --out runs/NAME)"


if __name__ == "__main__":
    sys.exit(main())
