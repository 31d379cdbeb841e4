"""report.html: one self-contained page from a real search (tiny, offline: a scripted local
LLM server), its plots drawn, and every hostile text from a program, an answer or a task
shown inert; then the page in headless Chromium (skipped where none is installed).

Budgets are tiny (256 env steps per candidate): these tests check the page, not learning."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from rewardlab.llm_reward.search import SearchConfig, search
from rewardlab.llm_reward.search.report_html import (
    HTML_FILE,
    Series,
    bar_plot,
    line_plot,
    nice_ticks,
    text,
)

pytest.importorskip("openai")
from llm_servers import ScriptedLLM, client_for  # noqa: E402

ESC = "\x1b"
TASK = 'keep the pole upright <script>alert("task")</script>'
# A program that trains, with markup and a fence line in its comments.
MARKUP_PROGRAM = '''Here it is:
```python
import torch

def compute_reward(next_theta, next_x, terminated):
    # </code></pre><script>alert("source")</script><img src=x onerror=alert(1)>
    # ```
    upright = 1.0 - (next_theta / 0.2095) ** 2
    centred = 1.0 - (next_x / 2.4) ** 2
    alive = 1.0 - terminated.float()
    return alive * (upright + 0.1 * centred), {"upright": upright, "centred": centred}
```
'''
# A program whose error message carries markup, a fence and a terminal escape.
RAISING_PROGRAM = '''```python
def compute_reward(next_theta):
    raise ValueError("<script>alert('reason')</script>\\x1b[2J ``` </pre>")
```
'''
# An answer whose prose carries markup and raw escape bytes around a working program.
PROSE_ANSWER = (f"<img src=x onerror=alert('prose')>{ESC}[31m red {ESC}]0;title\x07 </details>\n"
                + MARKUP_PROGRAM.replace("0.1 * centred", "0.3 * centred").split("\n", 1)[1])
TINY = {"steps": 256, "num_envs": 4, "ppo_kwargs": {"n_steps": 32, "n_epochs": 2}, "num_checkpoints": 3,
        "eval_episodes": 2, "timeout_s": 120.0, "compile": False}
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "b", "code", "pre", "table",
                "tr", "th", "td", "ul", "li", "details", "summary", "blockquote", "svg", "text", "line", "rect",
                "polyline", "polygon", "circle"}


class Tags(HTMLParser):
    """Every start tag and attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    server = ScriptedLLM([{"answer": MARKUP_PROGRAM}, {"answer": RAISING_PROGRAM}, {"answer": PROSE_ANSWER}])
    out = tmp_path_factory.mktemp("search") / "run"
    try:
        config = SearchConfig("CartPole-v1", TASK, llm="compatible:scripted", iterations=1, samples=3,
                              final_seeds=2, finalists=2, finalist_seeds=1, **TINY)
        search(config, out, client=client_for(server, timeout_s=10.0), workers=2, llm_concurrency=1)
    finally:
        server.close()
    return out


def test_the_search_writes_one_self_contained_page_beside_report_md(run_dir: Path) -> None:
    page = (run_dir / HTML_FILE).read_text()
    assert (run_dir / "report.md").exists()
    parser = Tags()
    parser.feed(page)
    tags = {tag for tag, _ in parser.tags}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS  # no script, image, link, iframe, form, object
    for tag, attributes in parser.tags:
        assert not [name for name in attributes if name.startswith("on") or name in ("href", "src", "srcset")], tag
    assert "default-src 'none'" in page  # the browser would refuse any fetch or script as well
    # the plots: fitness per iteration, the final curves with bands, finalists, correlation
    assert page.count("<svg") >= 4 and "<polygon" in page and "<circle" in page
    for shown in ("it00_s00", "it00_s01", "it00_s02", "human reference", "the env&#x27;s own reward (the sparse "
                  "reference)", "Finalists", "lower bound (picks)", "upright", "centred"):
        assert shown in page, shown


