"""The reward-code search: Eureka and Text2Reward loops against a scripted OpenAI-compatible
server (failures counted and fed back, the key never written), resume after SIGKILL with
nothing repeated or lost, clear CLI errors, the evolve proposer, prescreen, reflection,
the run store, best_reward.py with load_reward and ``rewardlab train --reward-program``,
and the Ray executor (skipped without Ray).

Budgets are tiny (256 env steps per candidate): these tests check behaviour, not learning."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardlab import llm_reward
from rewardlab.app.cli import main as rewardlab
from rewardlab.llm_reward.clients import ReplayClient, make_client
from rewardlab.llm_reward.search import SearchConfig, search
from rewardlab.llm_reward.search.executors import EvalTask, Executor
from rewardlab.llm_reward.search.feedback import FeedbackSource, FileFeedback, TerminalFeedback
from rewardlab.llm_reward.search.loop import _Search
from rewardlab.llm_reward.search.progress import Progress
from rewardlab.llm_reward.training import Checkpoint, Failure, TrainingRun
from rewardlab.llm_reward.training.failures import MAX_FINDINGS, MAX_REASON_CHARS

pytest.importorskip("openai")
from hostile_answers import (  # noqa: E402
    DEEP_DECORATOR,
    FENCE_BREAKOUT,
    FLOOD,
    HELPERS,
    HOSTILE_TEXT,
    PLAIN,
    UNTERMINATED_FENCE,
)
from llm_servers import KEY, ScriptedLLM, client_for  # noqa: E402

TINY = {"steps": 256, "num_envs": 4, "ppo_kwargs": {"n_steps": 32, "n_epochs": 2}, "num_checkpoints": 2,
        "eval_episodes": 2, "timeout_s": 120.0, "compile": False,
        "finalists": 0}
# eager: compiling PPO's graphs for a new budget takes tens of seconds (test_compiled_search.py)
TINY_FLAGS = ["--steps", "256", "--num-envs", "4", "--ppo", '{"n_steps": 32, "n_epochs": 2}',
              "--checkpoints", "2", "--eval-episodes", "2", "--timeout", "120", "--no-compile",
              "--finalists", "0"]


def fenced(code: str) -> str:
    return f"Here is the reward function:\n```python\n{code.strip()}\n```\n"


GOOD = fenced('''
import torch

def compute_reward(next_theta, next_x, terminated):
    upright = 1.0 - (next_theta / 0.2095) ** 2
    centred = 1.0 - (next_x / 2.4) ** 2
    alive = 1.0 - terminated.float()
    return alive * (upright + 0.1 * centred), {"upright": upright, "centred": centred}
''')
GOOD_2 = GOOD.replace("0.1 * centred", "0.3 * centred")
GOOD_3 = GOOD.replace("0.1 * centred", "0.5 * centred")
NO_CODE = "I would reward the agent for keeping the pole upright and the cart near the centre."
BROKEN = fenced('''
import torch

def compute_reward(next_theta):
    offsets = torch.zeros(3)
    bonus = offsets + next_theta
    return bonus, {"bonus": bonus}
''')
HOSTILE = fenced('''
import os

def compute_reward(next_theta):
    os.system("touch /tmp/rewardlab-pwned")
    return next_theta, {"theta": next_theta}
''')
# Every step costs, so longer (better) episodes get less reward: the prescreen rejects it.
BAD_RANKING = fenced('''
def compute_reward(next_theta):
    penalty = -((next_theta / 0.2095) ** 2) - 0.1
    return penalty, {"penalty": penalty}
''')


def files_text(root: Path) -> str:
    return "\n".join(path.read_bytes().decode("utf-8", "replace") for path in root.rglob("*") if path.is_file())


# --------------------------------------------------------------------- the Eureka loop
def test_eureka_loop_counts_failures_feeds_them_back_and_never_writes_the_key(tmp_path: Path) -> None:
    secret_error = {"status": 500, "message": f"upstream failed for {KEY}"}
    server = ScriptedLLM([
        {"status": 429, "retry_after": 0}, {"answer": GOOD},           # it00_s00: rate limited, then good
        {"status": 500}, {"answer": NO_CODE},                           # it00_s01: no code
        {"sleep": 4.0, "answer": "late"}, {"answer": BROKEN},           # it00_s02: slow, then fails in training
        {"answer": HOSTILE},                                            # it00_s03: fails the static checks
        {"answer": GOOD_2},                                             # it01_s00
        {"answer": BAD_RANKING},                                        # it01_s01: rejected by the prescreen
        secret_error, secret_error, secret_error, secret_error,        # it01_s02: retries used up
        {"answer": GOOD_3},                                             # it01_s03
    ])
    stream = io.StringIO()
    try:
        client = client_for(server, timeout_s=2.0)
        config = SearchConfig("CartPole-v1", "keep the pole upright", llm="compatible:scripted", iterations=2,
                              samples=4, final_seeds=1, prescreen="reject", prescreen_steps=256, **TINY)
        progress = Progress(2, 4, stream=stream, secrets=client.secrets)
        result = search(config, tmp_path / "run", client=client, workers=2, progress=progress, llm_concurrency=1)
    finally:
        server.close()

    assert [c.status for c in result.candidates] == [
        "ok", "no_code", "program", "check", "ok", "prescreen", "llm", "ok"]
    assert result.failures == {"no_code": 1, "program": 1, "check": 1, "prescreen": 1, "llm": 1}
    assert result.llm_calls == 7 and result.llm_failures == 1
    assert result.llm_retries == 1 + 1 + 1 + 3
    assert result.usage.prompt_tokens == 700 and result.usage.completion_tokens == 350
    assert len(server.requests) == 14

    # The second iteration's prompt: the best program so far, its reflection, every failure.
    second = server.prompts()[-1]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "0.1 * centred" in second[2]["content"]
    feedback = second[3]["content"]
    assert "it00_s01: failed (no_code)" in feedback and "no Python code" in feedback
    assert "it00_s02: failed (program)" in feedback and "RuntimeError" in feedback
    assert 'File "<reward_program>", line' in feedback  # the cut traceback
    assert "it00_s03: failed (check)" in feedback and "imports `os`" in feedback
    assert "task fitness (the env's own return" in feedback and "max" in feedback and "min" in feedback
    assert "component `upright`" in feedback and "Correlation of your reward" in feedback
    rejected = result.candidates[5]
    assert rejected.prescreen is not None and rejected.prescreen.tau is not None and rejected.prescreen.tau < 0.2
    assert "prefers worse trajectories" in rejected.failure.reason

    out = result.out
    assert result.best is not None and result.best.key in ("it00_s00", "it01_s00", "it01_s03")
    assert set(result.final) == {"best", "sparse", "human"} and result.final["best"].mean is not None
    report = (out / "report.md").read_text()
    for text in ("it00_s02", "RuntimeError", "prefers worse trajectories", "Normalised score", "retries"):
        assert text in report
    summary = json.loads((out / "summary.json").read_text())
    # Rejected before training: the one that ranked trajectories badly, the one that failed on them.
    assert summary["prescreen"]["trainings_saved"] == 2 and summary["llm_retries"] == 6
    reward = llm_reward.load_reward(out / "best_reward.py")
    assert reward.env_id == "CartPole-v1" and reward.program.source.strip() in (out / "best_reward.py").read_text()
    events = list((out / "candidates" / "it00_s00" / "train" / "tensorboard").rglob("*.search"))
    assert events, "the search's scalars sit next to PPO's TensorBoard logs"
    # The key: not in the run directory, not in the progress output.
    assert KEY not in files_text(out) and KEY not in stream.getvalue()
    assert "[redacted]" in (out / "journal.jsonl").read_text()
    assert "iteration 2/2" in stream.getvalue()


# ---------------------------------------------------------------- Text2Reward mode
class Refuse(FeedbackSource):
    name = "refuse"

    def ask(self, iteration: int, summary: str) -> str | None:
        raise AssertionError("a resumed search asked for feedback it had saved")


def test_text2reward_few_shot_and_human_feedback_from_a_file(tmp_path: Path) -> None:
    feedback_file = tmp_path / "feedback.txt"
    feedback_file.write_text("Keep the cart closer to the centre of the track.\n---\nunused second round\n")
    server = ScriptedLLM([{"answer": GOOD}, {"answer": GOOD_2}])
    config = SearchConfig("CartPole-v1", "balance the pole upright", mode="text2reward", llm="compatible:scripted",
                          iterations=2, samples=1, shots=2, final_seeds=0, **TINY)
    try:
        first = search(config, tmp_path / "run", client=client_for(server), workers=1,
                       feedback=FileFeedback(feedback_file))
        again = search(config, tmp_path / "run", client=client_for(server), workers=1, feedback=Refuse(),
                       resume=True)
    finally:
        server.close()
    prompts = server.prompts()
    assert len(prompts) == 2, "the resumed search asked the LLM again"
    assert "Instruction (CartPole-v1): Balance the pole upright" in prompts[0][1]["content"]
    assert "Keep the cart closer to the centre" in prompts[1][3]["content"]
    assert "Revise the reward function to address the feedback" in prompts[1][3]["content"]
    assert [c.fitness for c in again.candidates] == [c.fitness for c in first.candidates]
    assert "Keep the cart closer" in (tmp_path / "run" / "report.md").read_text()


def test_feedback_sources() -> None:
    answers = io.StringIO("move right\nfaster\n\nignored\n")
    shown = io.StringIO()
    assert TerminalFeedback(answers, shown).ask(1, "best so far: x") == "move right\nfaster"
    assert "best so far: x" in shown.getvalue() and "iteration 2" in shown.getvalue()
    assert TerminalFeedback(io.StringIO("\n"), io.StringIO()).ask(1, "") is None


# ---------------------------------------------------------------- kill -9 and resume
def test_sigkill_mid_iteration_then_resume_repeats_nothing_and_matches_a_straight_run(tmp_path: Path) -> None:
    answers = [GOOD, GOOD_2, GOOD_3, GOOD.replace("0.1 * centred", "0.7 * centred")]
    config = SearchConfig("CartPole-v1", "keep the pole upright", llm="compatible:scripted", iterations=2,
                          samples=2, final_seeds=0, **TINY)
    straight_server = ScriptedLLM([{"answer": a} for a in answers])
    try:
        straight = search(config, tmp_path / "straight", client=client_for(straight_server), workers=2,
                          llm_concurrency=1)
    finally:
        straight_server.close()

    # The fourth request (it01_s01) hangs; it01_s00's evaluation is in flight when we kill.
    server = ScriptedLLM([{"answer": answers[0]}, {"answer": answers[1]}, {"answer": answers[2]}, {"hang": True},
                          {"answer": answers[3]}])
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "rewardlab.app.cli", "search", "--env", "CartPole-v1", "--task", config.task,
               "--llm", "compatible:scripted", "--base-url", server.url, "--iterations", "2", "--samples", "2",
               "--final-seeds", "0", "--workers", "2", "--llm-concurrency", "1", "--llm-backoff", "0.01",
               "--no-progress", "--out", str(out), *TINY_FLAGS]
    environment = {**os.environ, "REWARDLAB_API_KEY": KEY}
    try:
        process = subprocess.Popen(command, cwd=tmp_path, env=environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        assert server.hanging.wait(180), "the search never reached the fourth request"
        time.sleep(0.5)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
        before = {(r["type"], r.get("key")) for r in journal}
        assert ("answer", "it01_s00") in before and ("answer", "it01_s01") not in before
        assert ("evaluation", "it00_s00") in before and ("evaluation", "it01_s01") not in before
        finished = {path: path.stat().st_mtime_ns for path in out.glob("candidates/it00_*/train/result.json")}
        resumed = subprocess.run([*command, "--resume"], cwd=tmp_path, env=environment, capture_output=True,
                                 text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    finally:
        server.close()
    assert len(server.requests) == 5, "only the unanswered request is sent again"
    assert server.prompts()[4] == server.prompts()[3]
    journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    for kind in ("answer", "evaluation"):
        keys = [r["key"] for r in journal if r["type"] == kind]
        assert sorted(keys) == ["it00_s00", "it00_s01", "it01_s00", "it01_s01"], (kind, keys)
    assert {path: path.stat().st_mtime_ns for path in finished} == finished, "a finished evaluation re-ran"
    summary = json.loads((out / "summary.json").read_text())
    fitness = {r["key"]: r["result"]["fitness"] for r in journal if r["type"] == "evaluation"}
    assert fitness == {c.key: c.fitness for c in straight.candidates}
    assert summary["best"]["key"] == straight.best.key and summary["best"]["fitness"] == straight.best.fitness
    assert KEY not in files_text(out) and KEY not in resumed.stdout + resumed.stderr


# ---------------------------------------------------------------------- CLI errors
def test_cli_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    base = ["search", "--env", "CartPole-v1", "--task", "balance", "--iterations", "1", "--samples", "1",
            "--no-progress", *TINY_FLAGS]

    def error(*args: str) -> str:
        assert rewardlab([*base, *args]) == 2
        return capsys.readouterr().err

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("REWARDLAB_API_KEY", raising=False)
    monkeypatch.delenv("REWARDLAB_BASE_URL", raising=False)
    assert "missing API key" in error("--llm", "openai:gpt-4o", "--out", str(tmp_path / "a"))
    assert "pass --llm PROVIDER:MODEL" in error("--out", str(tmp_path / "b"))
    assert "unknown env 'Nope-v0': Gymnasium cannot make it" in rewardlab_error(
        ["search", "--env", "Nope-v0", "--task", "dig", "--proposer", "evolve", "--out", str(tmp_path / "d")],
        capsys)
    assert not (tmp_path / "d").exists()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert "no LLM endpoint reachable" in error("--llm", "compatible:m", "--base-url",
                                                f"http://127.0.0.1:{closed}/v1", "--llm-retries", "0",
                                                "--out", str(tmp_path / "e"))
    server = ScriptedLLM([], models=["llama3", "qwen"])
    try:
        assert "model 'mistral' is not served" in error("--llm", "compatible:mistral", "--base-url", server.url,
                                                        "--out", str(tmp_path / "f"))
        assert not (tmp_path / "f").exists()
        monkeypatch.setattr(_Search, "run", stop_after_the_first_record)
        assert "stopped after its first record" in error("--llm", "compatible:qwen", "--base-url", server.url,
                                                         "--out", str(tmp_path / "f"))
        assert "holds a different search run" in error("--llm", "compatible:qwen", "--base-url", server.url,
                                                       "--out", str(tmp_path / "f"), "--steps", "512")
        assert "already holds this search run" in error("--llm", "compatible:qwen", "--base-url", server.url,
                                                         "--out", str(tmp_path / "f"))
    finally:
        server.close()
    # 0 started a whole search with one worker per CPU
    for flag in ("--workers", "--llm-concurrency"):
        assert f"{flag} 0 must be at least 1" in error("--proposer", "evolve", flag, "0", "--out", str(tmp_path / "w"))
    assert "prescreen_steps must be a positive integer" in error(
        "--proposer", "evolve", "--prescreen", "--prescreen-steps", "0", "--out", str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()
    for flag, value in (("--seed", "-1"), ("--seeds", "0,-2"), ("--seed", str(2**32))):
        message = error("--proposer", "evolve", flag, value, "--out", str(tmp_path / "s"))
        assert f"out of range for {flag}:" in message and not (tmp_path / "s").exists()
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "notes.txt").write_text("mine")
    assert "is not empty and holds no search run" in error("--proposer", "evolve", "--out", str(tmp_path / "g"))


def stop_at_the_start(search: _Search) -> None:
    """A search that fails once its run directory is open, before it records anything."""
    raise ValueError("stopped at the start")


def stop_after_the_first_record(search: _Search) -> None:
    """A search that stops after its first record: a started run, which --resume continues."""
    search.store.append({"type": "prompt", "key": "it00_test", "iteration": 0, "messages": []})
    raise ValueError("stopped after its first record")


def test_a_failed_start_leaves_nothing_that_blocks_the_corrected_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    base = ["search", "--env", "Pendulum-v1", "--task", "swing up", "--no-progress", *TINY_FLAGS,
            "--out", str(tmp_path / "run")]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    # nothing listens: refused at once, with the default retries and backoff (~32 s of waits)
    started = time.monotonic()
    error = rewardlab_error([*base, "--llm", "ollama:m", "--base-url", closed], capsys)
    assert time.monotonic() - started < 10
    assert "connection refused" in error and "after 1 try" in error and "`ollama serve`" in error
    assert not (tmp_path / "run").exists()
    error = rewardlab_error([*base, "--llm", "openai:m", "--api-key", KEY, "--base-url", closed], capsys)
    assert "ollama" not in error and "check the network" in error and KEY not in error
    assert not (tmp_path / "run").exists()
    assert "out of range for --seed" in rewardlab_error([*base, "--proposer", "evolve", "--seed", "-1"], capsys)
    assert not (tmp_path / "run").exists()

    # a search that fails after its directory was made but before its first record (or one an
    # earlier version left): the corrected command starts afresh, with or without --resume
    monkeypatch.setattr(_Search, "run", stop_at_the_start)
    assert "stopped at the start" in rewardlab_error([*base, "--proposer", "evolve", "--seed", "3"], capsys)
    assert sorted(path.name for path in (tmp_path / "run").iterdir()) == ["config.json"]
    server = ScriptedLLM([], models=["m"])
    try:
        for resume in ([], ["--resume"]):
            assert "stopped at the start" in rewardlab_error(
                [*base, "--llm", "compatible:m", "--base-url", server.url, *resume], capsys)
    finally:
        server.close()
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["llm"] == "compatible:m" and saved["seed"] == 0


def rewardlab_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert rewardlab(argv) == 2
    return capsys.readouterr().err


def test_an_env_the_search_cannot_train_says_why_not_that_a_description_would_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    import gymnasium
    from user_envs import SIZED_CORRIDOR_SOURCE, write_env

    class Switches(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,))
        action_space = gymnasium.spaces.MultiBinary(4)

    if "TestSwitches-v0" not in gymnasium.registry:
        gymnasium.register("TestSwitches-v0", entry_point=Switches)
    flags = ["--task", "x", "--proposer", "evolve", "--iterations", "1", "--samples", "1", "--no-progress"]
    error = rewardlab_error(["search", "--env", "TestSwitches-v0", *flags, "--out", str(tmp_path / "a")], capsys)
    assert "action space MultiBinary(4)" in error and "--algo sb3-ppo" in error
    assert "register_description" not in error and not (tmp_path / "a").exists()
    monkeypatch.chdir(tmp_path)
    env_id = write_env(tmp_path, "search_sized_corridor", SIZED_CORRIDOR_SOURCE)
    error = rewardlab_error(["search", "--env", env_id, *flags, "--out", str(tmp_path / "b")], capsys)
    assert "missing 1 required positional argument: 'length'" in error and "kwargs=" in error
    assert "register_description" not in error and not (tmp_path / "b").exists()


ESCAPING = fenced('''
import torch

def compute_reward(next_theta):
    # passes the static checks: torch.serialization.tarfile keeps the real open()
    opener = torch.serialization.tarfile.bltn_open
    with opener(MARKER, "w") as file:
        file.write("escaped")
    return next_theta, {"theta": next_theta}
''')
INJECTING = fenced('''
import torch

def compute_reward(next_theta):
    raise RuntimeError("bad\\x1b[2J\\x1b]0;pwned\\x07 <script>alert(1)</script>\\n```\\n# heading")
''')


def test_a_search_with_escaping_candidates_finishes_with_a_clean_report(tmp_path: Path) -> None:
    marker = tmp_path / "outside" / "marker"
    marker.parent.mkdir()
    server = ScriptedLLM([{"answer": ESCAPING.replace("MARKER", repr(str(marker)))}, {"answer": INJECTING},
                          {"answer": GOOD}])
    try:
        config = SearchConfig("CartPole-v1", "keep the pole upright", llm="compatible:scripted", iterations=1,
                              samples=3, final_seeds=1, **TINY)
        result = search(config, tmp_path / "run", client=client_for(server, timeout_s=5.0), workers=2,
                        progress=Progress(1, 3, stream=io.StringIO()), llm_concurrency=1)
    finally:
        server.close()
    assert not marker.exists()
    assert [c.status for c in result.candidates][:2] == ["sandbox", "program"] or \
        [c.status for c in result.candidates][:2] == ["program", "program"], [c.status for c in result.candidates]
    assert result.candidates[2].status == "ok" and result.best is not None
    report = (result.out / "report.md").read_text()
    assert "\x1b" not in report and "\x07" not in report
    prose = re.sub(r"^( *)(`{3,})[^\n]*\n.*?^\1\2$", "", report, flags=re.M | re.S)  # fenced code is inert
    assert "<script>" not in prose and "&lt;script&gt;" in prose
    journal = (result.out / "journal.jsonl").read_text()
    assert "\\u001b" not in journal and "\x1b" not in journal


# ------------------------------------------------- answers that hurt the search itself
class ScoredExecutor(Executor):
    """Evaluations without training, so that a test of the search's own process is quick: a
    program's fitness is the number on its ``# fitness N`` line; one that says ``raise here``
    makes the evaluation raise, one that says ``hostile failure`` fails with hostile text."""

    def __init__(self) -> None:
        super().__init__(2, "test-scored")
        self.runs = 0

    def _run(self, task: EvalTask) -> TrainingRun:
        self.runs += 1
        if "raise here" in task.source:
            raise RuntimeError("the evaluation broke \x1b]0;owned\x07")
        failure = None
        if "hostile failure" in task.source:
            failure = Failure("program", HOSTILE_TEXT + "\n" + "z" * 10**6, traceback=HOSTILE_TEXT * 3)
        found = re.search(r"# fitness (\d+)", task.source)
        fitness = float(found.group(1)) if found else 1.0
        curve = [Checkpoint(step=step, fitness=fitness, success_rate=None, train_return=fitness,
                            components={"program/upright": 0.5}, reward=0.1) for step in (128, 256)]
        ok = failure is None
        return TrainingRun(task.env_id, ok, fitness if ok else None, None, curve if ok else [], [], failure,
                          task.steps, 0.1, None, None, None, None, task.source)

    def describe(self) -> str:
        return "scored without training (test)"


def scored(fitness: int, extra: str = "") -> str:
    return fenced(f"# fitness {fitness}\n{extra}\n" + PLAIN)


SURVIVAL_ANSWERS = [
    DEEP_DECORATOR, UNTERMINATED_FENCE, FLOOD, "<img src=x onerror=alert(1)>\n" + scored(2, "# hostile failure"),
    HELPERS, FENCE_BREAKOUT.replace("def compute_reward", "# fitness 9\ndef compute_reward"),
    scored(3, "# raise here"), scored(5),                                          # iteration 2
]


def survival_config(answers: Path) -> SearchConfig:
    return SearchConfig("CartPole-v1", "balance the pole", llm=f"replay:{answers}", iterations=2, samples=4,
                        final_seeds=0, **TINY)


def test_no_answer_ends_the_search_and_a_resumed_or_replayed_one_meets_the_same_failures(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"text": text}) + "\n" for text in SURVIVAL_ANSWERS))
    config = survival_config(answers)
    executor = ScoredExecutor()
    result = search(config, tmp_path / "run", client=make_client(f"replay:{answers}"), executor=executor,
                    llm_concurrency=1)
    statuses = [c.status for c in result.candidates]
    assert statuses[0] in ("check", "crash", "timeout") and statuses[1] != "ok" and statuses[2] == "check"
    assert statuses[3] == "program" and statuses[5] == "ok" and statuses[6] == "error" and statuses[7] == "ok"
    assert result.best is not None and result.best.key == "it01_s01"
    flood = result.candidates[2].failure
    assert flood is not None and len(flood.findings) == MAX_FINDINGS and len(flood.reason) <= MAX_REASON_CHARS
    raised = result.candidates[6].failure
    assert raised is not None and "RuntimeError" in raised.reason and "\x1b" not in raised.reason

    # the second prompt: every failure named, none of them big, none able to leave its place
    journal = [json.loads(line) for line in (result.out / "journal.jsonl").read_text().splitlines()]
    prompt = [r for r in journal if r["type"] == "prompt"][-1]["messages"][-1]["content"]
    assert len(prompt) < 40_000 and "it00_s02: failed (check)" in prompt
    assert "\x1b" not in prompt and "\x07" not in prompt and "\u202e" not in prompt
    assert_inert_markdown(prompt)
    # the report: the best program's source and the hostile failure texts are inert
    report = (result.out / "report.md").read_text()
    assert len(report) < 200_000 and "\x1b" not in report and "\x07" not in report
    assert "Verified safe" in report and assert_inert_markdown(report)
    assert 'note = """' in report  # the best program is shown whole, in its own block
    for answer in (result.out / "candidates").glob("*/answer.md"):
        assert_inert_markdown(answer.read_text())

    # resumed: nothing is asked or trained again but what never finished (the raising one)
    runs = executor.runs
    again = search(config, tmp_path / "run", client=make_client(f"replay:{answers}"), executor=executor,
                   resume=True, llm_concurrency=1)
    assert [c.status for c in again.candidates] == statuses and executor.runs == runs + 1
    # replayed from the run's own journal: the same answers fail the same way
    replayed = search(survival_config(answers), tmp_path / "replayed", client=ReplayClient(tmp_path / "run"),
                      executor=executor, llm_concurrency=1)
    assert [c.status for c in replayed.candidates] == statuses


