"""``--llm replay:PATH``: a search served the answers of an earlier run, or of our corpus, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_answers import ANSWERS

from rewardlab.app.cli import main as rewardlab
from rewardlab.llm_reward.clients import LLMCallFailed, ReplayClient, make_client

TINY_FLAGS = ["--steps", "256", "--num-envs", "4", "--ppo", '{"n_steps": 32, "n_epochs": 1}',
              "--checkpoints", "1", "--eval-episodes", "2", "--timeout", "120", "--final-seeds", "1",
              "--workers", "2", "--no-progress", "--no-compile", "--finalists", "0"]


def corpus_file(path: Path, env_id: str) -> tuple[Path, list]:
    answers = [answer for answer in ANSWERS if answer.env_id == env_id]
    path.write_text("".join(json.dumps({"text": answer.text}) + "\n" for answer in answers))
    return path, answers


def test_answers_are_served_in_order_then_the_calls_fail(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text('{"text": "one"}\n{"answer": "two"}\nnot json\n')
    client = make_client(f"replay:{path}")
    assert isinstance(client, ReplayClient) and "2 answers" in client.describe()
    assert [client.complete([]).text for _ in range(2)] == ["one", "two"]
    with pytest.raises(LLMCallFailed, match="used up"):
        client.complete([])
    with pytest.raises(ValueError, match="cannot read"):
        make_client(f"replay:{tmp_path / 'missing.jsonl'}")
    (tmp_path / "empty.jsonl").write_text("{}\n")
    with pytest.raises(ValueError, match="no answers"):
        make_client(f"replay:{tmp_path / 'empty.jsonl'}")


def test_a_shared_journal_of_any_content_replays_its_answers(tmp_path: Path) -> None:
    # a run folder from elsewhere: a line nested past the parser's limit raised RecursionError,
    # a file that is not UTF-8 a bare codec error
    path = tmp_path / "journal.jsonl"
    path.write_text('{"text": "one"}\n' + "[" * 100_000 + "]" * 100_000 + '\n{"text": "two"}\n')
    client = make_client(f"replay:{path}")
    assert [client.complete([]).text for _ in range(2)] == ["one", "two"]
    path.write_bytes(b'{"text": "one"}\n\xff\n')
    with pytest.raises(ValueError, match=r"cannot read .*journal.jsonl \(it is not a UTF-8 text file\)"):
        make_client(f"replay:{path}")


def test_a_search_through_replay_trains_every_correct_answer_and_replays_itself(tmp_path: Path) -> None:
    path, answers = corpus_file(tmp_path / "corpus.jsonl", "CartPole-v1")
    out = tmp_path / "run"
    code = rewardlab(["search", "--env", "CartPole-v1", "--task", "balance the pole", "--llm", f"replay:{path}",
                      "--iterations", "1", "--samples", str(len(answers)), "--out", str(out), *TINY_FLAGS])
    assert code == 0
    trained = {}
    for line in (out / "journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "evaluation":
            trained[record["key"]] = record["result"]["ok"]
    got = [trained.get(f"it00_s{index:02d}", False) for index in range(len(answers))]
    expected = [answer.outcome == "trains" for answer in answers]
    assert got == expected, [a.name for a, g, e in zip(answers, got, expected) if g != e]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trained"] == sum(expected) and summary["candidates"] == len(answers)
    assert "removed the decorator `@torch.jit.script`" in (out / "report.md").read_text()
    # the run's own journal replays the same answers, in the same order
    again = ReplayClient(out)
    assert [text for text, _, _ in again.answers] == [answer.text for answer in answers]
