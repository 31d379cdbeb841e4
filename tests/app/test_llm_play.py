"""``rewardlab llm-play`` end to end against the local scripted server, and its errors."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
from llm_servers import ScriptedChatServer, current_observation

from rewardlab.app.cli import main
from rewardlab.app.compare import read_scalars


def balance(messages: list) -> str:
    """Push the cart toward the side the pole leans to (a good CartPole policy)."""
    text = current_observation(messages)
    theta = float(text.split("theta = ")[1].split()[0])
    theta_dot = float(text.split("theta_dot = ")[1].split()[0])
    return "push_right" if theta + 0.5 * theta_dot > 0 else "push_left"


def test_llm_play_logs_like_an_rl_run(tmp_path, capsys):
    def answer(messages: list) -> str:
        # Every fifth request is not an action: counted, and the default is taken.
        return "hmm" if len(server.requests) % 5 == 0 else balance(messages)

    with ScriptedChatServer(answer) as server:
        code = main([
            "llm-play", "--env", "CartPole-v1", "--llm", "vllm:test-model", "--base-url", server.url,
            "--episodes", "2", "--shaping", "builtin", "--history", "2", "--retries", "0",
            "--logdir", str(tmp_path),
        ])  # fmt: skip
    assert code == 0
    run = tmp_path / "seed_0"
    config = json.loads((run / "config.json").read_text())
    assert config["llm"] == "vllm:test-model" and config["shaping"] == "builtin"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["eval_episodes"] == 2 and metrics["status"] == "complete"
    lengths = [episode["length"] for episode in metrics["episodes"]]
    assert metrics["num_timesteps"] == sum(lengths) == metrics["requests"]
    # CartPole pays 1 per step: the true return is the length, whatever the shaping added.
    assert [episode["return"] for episode in metrics["episodes"]] == lengths
    assert metrics["invalid_rate"] == pytest.approx(metrics["invalid_answers"] / metrics["requests"])
    assert 0 < metrics["invalid_answers"] and metrics["tokens"] > 0
    # The shaping term reached the prompt.
    assert any("shaping" in request[-1]["content"] for request in server.requests)
    (events,) = list((run / "tb").glob("run_*"))
    scalars = read_scalars(events)
    for tag in ("rollout/ep_rew_mean", "rollout/ep_len_mean", "reward/extrinsic", "reward/shaping",
                "episode/extrinsic", "episode/shaping", "llm/invalid_rate", "llm/tokens",
                "llm/latency_s", "llm/cost_usd"):  # fmt: skip
        assert tag in scalars, tag
    assert scalars["rollout/ep_rew_mean"][1][-1] == pytest.approx(np.mean(lengths))
    assert "2 episodes: true return" in capsys.readouterr().out


def test_llm_play_missing_endpoint_or_key_is_a_clear_error(tmp_path, capsys, monkeypatch):
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main([
        "llm-play", "--env", "CartPole-v1", "--llm", "vllm:m", "--base-url",
        f"http://127.0.0.1:{port}/v1", "--retries", "0", "--logdir", str(tmp_path),
    ])  # fmt: skip
    error = capsys.readouterr().err
    assert code == 2 and "no LLM endpoint reachable" in error
    assert not (tmp_path / "seed_0").exists()
    for name in ("OPENAI_API_KEY", "REWARDLAB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    code = main(["llm-play", "--env", "CartPole-v1", "--llm", "openai:gpt-4o", "--logdir", str(tmp_path)])
    assert code == 2 and "missing API key" in capsys.readouterr().err


def test_benchmark_without_an_endpoint_writes_nothing(tmp_path, monkeypatch, capsys):
    from benchmarks import llm_policy

    monkeypatch.delenv("REWARDLAB_LLM", raising=False)
    assert llm_policy.main(["--out", str(tmp_path)]) == 0
    assert "nothing written" in capsys.readouterr().out and not any(tmp_path.iterdir())


def test_benchmark_records_its_figures_with_an_endpoint(tmp_path):
    from benchmarks import llm_policy

    with ScriptedChatServer(lambda messages: "action_1") as server:
        code = llm_policy.main([
            "--llm", "vllm:test-model", "--base-url", server.url, "--envs", "DeepSea-v0",
            "--episodes", "2", "--out", str(tmp_path),
        ])  # fmt: skip
    assert code == 0
    (row,) = json.loads((tmp_path / "llm_policy.json").read_text())["rows"]
    assert row["env"] == "DeepSea-v0" and row["steps"] == 20 and row["invalid_rate"] == 0.0
    assert "| DeepSea-v0 | none |" in (tmp_path / "llm_policy.md").read_text()


def test_llm_play_on_a_users_module_env(tmp_path, monkeypatch):
    """Any Gymnasium env: a module of the user's, described by the spaces, with named actions."""
    from user_envs import write_corridor

    monkeypatch.chdir(tmp_path)
    env_id = write_corridor(tmp_path, "play_corridor")
    with ScriptedChatServer(lambda messages: "action_1") as server:  # always step right
        code = main(["llm-play", "--env", env_id, "--llm", "vllm:test-model", "--base-url", server.url,
                     "--episodes", "2", "--retries", "0", "--logdir", str(tmp_path / "runs")])
    assert code == 0
    assert "obs_0" in server.requests[0][0]["content"] and "action_1" in server.requests[0][0]["content"]
    metrics = json.loads((tmp_path / "runs" / "seed_0" / "metrics.json").read_text())
    assert [episode["return"] for episode in metrics["episodes"]] == [1.0, 1.0]  # six steps right: the goal
    assert metrics["invalid_answers"] == 0


