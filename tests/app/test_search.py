"""``rewardlab search`` on a user's own env, and its printed next step run as printed."""

from __future__ import annotations

import ast
import json
import shlex
from pathlib import Path

import numpy as np
import pytest
from user_envs import write_point_mass

from rewardlab.app.cli import main as rewardlab
from rewardlab.llm_reward import load_reward

TINY_SEARCH = ["--proposer", "evolve", "--iterations", "1", "--samples", "2", "--final-seeds", "0",
               "--steps", "256", "--num-envs", "4", "--ppo", '{"n_steps": 32, "n_epochs": 1}',
               "--checkpoints", "1", "--eval-episodes", "2", "--no-progress", "--no-compile",
               "--finalists", "0", "--workers", "2"]


def printed_command(output: str, prefix: str) -> list[str]:
    """The command the output's line starting with ``prefix`` prints, as argv for ``rewardlab``."""
    line = next(line for line in output.splitlines() if line.startswith(prefix))
    argv = shlex.split(line[len(prefix):])
    assert argv[0] == "rewardlab", line
    return argv[1:]


def test_the_searchs_printed_train_command_runs_on_a_users_env_with_a_description(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)  # the user's module sits where they run rewardlab
    env_id = write_point_mass(tmp_path, "daily_point_mass")
    code = rewardlab(["search", "--env", env_id, "--task", "reach the goal, avoid the pit",
                      "--describe", "pointmass.toml", "--out", "search_run", *TINY_SEARCH])
    output = capsys.readouterr()
    assert code == 0, output.err
    best = (tmp_path / "search_run" / "best_reward.py").read_text()
    carried = json.loads(best.split("# rewardlab-description:", 1)[1].splitlines()[0])
    assert [state["name"] for state in carried["state"]][:3] == ["goal_x", "goal_y", "pos_x"]
    # the file's own words on loading it in Python, called as written from the search's folder
    call = ast.parse(best.split("load_reward(", 1)[1].split(")", 1)[0].join(("f(", ")")), mode="eval").body
    monkeypatch.chdir(tmp_path / "search_run")
    loaded = load_reward(*map(ast.literal_eval, call.args),
                         **{word.arg: ast.literal_eval(word.value) for word in call.keywords})
    assert loaded.env_id == env_id and loaded.description.state_names[:2] == ("goal_x", "goal_y")
    monkeypatch.chdir(tmp_path)
    train = printed_command(output.out, "train on it: ")
    assert "--reward-program" in train and "--describe" not in train
    # the run goes under the search's --out: a second search's command names its own
    assert train[train.index("--logdir") + 1] == str(Path("search_run") / "train")
    code = rewardlab([*train, "--steps", "256", "--num-envs", "4", "--no-progress"])
    output = capsys.readouterr()
    assert code == 0, output.err
    metrics = json.loads((tmp_path / "search_run" / "train" / "seed_0" / "metrics.json").read_text())
    assert metrics["status"] == "complete" and metrics["env"] == env_id


def test_a_description_line_inside_the_program_is_not_the_files_description(tmp_path: Path, monkeypatch) -> None:
    from rewardlab.llm_reward import load_reward

    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_point_mass(tmp_path, "smuggled_point_mass")
    forged = json.dumps({"env_id": env_id, "summary": "x", "state": [{"name": "secret", "index": 0, "meaning": "m"}],
                         "action": {"meaning": "a"}})
    program = ("import torch\n\n# rewardlab-description: " + forged + "\n"
               "def compute_reward(goal_0):\n    return goal_0, {}\n")
    (tmp_path / "reward.py").write_text(f"# rewardlab-env: {env_id}\n{program}")
    loaded = load_reward(tmp_path / "reward.py", env_id)  # a file's module:Env-v0 id is the caller's to name
    assert loaded.description_data is None and "goal_0" in loaded.description.state_names


def test_a_found_program_wraps_the_users_gymnasium_env_with_its_dict_observation(tmp_path: Path, monkeypatch) -> None:
    import gymnasium

    from rewardlab.envs.description_files import load_description, use_description
    from rewardlab.llm_reward import load_reward
    from rewardlab.llm_reward.programs.loading import reward_file_text

    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_point_mass(tmp_path, "wrapped_point_mass")
    use_description(load_description(tmp_path / "pointmass.toml", env_id)[1])  # as the search does
    program = ("def compute_reward(goal_distance, next_goal_distance):\n"
               "    closer = goal_distance - next_goal_distance\n    return closer, {'closer': closer}\n")
    (tmp_path / "best_reward.py").write_text(reward_file_text(program, env_id, []))
    env = load_reward(tmp_path / "best_reward.py", env_id).wrap(gymnasium.make(env_id.partition(":")[2]), trusted=True)
    obs, _ = env.reset(seed=0)
    before = np.linalg.norm(obs["pos"] - obs["goal"])
    obs, reward, *_, info = env.step(np.array([1.0, 0.0], dtype=np.float32))
    assert reward == pytest.approx(before - np.linalg.norm(obs["pos"] - obs["goal"]), abs=1e-5)
    assert info["reward_components"]["program/closer"] == pytest.approx(reward)


def test_an_llm_servers_words_in_an_endpoint_error_reach_the_terminal_escaped(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from llm_servers import KEY, ScriptedLLM

    # the served model list is the server's text, quoted by the error that ends the search
    server = ScriptedLLM([], models=["\x1b]0;pwned\x07model", "\x1b[2Jcleared", "\x9b31mred"])
    monkeypatch.setenv("REWARDLAB_API_KEY", KEY)
    try:
        code = rewardlab(["search", "--env", "CartPole-v1", "--task", "balance", "--llm", "compatible:scripted",
                          "--base-url", server.url, "--out", str(tmp_path / "out"), *TINY_SEARCH[2:]])
    finally:
        server.close()
    captured = capsys.readouterr()
    assert code == 2
    assert "is not served" in captured.err and "pwned" in captured.err
    shown = captured.out + captured.err
    assert not any(character in shown for character in "\x1b\x07\x9b"), repr(shown[-500:])


@pytest.mark.parametrize("text", ["[1, 2]", "[" * 100_000 + "]" * 100_000])
def test_a_prices_file_of_any_content_is_one_line(tmp_path: Path, capsys, text: str) -> None:
    # a list raised AttributeError, JSON nested past the parser's limit RecursionError: tracebacks
    prices = tmp_path / "prices.json"
    prices.write_text(text)
    code = rewardlab(["search", "--env", "CartPole-v1", "--task", "balance", "--llm", "compatible:m",
                      "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k", "--prices", str(prices),
                      "--out", str(tmp_path / "out"), *TINY_SEARCH[2:]])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and "--prices" in error, error
