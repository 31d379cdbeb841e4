"""Text shown on a terminal: every control character as its escape."""

from __future__ import annotations

import pytest

from rewardlab.common.terminal import escape_controls, terminal_line


@pytest.mark.parametrize(("text", "shown"), [
    ("\x1b]0;pwned\x07", r"\x1b]0;pwned\x07"),
    ("a\rb", r"a\rb"),
    ("\x9b2J", r"\x9b2J"),
    ("\u202eevil", r"\u202eevil"),
    ("\ud800", r"\ud800"),
    ("two\nlines\tand a tab", r"two\nlines\tand a tab"),
    ("plain text, ünïcode and → arrows", "plain text, ünïcode and → arrows"),
])
def test_a_terminal_line_shows_every_control_character_as_its_escape(text: str, shown: str) -> None:
    assert terminal_line(text) == shown
    assert terminal_line(text).isprintable()


def test_escaped_controls_keep_newlines_and_tabs() -> None:
    assert escape_controls("a\x1b[2J\r\nb\tc") == "a\\x1b[2J\nb\tc"