def test_hostile_texts_are_shown_escaped_never_as_markup(run_dir: Path) -> None:
    page = (run_dir / HTML_FILE).read_text()
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert ESC not in page and "\x07" not in page
    assert "&lt;script&gt;alert(&quot;task&quot;)&lt;/script&gt;" in page  # the task
    assert "&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;alert(&quot;source&quot;)" in page  # the program's source
    assert "&lt;script&gt;alert(&#x27;reason&#x27;)&lt;/script&gt;" in page  # its failure
    assert "&lt;img src=x onerror=alert(&#x27;prose&#x27;)&gt;" in page  # the LLM's prose
    assert "\\x1b[2J" in page  # a traceback's escape shown as its escape, as report.md shows it
    # the program's fence line stays inside its <pre>: the page's structure is the page's own
    pre_blocks = re.findall(r"<pre[^>]*>(.*?)</pre>", page, re.S)
    assert any("# ```" in block for block in pre_blocks)
    assert page.count("<details") == page.count("</details>")


def test_a_line_plot_covers_its_data_and_escapes_its_labels() -> None:
    ticks = nice_ticks(2048.0, 4096.0)
    assert ticks[0] <= 2048 and ticks[-1] >= 4096 and len(ticks) <= 7
    svg = line_plot("<b>fit</b>", [Series("a<b", [0, 1, 2], [0.0, 1.0, None], [0, 0.5, 1], [0.5, 1.5, 2]),
                                   Series("ref", [0, 2], [1.0, 1.0], dashed=True)], "steps", "r & s")
    assert "&lt;b&gt;fit&lt;/b&gt;" in svg and "a&lt;b" in svg and "r &amp; s" in svg
    assert svg.count("<polyline") == 2 and "stroke-dasharray" in svg and svg.count("<polygon") == 1
    coordinates = [float(v) for v in re.findall(r'(?:cx|x1|x2|x)="([\d.]+)"', svg)]
    assert max(coordinates) <= 680  # nothing drawn past the plot's width
    assert "nothing to plot" in line_plot("empty", [Series("none", [], [])], "x", "y")
    bars = bar_plot("r", ["a", "b", "c"], [0.5, None, -0.25], "r")
    assert bars.count("<rect") == 2
    assert text(f"{ESC}[31m<x>") == "[31m&lt;x&gt;"


def test_the_page_loads_in_chromium_without_console_errors_and_shows_its_plots(run_dir: Path,
                                                                              tmp_path: Path) -> None:
    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(name)), None)
    if browser is None:
        pytest.skip("no headless Chromium on this machine (apt-get install chromium) to load report.html in")
    import matplotlib.image

    screenshot = tmp_path / "report.png"
    shown = subprocess.run(
        [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,2600",
         f"--screenshot={screenshot}", (run_dir / HTML_FILE).as_uri()],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)},
    )
    assert screenshot.exists(), shown.stderr[-3000:]
    console = [line for line in shown.stderr.splitlines() if "CONSOLE" in line or "Refused to" in line]
    assert not console, console
    pixels = matplotlib.image.imread(screenshot)[..., :3]
    blue, orange = np.array([0x00, 0x72, 0xB2]) / 255, np.array([0xE6, 0x9F, 0x00]) / 255
    # the plots' lines and markers are drawn: their colours cover a visible part of the page
    for colour in (blue, orange):
        assert (np.abs(pixels - colour).max(axis=-1) < 0.06).sum() > 200, colour


def test_a_huge_answer_is_shown_cut_and_the_page_stays_small() -> None:
    from rewardlab.llm_reward.search.records import Candidate
    from rewardlab.llm_reward.search.report_html import MAX_SHOWN_ANSWER_CHARS, _candidate_details

    answer = "<b>" + "x" * 5_000_000 + "\x1b[2J"
    shown = _candidate_details(Candidate(0, 0, answer=answer))
    assert len(shown) < 2 * MAX_SHOWN_ANSWER_CHARS and "more characters cut" in shown
    assert "<b>x" not in shown and "&lt;b&gt;x" in shown and "\x1b" not in shown and "answer.md" in shown