def test_llm_play_refuses_a_negative_seed_before_anything_is_made(tmp_path, capsys):
    code = main(["llm-play", "--env", "CartPole-v1", "--llm", "ollama:m", "--seed", "-1",
                 "--logdir", str(tmp_path / "x")])
    assert code == 2
    assert "seed -1 is out of range for --seed:" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_llm_play_refuses_zero_envs_rather_than_taking_the_default(tmp_path, capsys):
    code = main(["llm-play", "--env", "CartPole-v1", "--llm", "ollama:m", "--num-envs", "0",
                 "--logdir", str(tmp_path / "x")])
    assert code == 2
    assert "--num-envs 0 must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_llm_play_names_a_dict_observations_keys_and_a_description_files_variables(tmp_path, monkeypatch):
    from user_envs import write_point_mass

    monkeypatch.chdir(tmp_path)
    env_id = write_point_mass(tmp_path, "llm_point_mass")
    with ScriptedChatServer(lambda messages: "[0.5, 0.0]") as server:
        common = ["llm-play", "--env", env_id, "--llm", "vllm:test-model", "--base-url", server.url,
                  "--episodes", "1", "--retries", "0"]
        assert main([*common, "--logdir", "generic"]) == 0
        generic = server.requests[0][-1]["content"]
        assert main([*common, "--describe", "pointmass.toml", "--logdir", "described"]) == 0
        described = server.requests[-1][-1]["content"]
    # Gymnasium flattens the Dict {pos, vel, goal} in the sorted order of its keys
    assert "goal_0 = " in generic and "pos_1 = " in generic and "obs_0" not in generic
    assert "pos_x = " in described and "goal_distance = " in described
    assert json.loads((tmp_path / "described" / "seed_0" / "config.json").read_text())["describe"] == "pointmass.toml"


def test_an_llm_servers_error_message_reaches_the_terminal_escaped(tmp_path, capsys, monkeypatch):
    from llm_servers import KEY, ScriptedLLM

    # the last failed request is shown; its text is the server's (an error body's message)
    server = ScriptedLLM([{"status": 400, "message": "\x1b]0;pwned\x07\x1b[2Jbad request"}] * 600)
    monkeypatch.setenv("REWARDLAB_API_KEY", KEY)
    try:
        code = main(["llm-play", "--env", "CartPole-v1", "--llm", "compatible:scripted", "--base-url", server.url,
                     "--episodes", "1", "--retries", "0", "--logdir", str(tmp_path)])
    finally:
        server.close()
    captured = capsys.readouterr()
    assert code == 0 and "last failed request" in captured.out and "bad request" in captured.out
    shown = captured.out + captured.err
    assert not any(character in shown for character in "\x1b\x07\x9b"), repr(shown[-500:])


def test_the_benchmarks_endpoint_error_reaches_the_terminal_escaped(tmp_path, capsys, monkeypatch):
    from llm_servers import KEY, ScriptedLLM

    from benchmarks import llm_policy

    server = ScriptedLLM([], models=["\x1b]0;pwned\x07model"])
    monkeypatch.setenv("REWARDLAB_API_KEY", KEY)
    try:
        code = llm_policy.main(["--llm", "compatible:scripted", "--base-url", server.url, "--out", str(tmp_path)])
    finally:
        server.close()
    shown = capsys.readouterr().out
    assert code == 0 and "pwned" in shown and "nothing written" in shown
    assert not any(character in shown for character in "\x1b\x07\x9b"), repr(shown)