def assert_inert_markdown(text: str) -> bool:
    """``text`` rendered as GitHub does (raw HTML allowed): no tag, link, image or heading a
    program wrote gets out of its code block or its line."""
    markdown_it = pytest.importorskip("markdown_it")
    rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).render(text)
    for made in ("<script", "<img", "<a href", "Verified safe</h"):
        assert made not in rendered, made
    return True


def test_the_terminal_and_the_progress_line_get_no_escape_sequence_from_a_program(tmp_path: Path) -> None:
    escaping = fenced('# fitness 4\ndef compute_reward(next_theta):\n    title = "\x1b]0;owned\x07\x1b]52;c;eA==\x07"\n'
                      '    return next_theta, {"theta": next_theta}\n')
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"text": text}) + "\n"
                               for text in [escaping, scored(2, "# hostile failure"), scored(3), scored(5)]))
    config = SearchConfig("CartPole-v1", "balance the pole", mode="text2reward", llm=f"replay:{answers}",
                          iterations=2, samples=2, final_seeds=0, **TINY)
    shown, progress = io.StringIO(), io.StringIO()
    result = search(config, tmp_path / "run", client=make_client(f"replay:{answers}"), executor=ScoredExecutor(),
                    feedback=TerminalFeedback(io.StringIO("keep it upright\n\n"), shown),
                    progress=Progress(2, 2, stream=progress), llm_concurrency=1)
    assert "Feedback for iteration 2" in shown.getvalue() and len(result.candidates) == 4
    for text in (shown.getvalue(), progress.getvalue()):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text


