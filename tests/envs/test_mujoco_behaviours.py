"""The MuJoCo descriptions and behaviours: success rules on hand-built states, variables read
from the right columns, per-episode counters, reference programs and one sandboxed evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco.batch")

import mujoco  # noqa: E402

from rewardlab import (
    envs,  # noqa: E402
    llm_reward,  # noqa: E402
)
from rewardlab.envs.mujoco import BEHAVIOURS, TASKS  # noqa: E402
from rewardlab.llm_reward.programs.program import RewardFunction  # noqa: E402
from rewardlab.llm_reward.search.evolve_random import (  # noqa: E402
    STATE_KINDS,
    EvolveRandomProposer,
    Term,
    focus_variables,
)

ALL = sorted(TASKS) + sorted(BEHAVIOURS)
ANT_FEET = (4, 7, 10, 13)


def make(env_id: str, num_envs: int, **kwargs):
    env = envs.make(env_id, num_envs=num_envs, seed=0, nthread=1, **kwargs)
    env.reset()
    return env


def step(env, actions: torch.Tensor | None = None):
    if actions is None:
        actions = torch.zeros(env.num_envs, env.single_action_space.shape[0])
    return env.step(actions)


def sparse_reward(env_id: str, obs, actions, info, terminated) -> torch.Tensor:
    program = llm_reward.reference_programs(env_id)["sparse"]
    reward, _ = RewardFunction(program, llm_reward.describe(env_id))(obs, actions, info["final_obs"], terminated)
    return reward


def check_step(env_id: str, env, expected_success: list[bool], expected_terminated: list[bool]) -> dict:
    obs = env.observe().float()
    actions = torch.zeros(env.num_envs, env.single_action_space.shape[0])
    _, reward, terminated, truncated, info = env.step(actions)
    success = torch.tensor(expected_success)
    assert terminated.tolist() == expected_terminated
    assert reward.tolist() == success.float().tolist()
    rule = llm_reward.describe(env_id).success(info["final_obs"], terminated, truncated)
    assert rule.tolist() == expected_success
    assert torch.equal(sparse_reward(env_id, obs, actions, info, terminated), reward)
    return info


# ------------------------------------------------------------------- success rules
def test_half_cheetah_backward_succeeds_at_minus_20_m() -> None:
    env = make("HalfCheetah-Backward-v0", 3)
    qpos = env.init_qpos.repeat(3, 1)
    qpos[:, 0] = torch.tensor([-19.9, -20.1, 0.0])
    env.set_state(qpos, torch.zeros(3, env.model.nv))
    info = check_step("HalfCheetah-Backward-v0", env, [False, True, False], [False, True, False])
    assert info["x_position"][1] <= -20.0 < info["x_position"][0]
    obs = env.observe()
    assert abs(float(obs[1, 0])) < 0.2 and float(obs[0, 0]) < -19.8  # env 1 restarted near x = 0


def test_hopper_backward_needs_the_torso_up_at_minus_2_m() -> None:
    env = make("Hopper-Backward-v0", 4)
    qpos = env.init_qpos.repeat(4, 1)
    qpos[:, 0] = torch.tensor([-2.1, -2.1, -1.9, -2.5])
    qpos[1, 2] = 0.25  # leaning beyond the healthy angle: unhealthy, no success
    qpos[3, 1] = 0.6  # torso too low: unhealthy, no success
    env.set_state(qpos, torch.zeros(4, env.model.nv))
    check_step("Hopper-Backward-v0", env, [True, False, False, False], [True, True, False, True])


# ------------------------------------------------------------ partial success
@pytest.mark.parametrize(("env_id", "column", "target"), [("HalfCheetah-Backward-v0", 0, -20.0),
                                                          ("Hopper-Backward-v0", 0, -2.0),
                                                          ("Ant-TurnInPlace-v0", -1, 2 * math.pi)])
def test_partial_success_is_the_share_of_the_target_reached_and_1_at_success(env_id: str, column: int,
                                                                               target: float) -> None:
    rule = llm_reward.describe(env_id).partial_success
    assert rule is not None
    size = envs.make(env_id, num_envs=1, seed=0, nthread=1).single_observation_space.shape[0]
    obs = torch.zeros(5, size, dtype=torch.float64)
    obs[:, column] = torch.tensor([0.0, 0.25, 0.5, 1.0, 1.5]) * target
    obs[0, column] = -0.1 * target  # the wrong way: 0, not below it
    assert rule(obs).tolist() == pytest.approx([0.0, 0.25, 0.5, 1.0, 1.0])


def test_the_episodes_partial_success_is_their_best_state_a_success_counting_1() -> None:
    from rewardlab.agents.evaluation import Episodes, play_episodes

    env = make("HalfCheetah-Backward-v0", 3)
    # a policy that does nothing: the cheetah stays near x = 0, which counts 0 (steps of 0.05)
    still = play_episodes(lambda obs: torch.zeros(3, 6), env, seed=0, max_steps=50,
                          success=llm_reward.describe("HalfCheetah-Backward-v0").success,
                          partial=llm_reward.describe("HalfCheetah-Backward-v0").partial_success)
    assert still.partial is not None and all(0.0 <= value < 0.05 for value in still.partial)
    assert still.partial_success == 0.0 and still.success_rate == 0.0
    assert Episodes([0.0, 0.0, 1.0], [False, False, True], [0.049, 0.51, 1.0]).partial_success == pytest.approx(
        (0.0 + 0.5 + 1.0) / 3)


def _yawed(env, yaw: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
    qpos = env.init_qpos.repeat(env.num_envs, 1)
    qpos[:, :2] = xy
    qpos[:, 3] = torch.cos(yaw / 2)
    qpos[:, 4:6] = 0.0
    qpos[:, 6] = torch.sin(yaw / 2)
    return qpos


def test_ant_turns_a_full_circle_counter_clockwise_then_restarts_its_counters() -> None:
    env = make("Ant-TurnInPlace-v0", 2)
    assert torch.equal(env.observe()[:, -3:], torch.zeros(2, 3, dtype=torch.float64))
    start = env.qpos[:, :2] - env.displacement()
    yaw = env.heading().clone()
    for turn in range(1, 8):  # env 0 turns by 1 rad a step (set_state), env 1 keeps its heading
        yaw[0] += 1.0
        env.set_state(_yawed(env, yaw, start), torch.zeros(2, env.model.nv))
        done = turn == 7  # 6 rad < 2 pi <= 7 rad
        info = check_step("Ant-TurnInPlace-v0", env, [done, False], [done, False])
    assert float(info["turned"][0]) == pytest.approx(7.0, abs=0.1)
    assert float(info["final_obs"][0, -1]) == pytest.approx(7.0, abs=0.1)
    # env 0's episode ended: its counters restarted; env 1's go on.
    assert float(env.turned()[0]) == 0.0 and torch.equal(env.displacement()[0], torch.zeros(2, dtype=torch.float64))
    assert abs(float(env.turned()[1])) < 0.1 and float(env.observe()[1, -1]) == float(env.turned()[1])


def test_ant_turning_ends_without_success_outside_the_circle_or_clockwise() -> None:
    env = make("Ant-TurnInPlace-v0", 2)
    start = env.qpos[:, :2] - env.displacement()
    yaw = env.heading().clone()
    for _ in range(7):  # env 0 turns clockwise: the counter goes negative
        yaw[0] -= 1.0
        env.set_state(_yawed(env, yaw, start), torch.zeros(2, env.model.nv))
        check_step("Ant-TurnInPlace-v0", env, [False, False], [False, False])
    assert float(env.turned()[0]) == pytest.approx(-7.0, abs=0.1)
    yaw[1] += 7.0  # a full turn, but 1.2 m from the start
    away = start.clone()
    away[1, 0] += 1.2
    env.set_state(_yawed(env, yaw, away), torch.zeros(2, env.model.nv))
    check_step("Ant-TurnInPlace-v0", env, [False, False], [False, True])
    assert float(env.turned()[1]) == 0.0


def test_behaviours_refuse_reward_weights_and_layout_flags() -> None:
    with pytest.raises(ValueError, match="forward_reward_weight"):
        envs.make("HalfCheetah-Backward-v0", num_envs=1, forward_reward_weight=2.0)
    with pytest.raises(ValueError, match="exclude_current_positions_from_observation"):
        envs.make("Hopper-Backward-v0", num_envs=1, exclude_current_positions_from_observation=True)
    with pytest.raises(ValueError, match="include_cfrc_ext_in_observation"):
        envs.make("Ant-TurnInPlace-v0", num_envs=1, include_cfrc_ext_in_observation=False)


# ------------------------------------------------------------------- descriptions
def _planar_expected(env, first: int) -> dict[str, torch.Tensor]:
    qpos, qvel = env.qpos, env.qvel
    clip = 10.0 if "HalfCheetah" not in env.spec_id else math.inf
    height = 0.7 if "HalfCheetah" in env.spec_id else 0.0
    expected = {"torso_z": qpos[:, 1] + height, "torso_angle": qpos[:, 2]}
    if first:
        expected["x"] = qpos[:, 0]
    names = llm_reward.describe(env.spec_id).state_names
    joints = [name[: -len("_angle")] for name in names if name.endswith("_angle") and name != "torso_angle"]
    for index, joint in enumerate(joints):
        expected[f"{joint}_angle"] = qpos[:, 3 + index]
        expected[f"{joint}_angular_velocity"] = qvel[:, 3 + index].clamp(-clip, clip)
    for index, name in enumerate(("x_velocity", "z_velocity", "torso_angular_velocity")):
        expected[name] = qvel[:, index].clamp(-clip, clip)
    return expected


def _ant_expected(env) -> dict[str, torch.Tensor]:
    qpos, qvel = env.qpos, env.qvel
    rows = []
    for quaternion, omega in zip(qpos[:, 3:7].numpy(), qvel[:, 3:6].numpy(), strict=True):
        matrix = np.zeros(9)
        mujoco.mju_quat2Mat(matrix, quaternion / np.linalg.norm(quaternion))
        matrix = matrix.reshape(3, 3)
        rows.append([matrix[2, 2], math.atan2(matrix[1, 0], matrix[0, 0]), (matrix @ omega)[2]])
    derived = torch.tensor(rows, dtype=torch.float64)
    contact = env.backend.cfrc_ext().clamp(-1.0, 1.0)
    expected = {"torso_z": qpos[:, 2], "torso_up": derived[:, 0], "torso_yaw": derived[:, 1],
                "yaw_rate": derived[:, 2], "contact_forces_squared": contact.square().sum(dim=(1, 2))}
    expected.update({f"torso_q{axis}": qpos[:, 3 + i] for i, axis in enumerate("wxyz")})
    for i, axis in enumerate("xyz"):
        expected[f"{axis}_velocity"] = qvel[:, i]
        expected[f"torso_angular_velocity_{axis}"] = qvel[:, 3 + i]
    for leg in range(4):
        for j, part in enumerate(("hip", "ankle")):
            expected[f"{part}_{leg + 1}_angle"] = qpos[:, 7 + 2 * leg + j]
            expected[f"{part}_{leg + 1}_angular_velocity"] = qvel[:, 6 + 2 * leg + j]
        expected[f"foot_{leg + 1}_contact"] = (contact[:, ANT_FEET[leg]].abs().amax(dim=1) > 0).double()
    if env.spec_id == "Ant-TurnInPlace-v0":
        displacement = env.displacement()
        expected.update({"x_from_start": displacement[:, 0], "y_from_start": displacement[:, 1],
                         "distance_from_start": displacement.norm(dim=1), "turned": env.turned()})
    return expected


@pytest.mark.parametrize("env_id", ALL)
def test_description_variables_read_the_state(env_id: str) -> None:
    env = make(env_id, 3)
    generator = torch.Generator().manual_seed(0)
    scale = 0.1 if env_id.startswith("Ant") else 1.0  # gently, so that the ant's feet touch down
    for _ in range(15):
        obs, *_ = step(env, scale * (torch.rand(3, env.single_action_space.shape[0], generator=generator) * 2 - 1))
    if env_id == "InvertedPendulum-v5":
        qpos, qvel = env.qpos, env.qvel
        expected = {"cart_position": qpos[:, 0], "pole_angle": qpos[:, 1], "cart_velocity": qvel[:, 0],
                    "pole_angular_velocity": qvel[:, 1]}
    elif env_id.startswith("Ant"):
        expected = _ant_expected(env)
        assert sum(float(expected[f"foot_{leg}_contact"].sum()) for leg in range(1, 5)) > 0
    else:
        expected = _planar_expected(env, first=int("Backward" in env_id))
    description = llm_reward.describe(env_id)
    assert set(expected) == set(description.state_names)
    values = description.state_tensors(obs)
    for name, value in expected.items():
        torch.testing.assert_close(values[name], value.float(), rtol=1e-4, atol=1e-4, msg=name)
    assert (description.action.shape or (1,)) == env.single_action_space.shape  # () flattens (N, 1)


def test_descriptions_register_without_importing_mujoco() -> None:
    import subprocess
    import sys

    code = "import sys; from rewardlab import envs; envs.describe('Ant-TurnInPlace-v0'); print('mujoco' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


# ------------------------------------------------------------------- references, evolve
@pytest.mark.parametrize("env_id", ALL)
def test_reference_programs_run_and_the_sparse_one_tracks_the_env_reward(env_id: str) -> None:
    programs = llm_reward.reference_programs(env_id)
    description = llm_reward.describe(env_id)
    env = make(env_id, 4)
    obs = env.observe().float()
    generator = torch.Generator().manual_seed(1)
    program_sum, env_sum, size = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    for _ in range(40):
        actions = torch.rand(4, env.single_action_space.shape[0], generator=generator) * 2 - 1
        next_obs, reward, terminated, _, info = env.step(actions)
        for program in programs.values():
            value, _ = RewardFunction(program, description)(obs, actions, info["final_obs"], terminated)
            assert value.shape == (4,) and bool(torch.isfinite(value).all())
        sparse = sparse_reward(env_id, obs, actions, info, terminated)
        if env_id in BEHAVIOURS or env_id == "InvertedPendulum-v5":
            assert torch.equal(sparse, reward)
        program_sum, env_sum, size = program_sum + sparse, env_sum + reward, size + reward.abs()
        obs = next_obs
    # The forward velocity is the mean of the observed ones, not the x displacement: close over a run.
    assert bool(((program_sum - env_sum).abs() <= 0.05 * size + 1e-4).all())
    if env_id in TASKS:
        assert programs["sparse"].source == programs["human"].source


@pytest.mark.parametrize("env_id", sorted(BEHAVIOURS))
def test_evolve_programs_run_on_the_behaviours(env_id: str) -> None:
    description = llm_reward.describe(env_id)
    proposer = EvolveRandomProposer(description, seed=0, references=llm_reward.reference_programs(env_id))
    assert "x" in focus_variables(description) or "turned" in focus_variables(description)
    for _, source in proposer.propose(0, 8, []):
        llm_reward.RewardProgram.from_source(source).check(env_id)
    terms = [Term(kind, focus_variables(description)[0], 0.5) for kind in STATE_KINDS]
    terms += [Term(kind, None, 1.0) for kind in proposer._global_kinds]
    function = RewardFunction(llm_reward.RewardProgram.from_source(proposer.render(terms)), description)
    env = make(env_id, 3)
    obs = env.observe().float()
    actions = torch.zeros(3, env.single_action_space.shape[0])
    _, _, terminated, _, info = env.step(actions)
    reward, components = function(obs, actions, info["final_obs"], terminated)
    assert reward.shape == (3,) and set(components) == {term.name for term in terms}


def test_a_reward_program_trains_on_a_behaviour_in_the_sandbox() -> None:
    program = llm_reward.reference_programs("HalfCheetah-Backward-v0")["human"]
    result = llm_reward.evaluate(
        program, "HalfCheetah-Backward-v0", steps=256, num_envs=4, num_checkpoints=1, eval_episodes=2,
        ppo_kwargs={"n_steps": 32, "n_epochs": 1}, timeout_s=120,
    )
    assert result.ok, result.failure
    assert result.success_rate is not None and result.fitness == pytest.approx(result.success_rate)
    assert {"program/backward", "program/ctrl_cost", "extrinsic"} <= set(result.curve[-1].components)
