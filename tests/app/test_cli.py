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


@pytest.mark.parametrize("argv", [["--help"], ["--version"], []])
def test_help_and_version_import_no_command_module_and_no_torch(argv):
    code = (
        "import sys\nfrom rewardlab.app.cli import COMMANDS, main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "modules = [target.split(':')[0] for target, _ in COMMANDS.values()]\n"
        "print(sorted(name for name in ('torch', 'numpy', *modules) if name in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_a_mistyped_flag_is_answered_before_torch_is_imported():
    code = (
        "import sys\nfrom rewardlab.app.cli import main\n"
        "try:\n    main(['train', '--steps', '1O'])\nexcept SystemExit as exit:\n    print(exit.code)\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["2", "False"]
    assert "argument --steps: invalid int value: '1O'" in result.stderr


def test_help_lists_every_command_with_its_line(capsys):
    assert main([]) == 0
    shown = capsys.readouterr().out
    for name in ("quickstart", "train", "compare", "llm-play", "search"):
        assert re.search(rf"^\s+{name}\s+\S", shown, re.MULTILINE), name


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_unusable_output_folders_are_one_line_naming_them(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["train", "--env", "CartPole-v1", "--steps", "64", "--logdir", str(blocker / "runs"),
                 "--no-progress"]) == 2
    assert f"{blocker / 'runs'}" in _one_line_error(capsys)
    assert main(["search", "--env", "CartPole-v1", "--task", "t", "--proposer", "evolve", "--out", str(blocker),
                 "--no-progress"]) == 2
    assert str(blocker) in _one_line_error(capsys)
    assert main(["compare", str(tmp_path), "--out", str(blocker / "cmp")]) == 2
    _one_line_error(capsys)


def test_a_broken_user_module_and_a_binary_reward_file_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken_env_module.py").write_text("import gymnasium\ndef f(:\n")
    assert main(["train", "--env", "broken_env_module:Broken-v0", "--logdir", "runs"]) == 2
    err = _one_line_error(capsys)
    assert "importing module 'broken_env_module' failed with SyntaxError" in err
    (tmp_path / "reward.py").write_bytes(bytes(range(256)))
    assert main(["train", "--env", "CartPole-v1", "--reward-program", "reward.py", "--logdir", "runs"]) == 2
    assert "cannot read the reward program reward.py: it is not a UTF-8 text file" in _one_line_error(capsys)
    assert not (tmp_path / "runs").exists()


def test_a_rejected_reward_program_lists_its_findings_on_one_readable_line(tmp_path, monkeypatch,
                                                                           capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reward.py").write_text(
        "import torch\nimport os\nimport evil\n\n\ndef compute_reward(obs):\n"
        "    return torch.ones(len(obs)), {}\n")
    assert main(["train", "--env", "CartPole-v1", "--reward-program", "reward.py", "--logdir", "runs"]) == 2
    err = _one_line_error(capsys)
    assert "\\n" not in err, err
    assert "the reward program was rejected: (1) line 2: imports `os`" in err
    assert "torch (2) line 3: imports `evil`" in err
    assert not (tmp_path / "runs").exists()


DESCRIPTION_WITH_ESCAPES = r'''summary = "balance"
success = "speed > 1"
[[state]]
name = "\u001b]0;pwned\u0007\u001b[2J"
index = 0
meaning = "position"
'''


def test_a_description_files_names_reach_the_terminal_as_escapes(tmp_path, monkeypatch, capsys):
    """A state name holding a window title and a screen clear is refused, shown as escapes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "described.toml").write_text(DESCRIPTION_WITH_ESCAPES)
    (tmp_path / "reward.py").write_text("def compute_reward(x):\n    return x, {}\n")
    commands = [
        ["train", "--env", "CartPole-v1", "--reward-program", "reward.py", "--describe",
         "described.toml", "--logdir", "runs"],
        ["search", "--env", "CartPole-v1", "--task", "balance", "--proposer", "evolve",
         "--describe", "described.toml", "--out", "search_run"],
    ]
    for argv in commands:
        assert main(argv) == 2
        err = _one_line_error(capsys)
        assert not any(character in err for character in "\x1b\x07"), repr(err)
        assert r"'\x1b]0;pwned\x07\x1b[2J' must be a Python identifier" in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "search_run").exists()


def test_every_error_the_command_prints_shows_control_characters_as_escapes(tmp_path, monkeypatch,
                                                                            capsys):
    monkeypatch.chdir(tmp_path)
    header = "# rewardlab-env: \x1b]0;pwned\x07\x9b2J\u202eCartPole-v1\r\n"
    (tmp_path / "reward.py").write_text(header + "def compute_reward(x):\n    return x, {}\n")
    argv = ["train", "--env", "CartPole-v1", "--reward-program", "reward.py", "--logdir", "runs"]
    assert main(argv) == 2
    err = _one_line_error(capsys)
    assert r"was written for \x1b]0;pwned\x07\x9b2J\u202eCartPole-v1, not CartPole-v1" in err
    assert not any(character in err for character in "\x1b\x07\x9b\u202e\r")
    with pytest.raises(SystemExit):
        main(["train", "--env", "CartPole-v1", "--logdir", "runs", "--no-such-flag", "\x1b[2J"])
    assert "--no-such-flag \\x1b[2J" in capsys.readouterr().err



def test_a_crash_prints_its_traceback_with_control_characters_as_escapes(monkeypatch, capsys):
    """A bug's traceback names values too (read from a file): it reaches the terminal escaped."""
    from rewardlab.app import compare

    def crash(args):
        raise RuntimeError("\x1b]0;pwned\x07\x1b[2J")

    monkeypatch.setattr(compare, "run_compare", crash)
    assert main(["compare", "runs", "--out", "cmp"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: \\x1b]0;pwned\\x07\\x1b[2J" in err
    assert not any(character in err for character in "\x1b\x07")
