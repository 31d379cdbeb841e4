"""Text a reward program controls, on the way to a person's terminal.

A program's error message travels as its failure's reason, up to the command line, which
prints it; terminal escapes in it (an OSC 52 clipboard write, a window title, a cursor
move) must arrive as nothing, never as bytes a terminal acts on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardlab.llm_reward.sandbox.isolation import kernel_support

pytestmark = pytest.mark.skipif(
    any(kernel_support().values()), reason=f"the kernel lacks isolation features: {kernel_support()}"
)

# written with escapes in the source (the static checks refuse raw control characters),
# raised as real ones
ESCAPES = '"\\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m"'
PROGRAM = f"""
def compute_reward(x):
    raise ValueError({ESCAPES} + "program failed on purpose")
"""


def test_a_programs_failure_reaches_the_terminal_without_escapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rewardlab.app.cli import main
    from rewardlab.llm_reward.programs.loading import reward_file_text

    program = tmp_path / "best_reward.py"
    program.write_text(reward_file_text(PROGRAM, "CartPole-v1", ["escapes"]))
    code = main(["train", "--env", "CartPole-v1", "--reward-program", str(program), "--steps", "64",
                 "--num-envs", "4", "--no-progress", "--logdir", str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert code == 2
    assert "program failed on purpose" in captured.err  # the message itself is shown
    shown = captured.out + captured.err
    assert not any(character in shown for character in "\x1b\x07\x9b"), repr(captured.err[-500:])
