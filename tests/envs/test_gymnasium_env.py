"""Any Gymnasium env in the batched contract: the adapter against our own batched env, spaces, ids, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from user_envs import SIZED_CORRIDOR_SOURCE, write_corridor, write_env, write_point_mass

from rewardlab import envs
from rewardlab.envs.description_files import env_source, load_description
from rewardlab.envs.gymnasium_env import GymnasiumBatchedEnv, observation_parts


def test_the_adapter_steps_like_our_batched_env_from_the_same_state() -> None:
    ours = envs.make("CartPole-v1", num_envs=4, seed=3)
    theirs = GymnasiumBatchedEnv("CartPole-v1", num_envs=4, seed=3)
    obs, _ = ours.reset()
    theirs.reset()
    for index, env in enumerate(theirs.envs):
        ours.write_gymnasium_state(env.unwrapped, index)
    generator = torch.Generator().manual_seed(0)
    ended = torch.zeros(4, dtype=torch.bool)
    for _ in range(60):
        actions = torch.randint(0, 2, (4,), generator=generator)
        mine = ours.step(actions)
        other = theirs.step(actions)
        live = ~ended  # after an episode ends the copies reset to different states
        for a, b in zip(mine[1:4], other[1:4], strict=True):
            assert torch.equal(a[live], b[live])
        assert torch.allclose(mine[4]["final_obs"][live], other[4]["final_obs"][live], atol=1e-4)
        ended |= mine[2] | mine[3]
        if ended.all():
            break
    assert ended.any(), "some episode ended, so final_obs was compared at an end"


def test_make_falls_back_to_gymnasium_and_converts_spaces() -> None:
    lake = envs.make("FrozenLake-v1", num_envs=3, seed=0)
    assert isinstance(lake, GymnasiumBatchedEnv)
    obs, _ = lake.reset()
    assert obs.shape == (3, 16) and obs.dtype == torch.float32 and torch.equal(obs.sum(-1), torch.ones(3))
    obs, reward, terminated, truncated, info = lake.step(np.array([1, 2, 1]))
    assert reward.dtype == torch.float32 and terminated.dtype == torch.bool
    assert info["final_obs"].shape == (3, 16) and set(info["reward_components"]) == {"extrinsic"}
    assert envs.describe("FrozenLake-v1").state_tensors(obs)["obs"].shape == (3,)  # the cell index
    with pytest.raises(ValueError, match=r"outside the action range \[0, 3\]"):
        lake.step(np.array([0, 4, 0]))


def test_discrete_and_integer_observations_are_declared_whole_numbers() -> None:
    # what lets Count count them exactly, where it hashes float observations
    assert isinstance(envs.make("FrozenLake-v1", num_envs=1).single_observation_space, envs.WholeNumberBox)
    import gymnasium

    class Grid(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(0, 9, (2,), np.int64)
        action_space = gymnasium.spaces.Discrete(2)

    if "TestIntegerGrid-v0" not in gymnasium.registry:
        gymnasium.register("TestIntegerGrid-v0", entry_point=Grid)
    grid = envs.make("TestIntegerGrid-v0", num_envs=1).single_observation_space
    assert isinstance(grid, envs.WholeNumberBox) and grid.dtype == np.float32
    assert not isinstance(envs.make("MountainCarContinuous-v0", num_envs=1).single_observation_space, envs.WholeNumberBox)
    assert not isinstance(GymnasiumBatchedEnv("Pendulum-v1", num_envs=1).single_observation_space, envs.WholeNumberBox)


def test_the_same_seed_gives_the_same_episodes() -> None:
    def run(seed: int) -> list[float]:
        env = envs.make("FrozenLake-v1", num_envs=4, seed=seed)
        env.reset()
        generator = torch.Generator().manual_seed(1)
        rewards = []
        for _ in range(40):
            rewards += env.step(torch.randint(0, 4, (4,), generator=generator))[1].tolist()
        return rewards + env.step(torch.zeros(4, dtype=torch.int64))[0].argmax(-1).tolist()

    assert run(5) == run(5)


def test_unknown_ids_name_what_they_need() -> None:
    with pytest.raises(ValueError, match=r"unknown env 'Nope-v0'.*module:EnvName-v0"):
        envs.make("Nope-v0", num_envs=1)
    with pytest.raises(ValueError, match=r"cannot import module 'no_such_module'.*PYTHONPATH"):
        envs.check_id("no_such_module:Thing-v0")
    import gymnasium

    class TwoKnobs(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,))
        action_space = gymnasium.spaces.MultiDiscrete([2, 3])

    if "TestTwoKnobs-v0" not in gymnasium.registry:
        gymnasium.register("TestTwoKnobs-v0", entry_point=TwoKnobs)
    with pytest.raises(ValueError, match=r"action space MultiDiscrete.*Discrete or Box.*--algo sb3-ppo"):
        envs.make("TestTwoKnobs-v0", num_envs=1)
    # a description cannot change the actions: the reason is told, not register_description
    with pytest.raises(ValueError, match=r"action space MultiDiscrete.*--algo sb3-ppo") as caught:
        envs.describe("TestTwoKnobs-v0")
    assert "register_description" not in str(caught.value)


def test_constructor_errors_name_the_env_its_arguments_and_the_error(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_env(tmp_path, "needs_length", SIZED_CORRIDOR_SOURCE)
    with pytest.raises(ValueError, match=rf"env '{env_id}' could not be made with the arguments \{{\}}: TypeError: .*'length'"):
        envs.make(env_id, num_envs=2)
    assert envs.make(env_id, num_envs=2, length=3).reset()[0].tolist() == [[0.0, 3.0]] * 2
    with pytest.raises(ValueError, match=r"env 'CartPole-v1' could not be made with the arguments \{'size': 3\}: TypeError"):
        envs.make("CartPole-v1", num_envs=1, size=3)


def test_a_users_module_env_and_its_description_file(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_corridor(tmp_path, "adapter_corridor")
    env = envs.make(env_id, num_envs=2, seed=0)
    obs, _ = env.reset()
    assert torch.equal(obs, torch.tensor([[0.0, 6.0], [0.0, 6.0]]))
    for _ in range(6):
        obs, reward, terminated, _, info = env.step(torch.ones(2, dtype=torch.int64))
    assert terminated.all() and torch.equal(reward, torch.ones(2))
    assert torch.equal(info["final_obs"][:, 0], torch.full((2,), 6.0)) and torch.equal(obs[:, 0], torch.zeros(2))

    description, data = load_description(tmp_path / "corridor.toml", env_id)
    assert description.state_names == ("position", "distance_to_goal")
    assert description.prompt_class_name == "AdapterCorridor"
    assert data["action_dtype"] == "int64"
    assert description.success(info["final_obs"], terminated, terminated).all()
    assert "class Corridor(gym.Env)" in env_source(env_id) and "def step" in env_source(env_id)


@pytest.mark.parametrize(("text", "message"), [
    ('summary = "x"', r"needs at least one \[\[state\]\]"),
    ('summary = "x"\n[[state]]\nname = "p"\nmeaning = "m"\nindex = 5', r"index 5 is outside the observation's 2 columns"),
    ('summary = "x"\ncolour = 1\n[[state]]\nname = "p"\nmeaning = "m"', r"unknown keys \['colour'\]"),
    ('summary = "x"\nsuccess = "speed > 1"\n[[state]]\nname = "p"\nmeaning = "m"', r'success must be .*"p >= 1.0"'),
    ('summary = ', "not valid TOML"),
])
def test_description_files_name_the_missing_piece(tmp_path, monkeypatch, text, message) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_corridor(tmp_path, "described_corridor")
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(ValueError, match=message):
        load_description(tmp_path / "bad.toml", env_id)


@pytest.mark.filterwarnings("ignore")
def test_minigrid_ids_are_batched_with_the_agents_view() -> None:
    pytest.importorskip("minigrid")
    env = envs.make("MiniGrid-Empty-5x5-v0", num_envs=2, seed=0)
    obs, _ = env.reset()
    assert obs.shape == (2, 147)
    assert env.single_action_space.n == 7


def test_a_dict_observation_keeps_its_key_names_in_gymnasiums_flatten_order() -> None:
    space = spaces.Dict({"vel": spaces.Box(-1, 1, (2,)), "arm": spaces.Dict({"joint": spaces.Box(0, 1, (3,)),
                         "mode": spaces.Discrete(4)}), "angle": spaces.Box(-3, 3, ())})
    parts = observation_parts(space)
    assert [(part.name, part.start, part.stop) for part in parts] == [
        ("angle", 0, 1), ("arm_joint", 1, 4), ("arm_mode", 4, 8), ("vel", 8, 10)]
    # each part's columns hold that part's values in the flat observation Gymnasium makes
    sample = space.sample()
    flat = spaces.flatten(space, sample)
    assert np.allclose(flat[1:4], sample["arm"]["joint"]) and np.allclose(flat[8:10], sample["vel"])
    assert flat[4:8].argmax() == sample["arm"]["mode"]
    assert observation_parts(spaces.Box(0, 1, (3,))) is None


def test_a_users_dict_env_is_described_by_its_keys_and_a_file_by_its_names(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_point_mass(tmp_path, "named_point_mass")
    env = envs.make(env_id, num_envs=3, seed=0)
    obs, _ = env.reset()
    raw = [copy.unwrapped._obs() for copy in env.envs]
    generic = envs.describe(env_id)
    assert generic.state_names == ("goal_0", "goal_1", "pos_0", "pos_1", "vel_0", "vel_1")
    assert "goal, pos, vel" in generic.to_prompt()
    assert generic.state_tensors(obs)["pos_1"].tolist() == pytest.approx([values["pos"][1] for values in raw])

    description, data = load_description(tmp_path / "pointmass.toml", env_id)
    assert description.state_names[-2:] == ("goal_distance", "pit_distance")
    values = description.state_tensors(obs)
    distances = [np.linalg.norm(values["pos"] - values["goal"]) for values in raw]
    assert values["goal_distance"].tolist() == pytest.approx(distances, rel=1e-5)
    assert "derived: sqrt((pos_x - goal_x)**2" in description.to_prompt()
    # the success rule reads the derived distance on the last state
    at_goal = obs.clone()
    at_goal[0, 2:4] = at_goal[0, 0:2]
    flags = torch.zeros(3, dtype=torch.bool)
    assert description.success(at_goal, flags, flags).tolist() == [True, False, False]


@pytest.mark.parametrize("expression", [
    "__import__('os').system('echo hi')", "pos_x.__class__", "pos_x[0]", "(lambda: 1)()", "open('f')",
    "[pos_x]", "speed * 2", "pos_x if pos_x else 1", "x" * 600,
])
def test_derived_expressions_are_checked_not_evaluated(tmp_path, monkeypatch, expression) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_point_mass(tmp_path, "hostile_point_mass", derived=False)
    text = (tmp_path / "pointmass.toml").read_text() + f"\n[derived]\nbad = {expression!r}\n"
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(ValueError, match=r"derived 'bad'"):
        load_description(tmp_path / "bad.toml", env_id)


def test_a_users_goal_env_states_its_partial_success_for_early_stopping(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_point_mass(tmp_path, "partial_point_mass")
    text = (tmp_path / "pointmass.toml").read_text()
    (tmp_path / "partial.toml").write_text(text.replace('success = "goal_distance < 0.15"',
                                                        'success = "goal_distance < 0.15"\n'
                                                        'partial_success = "1 - goal_distance"'))
    description, data = load_description(tmp_path / "partial.toml", env_id)
    assert description.partial_success is not None and data["partial_success"] == "1 - goal_distance"
    # goal (0.5, 0.5); positions at distance 0, 0.3, 2
    obs = torch.tensor([[0.5, 0.5, 0.5, 0.5, 0, 0], [0.5, 0.5, 0.5, 0.8, 0, 0], [0.5, 0.5, 2.5, 0.5, 0, 0]])
    assert description.partial_success(obs).tolist() == pytest.approx([1.0, 0.7, 0.0])
    # it crosses to the workers as data and is rebuilt there the same
    from rewardlab.envs.description_files import description_from_data

    assert description_from_data(data).partial_success(obs).tolist() == pytest.approx([1.0, 0.7, 0.0])
    (tmp_path / "bad.toml").write_text(text.replace('success = "goal_distance < 0.15"',
                                                    'success = "goal_distance < 0.15"\npartial_success = "open(1)"'))
    with pytest.raises(ValueError, match=r": partial_success"):
        load_description(tmp_path / "bad.toml", env_id)


def test_a_success_rule_may_combine_the_ending_with_a_comparison(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_point_mass(tmp_path, "ending_point_mass")
    text = (tmp_path / "pointmass.toml").read_text().replace(
        'success = "goal_distance < 0.15"', 'success = "terminated and not pit_distance < 0.3"')
    (tmp_path / "rule.toml").write_text(text)
    description, _ = load_description(tmp_path / "rule.toml", env_id)
    final = torch.tensor([[0.5, 0.5, 0.5, 0.5, 0, 0], [0.5, 0.5, 0.0, 0.1, 0, 0], [0.5, 0.5, 0.5, 0.5, 0, 0]])
    terminated = torch.tensor([True, True, False])
    assert description.success(final, terminated, ~terminated).tolist() == [True, False, False]
