"""Search candidates on PPO's compiled graphs: the fork server loads them, the sandboxed workers use them."""

from __future__ import annotations

import time

import pytest

from rewardlab.common.compiled import cache_folder
from rewardlab.llm_reward import reference_programs
from rewardlab.llm_reward.search import SearchConfig, search
from rewardlab.llm_reward.training import evaluate

TINY = {"steps": 256, "num_envs": 4, "ppo_kwargs": {"n_steps": 32, "n_epochs": 2}, "num_checkpoints": 2,
        "eval_episodes": 2, "timeout_s": 300.0}


@pytest.mark.inductor  # libraries in the cache, or none to be had
def test_a_compiled_search_trains_its_candidates_on_the_graphs_the_fork_server_loaded(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("REWARDLAB_CACHE", str(tmp_path / "cache"))
    config = SearchConfig("CartPole-v1", "keep the pole upright", proposer="evolve", iterations=1, samples=2,
                          final_seeds=0, finalists=0, compile=True, **TINY)  # eager by default at 256 steps
    result = search(config, tmp_path / "run", workers=2)
    trained = [c for c in result.candidates if c.ok]
    assert len(trained) == 2
    assert all(c.result.compiled and not c.result.compile_note for c in trained), [c.result.compile_note for c in trained]
    # the server compiled them into the user's cache; the workers could not have
    # PPO's rollout with the env's step (the program's reward comes per rollout), scoring, update
    assert sorted(path.name.split("-")[1] for path in cache_folder().glob("ppo-*.pt2")) == ["rollout", "score", "update"]
    assert len(list(cache_folder().glob("CartPole-v1-step-*.pt2"))) == 1  # and the env's step
    report = (tmp_path / "run" / "report.md").read_text()
    assert "PPO compiled" in report and "PPO compiled (" not in report


@pytest.mark.inductor  # libraries in the cache, or none to be had
def test_without_the_compiled_graphs_a_worker_trains_eagerly_and_says_why(tmp_path, monkeypatch) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("REWARDLAB_CACHE", str(blocked))  # the fork server cannot compile into it
    program = reference_programs("CartPole-v1")["human"]
    result = evaluate(program, "CartPole-v1", **{**TINY, "ppo_kwargs": {**TINY["ppo_kwargs"], "compile": True}})
    assert result.ok, result.failure
    assert not result.compiled
    assert result.compile_note.startswith("trained eagerly: PPO's compiled graphs were not available (")
    eager = evaluate(program, "CartPole-v1", **TINY)
    assert not eager.compiled and not eager.compile_note
    # the eager fallback is the eager training: the same numbers for the same seed
    assert result.fitness == pytest.approx(eager.fitness)
    assert [c.reward for c in result.curve] == pytest.approx([c.reward for c in eager.curve])


def test_a_compiled_evaluation_on_a_mujoco_task_forks_no_hanging_worker(tmp_path, monkeypatch) -> None:
    # MuJoCo's batch keeps a C thread pool: the fork server must free it before it forks, or a
    # worker inherits a lock that no thread will release (it hung before the fix)
    pytest.importorskip("mujoco")
    monkeypatch.setenv("REWARDLAB_CACHE", str(tmp_path / "cache"))
    program = reference_programs("Hopper-Backward-v0")["human"]
    result = evaluate(program, "Hopper-Backward-v0", **{**TINY, "ppo_kwargs": {**TINY["ppo_kwargs"], "compile": True}})
    assert result.ok, result.failure
    assert result.compiled and not result.compile_note


def test_the_warm_up_waits_for_ending_threads_and_names_those_that_stay() -> None:
    import threading

    from rewardlab.llm_reward.training.compiled import _threads, _threads_left

    before = _threads()
    ending = threading.Thread(target=time.sleep, args=(0.2,))
    ending.start()
    assert _threads_left(before) == {}, "a thread that ends within the wait is not counted"
    stop = threading.Event()
    staying = threading.Thread(target=stop.wait)
    staying.start()
    try:
        left = _threads_left(before, wait_s=0.1)
        assert len(left) == 1 and all(left.values()), "the thread that stays, with its name"
    finally:
        stop.set()
        staying.join()
