"""The ``rewardlab`` command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agents.cli import main, package_version


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rewardlab {package_version()}"
    assert main([]) == 0
    assert "quickstart" in capsys.readouterr().out


def test_console_script_is_installed():
    result = subprocess.run(
        [sys.executable, "-m", "agents.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "usage: rewardlab" in result.stdout


def test_unknown_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
