"""The MiniGrid helpers, a user's own MiniGrid task through every path, and the intrinsic
modules on MiniGrid observations."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("minigrid")

from llm_servers import ScriptedChatServer  # noqa: E402
from user_envs import write_key_rooms  # noqa: E402

from rewardlab import envs, intrinsic  # noqa: E402
from rewardlab.app.cli import main  # noqa: E402
from rewardlab.envs.adapters import SB3VecEnv  # noqa: E402
from rewardlab.envs.gymnasium_env import make_one  # noqa: E402
from rewardlab.envs.minigrid import is_minigrid_id, make_minigrid, make_minigrid_vec  # noqa: E402

DROPPED = r"the mission \(which changes between episodes.*\) is dropped"


@pytest.fixture(scope="module")
def key_rooms(tmp_path_factory):
    """The id of a user's own MiniGridEnv subclass, ``key_rooms_task:MiniGrid-KeyRooms-v0``,
    written to a folder on the import path."""
    folder = tmp_path_factory.mktemp("user_minigrid")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(folder))
        yield folder, write_key_rooms(folder, "key_rooms_task")


@pytest.mark.parametrize(("obs", "shape"), [("flat", (147,)), ("image", (7, 7, 3))])
def test_make_minigrid_gives_the_agents_view(obs, shape):
    env = make_minigrid("MiniGrid-DoorKey-8x8-v0", obs=obs, seed=0)
    first, _ = env.reset(seed=0)
    assert env.observation_space.shape == shape and first.shape == shape and first.dtype == np.uint8
    again, _ = make_minigrid("MiniGrid-DoorKey-8x8-v0", obs=obs).reset(seed=0)
    assert np.array_equal(first, again)


def test_make_minigrid_checks_its_arguments():
    with pytest.raises(ValueError, match="obs must be one of"):
        make_minigrid("MiniGrid-DoorKey-8x8-v0", obs="rgb")
    with pytest.raises(ValueError, match="not a MiniGrid task .*CartPoleEnv"):
        make_minigrid("CartPole-v1")


def test_a_users_minigrid_task_is_seen_through_its_view_whatever_its_id(key_rooms):
    _, env_id = key_rooms
    with pytest.warns(UserWarning, match=DROPPED):
        env = make_one(env_id)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (147,) and obs.dtype == np.uint8
    assert is_minigrid_id(env_id) and not is_minigrid_id("CartPole-v1")
    image = make_minigrid(env_id, obs="image", seed=0)
    assert image.reset(seed=0)[0].shape == (7, 7, 3)
    # a fixed mission is quoted in the line
    doorkey = "'use the key to open the door and then get to the goal', the same in every"
    with pytest.warns(UserWarning, match=doorkey):
        make_one("MiniGrid-DoorKey-5x5-v0")


def test_a_users_minigrid_task_through_the_sb3_helpers_and_the_adapter(key_rooms):
    from rewardlab.agents.sb3 import make_sb3_env

    _, env_id = key_rooms
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        venvs = [
            make_sb3_env(env_id, n_envs=2, seed=0),
            make_minigrid_vec(env_id, n_envs=2, seed=0),
            SB3VecEnv(envs.make(env_id, num_envs=2, seed=0)),
        ]
    for venv in venvs:
        assert venv.observation_space.shape == (147,)
        assert venv.reset().shape == (2, 147)
        obs, reward, done, infos = venv.step(np.array([2, 2]))
        assert obs.shape == (2, 147) and reward.shape == (2,)
        venv.close()


@pytest.mark.parametrize("algo", ["ppo", "sb3-ppo"])
def test_rewardlab_train_runs_a_users_minigrid_task(key_rooms, monkeypatch, algo):
    folder, env_id = key_rooms
    monkeypatch.chdir(folder)
    config = folder / f"hp_{algo}.json"
    hyperparameters = {"n_steps": 32, "n_epochs": 1}
    config.write_text(json.dumps({"hyperparameters": hyperparameters, "eval_episodes": 1}))
    logdir = folder / f"runs_{algo}"
    code = main(["train", "--no-progress", "--config", str(config), "--env", env_id, "--algo", algo,
                 "--steps", "128", "--num-envs", "2", "--logdir", str(logdir)])  # fmt: skip
    assert code == 0
    assert (logdir / "seed_0" / "model.zip").exists() or (logdir / "seed_0" / "model.pt").exists()


def test_llm_play_reads_a_users_minigrid_task_with_minigrids_names(key_rooms, monkeypatch):
    folder, env_id = key_rooms
    monkeypatch.chdir(folder)
    logdir = folder / "play"
    with ScriptedChatServer(lambda messages: "turn left") as server:
        code = main(["llm-play", "--env", env_id, "--llm", "vllm:test-model",
                     "--base-url", server.url, "--episodes", "1", "--retries", "0",
                     "--logdir", str(logdir)])  # fmt: skip
    assert code == 0
    prompt = server.requests[0][0]["content"]
    assert "MiniGrid world" in prompt and "wall" in prompt
    metrics = json.loads((logdir / "seed_0" / "metrics.json").read_text())
    assert metrics["invalid_answers"] == 0 and len(metrics["episodes"]) == 1


def test_intrinsic_modules_read_minigrid_views():
    venv = make_minigrid_vec("MiniGrid-MultiRoom-N2-S4-v0", n_envs=2, seed=0)
    obs = venv.reset()
    actions = np.array([2, 2])
    next_obs, _, _, _ = venv.step(actions)
    count = intrinsic.Count(venv.observation_space)
    assert count.mode == "exact"
    module = intrinsic.make(
        "rnd,count,surprise", venv.observation_space, venv.action_space, num_envs=2, seed=0
    )
    bonus = module.compute(obs, actions, next_obs)
    module.update(obs, actions, next_obs)
    assert bonus.shape == (2,) and bool(torch.isfinite(bonus).all())


def test_the_mission_note_is_said_once_a_process_however_often_the_env_is_made():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            make_one("MiniGrid-DoorKey-5x5-v0")
            warnings.filterwarnings("ignore", message="unrelated")  # as torch's compile does
    assert sum("mission" in str(warning.message) for warning in caught) == 1
