"""An answer read into a checked program in a child process: whatever the answer holds, the
caller gets a program or a failure (never an exception, never a stall), and every failure
is cut to size where it is made."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from dataclasses import asdict

import pytest
from hostile_answers import DEEP_DECORATOR, FLOOD, HELPERS, PLAIN, UNTERMINATED_FENCE, fenced

from rewardlab import llm_reward
from rewardlab.llm_reward.programs.program import RewardProgram
from rewardlab.llm_reward.training import checking
from rewardlab.llm_reward.training.checking import check_answer, check_source
from rewardlab.llm_reward.training.failures import (
    MAX_FINDING_CHARS,
    MAX_FINDINGS,
    MAX_REASON_CHARS,
    MAX_TRACEBACK_CHARS,
    Failure,
    check_failure,
)

DESCRIPTION = llm_reward.describe("CartPole-v1")


def test_a_good_answer_gives_the_program_the_caller_would_have_made() -> None:
    checked = check_answer(fenced(PLAIN), DESCRIPTION)
    assert checked.failure is None and checked.program == RewardProgram.from_source(PLAIN.strip() + "\n")
    assert checked.source is not None and "def compute_reward" in checked.source
    missing = check_answer("I would reward staying upright.", DESCRIPTION)
    assert missing.program is None and missing.failure is not None and missing.failure.kind == "no_code"
    refused = check_source("import os\n" + PLAIN, DESCRIPTION)
    assert refused.failure is not None and refused.failure.kind == "check" and "`os`" in refused.failure.reason


def test_the_deep_decorator_is_a_failure() -> None:
    # it passed ast.parse and overflowed ast.unparse outside any handler, ending the search
    checked = check_answer(DEEP_DECORATOR, DESCRIPTION)
    assert checked.program is None and checked.failure is not None
    assert checked.failure.kind in ("check", "crash", "timeout")


@pytest.mark.parametrize("answer", [UNTERMINATED_FENCE, HELPERS], ids=["unterminated-fence", "600-helpers"])
def test_slow_answers_finish_or_fail(answer: str) -> None:
    checked = check_answer(answer, DESCRIPTION)
    assert (checked.program is None) == (checked.failure is not None)
    assert checked.failure is None or checked.failure.kind in ("no_code", "check", "timeout")


def _backtrack(text: str, description: object) -> dict:
    # a regular expression that backtracks without end holds the GIL of the process it runs in
    re.match(r"(a+)+$", "a" * 64 + "b")
    return {}


def test_the_caller_s_other_threads_run_while_a_child_is_stuck_in_a_regex() -> None:
    ticks = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.01):
            ticks.append(1)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        checked = checking._in_child(_backtrack, "text", DESCRIPTION)
    finally:
        stop.set()
        ticker.join()
    assert checked.failure is not None and checked.failure.kind == "timeout"
    assert len(ticks) > 3  # the child's CPU limit is seconds; in this process the regex would have held them all


def test_a_flood_of_findings_is_cut_where_the_failure_is_made() -> None:
    checked = check_answer(FLOOD, DESCRIPTION)
    failure = checked.failure
    assert failure is not None and failure.kind == "check"
    assert len(failure.findings) == MAX_FINDINGS and "more findings" in failure.findings[-1]
    assert len(failure.reason) <= MAX_REASON_CHARS
    # the same caps whatever makes a failure, and a saved one read back stays the same
    made = Failure("program", "x" * 10**6, traceback="t" * 10**6, findings=["f" * 10**4] * 66_000)
    assert len(made.reason) <= MAX_REASON_CHARS and len(made.traceback) <= MAX_TRACEBACK_CHARS
    assert len(made.findings) == MAX_FINDINGS and all(len(f) <= MAX_FINDING_CHARS for f in made.findings)
    assert Failure(**asdict(made)) == made
    flood = check_failure(["line 1: `a` is not defined"] * 66_000)
    assert len(flood.findings) == MAX_FINDINGS and len(flood.reason) <= MAX_REASON_CHARS


def _allocate(text: str, description: object) -> dict:
    return {"data": "x" * (4 * 2**30)}


def _spin(text: str, description: object) -> dict:
    while True:
        pass


def _raise(text: str, description: object) -> dict:
    raise RecursionError("maximum recursion depth exceeded")


def _die(text: str, description: object) -> dict:
    os.kill(os.getpid(), signal.SIGSEGV)
    return {}


@pytest.mark.parametrize(("work", "kind"), [(_allocate, "limit"), (_spin, "timeout"), (_raise, "check"),
                                            (_die, "crash")])
def test_whatever_the_child_does_comes_back_as_a_failure(work, kind: str) -> None:
    checked = checking._in_child(work, "text", DESCRIPTION)
    assert checked.program is None and checked.failure is not None and checked.failure.kind == kind


@pytest.mark.parametrize("source", [PLAIN + "a\n" * 3000, "@" + "a." * 700 + "b\n" + PLAIN.strip() + "\n"],
                         ids=["flood", "deep-decorator"])
def test_evaluate_returns_a_capped_failure_for_a_hostile_source(source: str, tmp_path) -> None:
    # a RewardProgram made directly (not through from_source) reaches evaluate's own checks
    program = RewardProgram(source=source, function_name="compute_reward", parameters=("next_theta",))
    for given in (program, source):  # a program, or its source as the search's executors pass it
        result = llm_reward.evaluate(given, "CartPole-v1", steps=64, run_dir=tmp_path / "run")
        assert not result.ok and result.failure is not None and result.failure.kind in ("check", "timeout")
        assert len(result.failure.findings) <= MAX_FINDINGS and len(result.failure.reason) <= MAX_REASON_CHARS


@pytest.mark.parametrize("source", [
    "@" + "a." * 700 + "b\n" + PLAIN.strip() + "\n",
    "def compute_reward(next_theta):\n    return " + "abs(" * 500 + "next_theta" + ")" * 500 + ", {}\n",
    PLAIN + "a\n" * 3000,
    "def compute_reward(next_theta):\n    x = '\x1b]0;t\x07\x00'\n    return next_theta, {}\n",
], ids=["deep-decorator", "deep-calls", "flood", "control-characters"])
def test_load_reward_raises_only_what_it_documents_on_a_hostile_file(source: str, tmp_path) -> None:
    path = tmp_path / "best_reward.py"
    path.write_text("# rewardlab-env: CartPole-v1\n" + source)
    with pytest.raises(ValueError):  # as documented (CheckError is one); no RecursionError, nothing else
        llm_reward.load_reward(path)


def test_load_reward_reads_no_more_of_a_file_than_a_program_may_hold(tmp_path) -> None:
    path = tmp_path / "best_reward.py"
    with path.open("w") as file:  # a shared run folder's file of any size
        file.write("# rewardlab-env: CartPole-v1\n" + PLAIN)
        file.writelines("# " + "x" * 1000 + "\n" for _ in range(200))
    with pytest.raises(ValueError, match="has more than 100,000 characters, its header included"):
        llm_reward.load_reward(path)


CARRIED = {"env_id": "CartPole-v1", "summary": "s", "action": {"meaning": "a"},
           "state": [{"name": "x", "index": 0, "meaning": "m"}]}


@pytest.mark.parametrize("line", [
    json.dumps({**CARRIED, "summary": 5}),
    json.dumps({**CARRIED, "state": [{"name": "x", "index": 0, "meaning": 3}]}),
    json.dumps({**CARRIED, "state": [{"name": "x", "index": 0, "meaning": "m", "low": "\x1b[2J"}]}),
    json.dumps({**CARRIED, "state": [{"name": "x", "index": -5, "meaning": "m"}]}),
    json.dumps({**CARRIED, "state": [{"name": f"x{i}", "index": 0, "meaning": "m"}
                                     for i in range(513)]}),
    json.dumps({**CARRIED, "action_dtype": "object"}),
    json.dumps({**CARRIED, "derived": ["x"]}),
    json.dumps({**CARRIED, "success_metric": [1]}),
    json.dumps({**CARRIED, "success": "x > 9**9**9", "derived": {f"d{i}": "x" for i in range(40)}}),
    "[" * 50_000,
    '{"a": ' * 10_000,
], ids=["summary", "meaning", "low", "index", "states", "dtype", "derived", "metric",
        "derived-count", "deep-list", "deep-dict"])
def test_load_reward_refuses_a_malformed_carried_description_in_one_line(line: str,
                                                                         tmp_path) -> None:
    """A shared reward file's description line is data: any malformed value is one ValueError."""
    path = tmp_path / "best_reward.py"
    path.write_text(f"# rewardlab-env: CartPole-v1\n# rewardlab-description: {line}\n{PLAIN}")
    with pytest.raises(ValueError, match="line is not a description of CartPole-v1") as caught:
        llm_reward.load_reward(path)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)
