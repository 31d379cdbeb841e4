"""The search on any Gymnasium env: a user's own module env with a description file and its
source in the prompt, a MiniGrid id, and a sandbox that reads the user's module but nothing
else in its folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import hostile_jobs
import pytest
from llm_servers import ScriptedLLM, client_for
from user_envs import SECRET, write_corridor

from rewardlab.app.cli import main as rewardlab
from rewardlab.envs.description_files import load_description, use_description
from rewardlab.llm_reward.sandbox import Limits, run_sandboxed
from rewardlab.llm_reward.sandbox.isolation import kernel_support
from rewardlab.llm_reward.search import SearchConfig, search
from rewardlab.llm_reward.training.compiled import preload_for

TINY = {"steps": 512, "num_envs": 4, "ppo_kwargs": {"n_steps": 32, "n_epochs": 2}, "num_checkpoints": 2,
        "eval_episodes": 2, "timeout_s": 120.0, "compile": False,
        "finalists": 0}

PROGRESS_REWARD = """Moving right is progress, so I reward the change in position.

```python
import torch

def compute_reward(position, next_position, terminated):
    progress = next_position - position
    goal = terminated.float()
    return progress + goal, {"progress": progress, "goal": goal}
```
"""


def test_an_llm_search_on_a_users_module_env_with_a_description_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_corridor(tmp_path, "search_corridor")
    data = load_description(tmp_path / "corridor.toml", env_id)[1]
    server = ScriptedLLM([{"answer": PROGRESS_REWARD}, {"answer": PROGRESS_REWARD}])
    try:
        config = SearchConfig(env_id, "reach the goal at the right end", llm="compatible:scripted",
                              iterations=1, samples=2, final_seeds=1, description=data, **TINY)
        result = search(config, tmp_path / "run", client=client_for(server), workers=2, llm_concurrency=1)
    finally:
        server.close()
    assert [c.status for c in result.candidates] == ["ok", "ok"]
    prompt = server.prompts()[0][-1]["content"]
    # the file's names and meanings, and the env's own source, as Eureka gives it
    assert "next_position" in prompt and "cells left to the goal" in prompt
    assert "class Corridor(gym.Env)" in prompt and "the goal pays, nothing else does" in prompt
    assert result.best is not None and result.final["best"].mean is not None
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["description"]["state"][0]["name"] == "position"


@pytest.mark.skipif(any(kernel_support().values()), reason="needs the kernel's isolation features")
def test_the_worker_reads_the_users_module_and_nothing_else_in_its_folder(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    env_id = write_corridor(folder, "private_corridor")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    preload = ("rewardlab.llm_reward.sandbox.worker", "hostile_jobs", *preload_for(env_id))
    run = run_sandboxed(hostile_jobs.read_the_users_folder,
                        {"folder": str(folder), "module": "private_corridor", "env_id": env_id},
                        run_dir, Limits(timeout_s=60), preload)
    result = run.result
    assert result is not None, run.error
    assert result["secret"].startswith("PermissionError") and result["listing"].startswith("PermissionError")
    assert result["module"].startswith("done")  # its own module, read-only
    assert result["env"] == "done: [1.0, 1.0]"  # the env steps in the worker
    everything = json.dumps(result) + str(run.error) + run.log_tail
    assert SECRET not in everything


def test_the_cli_searches_a_module_env_and_a_minigrid_id(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # the user's module sits where they run rewardlab
    env_id = write_corridor(tmp_path, "cli_corridor")
    flags = ["--proposer", "evolve", "--iterations", "1", "--samples", "2", "--final-seeds", "1",
             "--steps", "512", "--num-envs", "4", "--ppo", '{"n_steps": 32, "n_epochs": 2}',
             "--checkpoints", "2", "--eval-episodes", "2", "--no-progress", "--no-compile",
             "--finalists", "0"]
    code = rewardlab(["search", "--env", env_id, "--task", "reach the goal", "--describe", "corridor.toml",
                      "--out", "corridor_run", *flags])
    assert code == 0, capsys.readouterr().err
    assert "position" in (tmp_path / "corridor_run" / "best_reward.py").read_text()
    # a user's env has no reference programs: the best is compared with the env's own reward
    report = (tmp_path / "corridor_run" / "report.md").read_text()
    assert f"{env_id} has no human reference reward" in report
    assert "| the env's own reward (the sparse reference) |" in report
    assert re.search(r"rewardlab compare \S*/final/best \S*/final/sparse --out", report)
    pytest.importorskip("minigrid")
    code = rewardlab(["search", "--env", "MiniGrid-Empty-5x5-v0", "--task", "reach the green goal",
                      "--out", "minigrid_run", *flags])
    assert code == 0, capsys.readouterr().err
    report = (tmp_path / "minigrid_run" / "report.md").read_text()
    assert "MiniGrid-Empty-5x5-v0" in report


def test_a_bad_description_file_is_refused_before_anything_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    env_id = write_corridor(tmp_path, "bad_corridor")
    (tmp_path / "bad.toml").write_text('summary = "x"\n[[state]]\nname = "p"\nmeaning = "m"\nindex = 9\n')
    code = rewardlab(["search", "--env", env_id, "--task", "t", "--describe", "bad.toml", "--proposer", "evolve",
                      "--out", "x"])
    assert code == 2
    assert "index 9 is outside the observation's 2 columns" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


GOAL_REWARD = '''
import torch

def compute_reward(position, terminated):
    return terminated.float(), {"goal": terminated.float()}
'''


def test_default_budgets_references_trained_once_and_the_report_counts_the_cost(tmp_path: Path, monkeypatch) -> None:
    from rewardlab import llm_reward
    from rewardlab.llm_reward.search.budgets import GENERIC, default_budget

    assert SearchConfig("Acrobot-v1", "swing up", proposer="evolve").steps == default_budget("Acrobot-v1").steps
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_corridor(tmp_path, "budget_corridor")
    data = load_description(tmp_path / "corridor.toml", env_id)[1]
    generic = SearchConfig(env_id, "reach the goal", proposer="evolve", description=data)
    assert (generic.steps, generic.num_envs, generic.ppo_kwargs) == (GENERIC.steps, GENERIC.num_envs, {})
    assert "no budget was measured" in generic.budget_note
    # a budget the user set in part is what the note says this search ran
    shorter = SearchConfig(env_id, "reach the goal", proposer="evolve", description=data, steps=2_000)
    assert shorter.budget_note.endswith(f"(this search set its steps: 2,000 steps over {GENERIC.num_envs} envs)")
    # the human reference is the env's own reward (as on the MuJoCo tasks): trained once
    use_description(data)
    llm_reward.register_reference_programs(env_id, sparse=GOAL_REWARD, human=GOAL_REWARD)
    config = SearchConfig(env_id, "reach the goal", proposer="evolve", iterations=1, samples=2, final_seeds=2,
                          description=data, **TINY)
    result = search(config, tmp_path / "run", workers=2)
    assert set(result.final) == {"best", "sparse"} and result.normalized_score is None
    report = (tmp_path / "run" / "report.md").read_text()
    assert "trained and reported once" in report
    # the compare command names the final runs there are (no final/human here)
    assert f"rewardlab compare {tmp_path / 'run'}/final/best {tmp_path / 'run'}/final/sparse --out" in report
    assert "final/human" not in report and not (tmp_path / "run" / "final" / "human").exists()
    assert "s per candidate" in report and "candidates per minute" in report and "IQM" in report
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cost"]["candidate_wall_s"] > 0 and "iqm_ci" in summary["final_statistics"]["best"]