def test_a_journal_of_any_shape_still_gives_a_report_and_resumes(tmp_path: Path) -> None:
    """Every journaled field is data of unknown type: a candidate whose answer, usage or failure
    reason is a list, a dict, a huge string or control bytes is shown as what it is, and the
    report is written and the search resumes all the same."""
    answers = tmp_path / "answers.jsonl"
    texts = [scored(3), scored(5), scored(4, "# hostile failure"), scored(6)]
    answers.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    config = SearchConfig("CartPole-v1", "balance the pole", llm=f"replay:{answers}", iterations=1,
                          samples=4, final_seeds=0, **TINY)
    run = tmp_path / "run"
    search(config, run, client=make_client(f"replay:{answers}"), executor=ScoredExecutor(),
           llm_concurrency=1)

    journal = run / "journal.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    for record in records:
        if record["type"] == "answer" and record["key"] == "it00_s00":
            record.update(text=["def compute_reward(next_theta):", 1], usage={"prompt_tokens": "x"},
                          finish_reason={"why": 1}, cost_usd="free", retries="many")
        elif record["type"] == "answer" and record["key"] == "it00_s01":
            record.update(text={"code": "x"}, genome="not a list", usage=[1, 2])
        elif record["type"] == "evaluation" and record["key"] == "it00_s02":
            record["result"]["failure"] = {"kind": ["program"], "reason": {"a": [1, 2]},
                                           "traceback": 7, "findings": 3}
        elif record["type"] == "evaluation" and record["key"] == "it00_s03":
            record["result"]["fitness"] = "high"
            record["result"]["notes"] = "\x1b]0;owned\x07" + "n" * 2_000_000
    lines = [json.dumps(record) for record in records]
    lines += ["[1, 2]", '{"no type": true}', '{"type": 5, "key": ["x"]}',
              '{"type": "final", "key": "best_s100", "label": "best", "result": {"fitness": "x"}}',
              '{"type": "finalist", "key": "it00_s00_s50", "candidate": [], "result": 3}']
    journal.write_text("".join(line + "\n" for line in lines))
    for name in ("report.md", "report.html"):
        (run / name).unlink()

    executor = ScoredExecutor()
    result = search(config, run, client=make_client(f"replay:{answers}"), executor=executor,
                    resume=True, llm_concurrency=1)
    report, page = (run / "report.md").read_text(), (run / "report.html").read_text()
    statuses = {c.key: c.status for c in result.candidates}
    assert statuses["it00_s00"] == statuses["it00_s01"] == "error"
    assert statuses["it00_s02"] == statuses["it00_s03"] == "error"
    assert "journaled result is malformed" in report
    assert all(isinstance(c.answer, str | None) for c in result.candidates)
    for key in statuses:
        assert key in report and key in page
    assert "not text" in report and "\x1b" not in report and "\x1b" not in page
    assert len(report) < 200_000 and len(page) < 2_000_000
    assert executor.runs == 0  # nothing journaled was computed again
    again = search(config, run, client=make_client(f"replay:{answers}"), executor=executor,
                   resume=True, llm_concurrency=1)
    assert {c.key: c.status for c in again.candidates} == statuses
