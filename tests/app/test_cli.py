"""The ``rewardlab`` command line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import rewardlab
from rewardlab.app.arguments import join_leading_minus_values, plain_text
from rewardlab.app.cli import main


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rewardlab {rewardlab.__version__}"
    assert main([]) == 0
    assert "quickstart" in capsys.readouterr().out


def test_console_script_is_installed(tmp_path):
    # from outside the checkout, so only the installed package can answer
    script = Path(sys.executable).with_name("rewardlab")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert "usage: rewardlab" in result.stdout
    result = subprocess.run(
        [sys.executable, "-m", "rewardlab.app.cli", "--version"], capture_output=True, text=True,
        check=True, cwd=tmp_path,
    )
    assert result.stdout.strip() == f"rewardlab {rewardlab.__version__}"


def test_unknown_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_value_with_a_leading_minus_reaches_its_flag():
    # argparse takes "-1,-2" for an option ("expected one argument"); joined, it reaches the
    # flag's own checks, which say what is wrong with it
    assert join_leading_minus_values(["train", "--seeds", "-1,-2", "--seed", "-3", "--steps", "10"]) == [
        "train", "--seeds=-1,-2", "--seed=-3", "--steps", "10"]
    assert join_leading_minus_values(["--seeds=-1,-2", "--", "-1,2", "pos", "-1,2"]) == [
        "--seeds=-1,-2", "--", "-1,2", "pos", "-1,2"]


@pytest.mark.parametrize("command", ["quickstart", "train", "compare", "llm-play", "search"])
def test_help_is_plain_text_without_restructuredtext_markup(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = capsys.readouterr().out
    assert f"rewardlab {command}:" in shown  # the docstring's first line, its ``name`` unquoted
    assert "`" not in shown and not re.search(r"::$", shown, re.MULTILINE)


def test_plain_text_takes_out_the_markup():
    doc = "``rewardlab x``: see :func:`~a.b` and `c`.\n\nExample::\n\n    rewardlab x\n"
    assert plain_text(doc) == "rewardlab x: see a.b and c.\n\nExample:\n\n    rewardlab x\n"
