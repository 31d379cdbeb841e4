"""What a program writes reaches the report, the terminal and the next prompt only made safe."""

from __future__ import annotations

import pytest

from rewardlab.llm_reward.search.evaluation import _parse_checkpoint, _text
from rewardlab.llm_reward.search.text import fenced, markdown_text, sanitize

HOSTILE = "fail\x1b[2J\x1b]0;owned\x07\r\u202etxt.exe<script>alert(1)</script>\n```\n# escaped"


def test_control_characters_and_html_do_not_survive() -> None:
    clean = sanitize(HOSTILE)
    assert "\x1b" not in clean and "\x07" not in clean and "\r" not in clean and "\u202e" not in clean
    assert "\n" in clean
    assert "<script>" not in markdown_text(HOSTILE) and "&lt;script&gt;" in markdown_text(HOSTILE)
    assert _text(HOSTILE) == clean


def test_a_fence_the_text_cannot_close() -> None:
    lines = fenced("a\n````\nb", indent="  ")
    assert lines[0] == lines[-1] == "  `````"
    inner = "\n".join(lines[1:-1])
    assert "`````" not in inner
    assert fenced("plain")[0] == "```"


def point(**changes):
    return {"step": 1, "fitness": 1.0, "success_rate": None, "train_return": None,
            "components": {"program/speed": 0.5}, "reward": 0.1, **changes}


@pytest.mark.parametrize("components", [
    {"program/<b>x</b>": 1.0}, {"a\x1b[31m": 1.0}, {"": 1.0}, {"x" * 65: 1.0},
    {f"c{i}": 1.0 for i in range(65)},
])
def test_component_names_and_counts_are_checked(components) -> None:
    with pytest.raises(ValueError):
        _parse_checkpoint(point(components=components))


@pytest.mark.parametrize("value", [float("inf"), float("nan"), True, "1.0", 1.7e308, 10**400])
def test_numbers_must_be_finite_numbers(value) -> None:
    with pytest.raises(TypeError):
        _parse_checkpoint(point(fitness=value))


def test_a_report_block_of_a_hostile_failure() -> None:
    from rewardlab.llm_reward.search.evaluation import Failure
    from rewardlab.llm_reward.search.records import Candidate
    from rewardlab.llm_reward.search.report import _failure_block

    candidate = Candidate(0, 0, source="x")
    candidate.failure = Failure("crash", HOSTILE, traceback=HOSTILE)
    block = "\n".join(_failure_block(candidate))
    assert "\x1b" not in block and "<script>" not in block.split("```")[0]
    fence = block.splitlines()[1].strip()
    assert set(fence) == {"`"} and len(fence) > 3 and block.rstrip().endswith(fence)
