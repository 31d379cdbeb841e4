"""The batched MuJoCo tasks against Gymnasium's v5 envs: same states, actions, terms and ends."""

import gymnasium
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco.batch")

from rewardlab import envs  # noqa: E402
from rewardlab.envs.adapters import GymnasiumVectorEnv  # noqa: E402
from rewardlab.envs.mujoco import TASKS  # noqa: E402

STEPS = 120
NUM_ENVS = 3
# Gymnasium's info key of each of our reward components.
GYMNASIUM_TERM = {
    "forward_reward": "reward_forward",
    "ctrl_cost": "reward_ctrl",
    "healthy_reward": "reward_survive",
    "contact_cost": "reward_contact",
}


def _close(ours: torch.Tensor, theirs, what: str) -> None:
    expected = torch.as_tensor(np.asarray(theirs, dtype=np.float64), dtype=torch.float32)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("env_id", sorted(TASKS))
def test_matches_gymnasium_step_by_step(env_id):
    env = envs.make(env_id, num_envs=NUM_ENVS, seed=3, nthread=1)
    obs, _ = env.reset()
    references = []
    for index in range(NUM_ENVS):
        reference = gymnasium.make(env_id).unwrapped
        reference.reset(seed=index)
        env.write_gymnasium_state(reference, index)
        _close(obs[index], reference._get_obs(), f"{env_id} env {index} first observation")
        references.append(reference)
    rng = np.random.default_rng(0)
    low, high = env.single_action_space.low, env.single_action_space.high
    endings = 0
    for step in range(STEPS):
        # Actions beyond the range too: MuJoCo clamps them, the control cost does not.
        actions = rng.uniform(1.2 * low, 1.2 * high, size=(NUM_ENVS, *low.shape)).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(actions)
        for index, reference in enumerate(references):
            where = f"{env_id} env {index} step {step}"
            ref_obs, ref_reward, ref_terminated, _, ref_info = reference.step(actions[index])
            _close(info["final_obs"][index], ref_obs, f"{where} observation")
            _close(reward[index], ref_reward, f"{where} reward")
            assert bool(terminated[index]) == ref_terminated, f"{where} terminated"
            for name, value in info["reward_components"].items():
                if name != "extrinsic":
                    _close(value[index], ref_info[GYMNASIUM_TERM[name]], f"{where} {name}")
            for key in ("x_position", "x_velocity", "y_velocity"):
                if key in ref_info:
                    _close(info[key][index], ref_info[key], f"{where} {key}")
            if ref_terminated:
                endings += 1
                reference.reset(seed=step)
                env.write_gymnasium_state(reference, index)
                _close(obs[index], reference._get_obs(), f"{where} first observation after reset")
    assert not truncated.any()
    if env_id in ("Hopper-v5", "Walker2d-v5", "InvertedPendulum-v5"):
        assert endings > 0, "random actions should have ended some episodes of " + env_id


def test_ant_contact_forces_are_exercised():
    env = envs.make("Ant-v5", num_envs=4, seed=0)
    env.reset()
    generator = torch.Generator().manual_seed(0)
    contact = torch.zeros(4, dtype=torch.float64)
    for _ in range(40):
        actions = torch.rand((4, 8), generator=generator) * 2 - 1
        _, _, _, _, info = env.step(actions)
        contact += info["reward_components"]["contact_cost"].abs().double()
    assert (contact > 0).all()


@pytest.mark.parametrize("env_id", sorted(TASKS))
def test_components_sum_to_the_reward_and_time_limit_truncates(env_id):
    env = envs.make(env_id, num_envs=5, seed=1, max_episode_steps=7)
    env.reset()
    ended = torch.zeros(5, dtype=torch.bool)
    for _ in range(7):
        zeros = torch.zeros((5, *env.single_action_space.shape))
        obs, reward, terminated, truncated, info = env.step(zeros)
        components = info["reward_components"]
        total = sum(value for name, value in components.items() if name != "extrinsic")
        torch.testing.assert_close(total, reward)
        torch.testing.assert_close(components["extrinsic"], reward)
        ended |= terminated
    assert (truncated | ended).all()


def test_same_seed_same_numbers_and_reset_noise():
    def rollout(seed):
        env = envs.make("HalfCheetah-v5", num_envs=4, seed=seed)
        obs, _ = env.reset()
        generator = torch.Generator().manual_seed(5)
        rewards = [env.step(torch.rand((4, 6), generator=generator) * 2 - 1)[1] for _ in range(20)]
        return obs, torch.stack(rewards)

    obs_a, rewards_a = rollout(0)
    obs_b, rewards_b = rollout(0)
    obs_c, _ = rollout(1)
    assert torch.equal(obs_a, obs_b) and torch.equal(rewards_a, rewards_b)
    assert not torch.equal(obs_a, obs_c)
    # HalfCheetah draws qvel noise from N(0, 0.1): the spread shows it is not uniform(-0.1, 0.1).
    env = envs.make("HalfCheetah-v5", num_envs=2000, seed=0)
    obs, _ = env.reset()
    velocities = obs[:, 8:].double()
    assert velocities.abs().max() > 0.2
    assert abs(float(velocities.std()) - 0.1) < 0.01


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="compile=True"):
        envs.make("Hopper-v5", num_envs=2, compile=True)
    with pytest.raises(ValueError, match="backend="):
        envs.make("Hopper-v5", num_envs=2, backend="tpu")
    with pytest.raises(ValueError, match="xml_file="):
        envs.make("Hopper-v5", num_envs=2, xml_file="no_such_model.xml")
    with pytest.raises(ValueError, match="healthy_z_range"):
        envs.make("Hopper-v5", num_envs=2, healthy_z_range=(1.0, 0.5))
    with pytest.raises(ValueError, match="main_body"):
        envs.make("Ant-v5", num_envs=2, main_body="tail")
    env = envs.make("Hopper-v5", num_envs=2, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros((2, 3)))
    env.reset()
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        env.step(torch.zeros((2, 4)))
    actions = torch.zeros((2, 3))
    actions[1, 2] = float("nan")
    with pytest.raises(ValueError, match="env 1"):
        env.step(actions)
    with pytest.raises(ValueError, match="qpos has shape"):
        env.set_state(torch.zeros((2, 5)), torch.zeros((2, 6)))


def test_adapters_and_gymnasium_kwargs():
    env = envs.make("Walker2d-v5", num_envs=2, seed=0, exclude_current_positions_from_observation=False)
    assert env.single_observation_space.shape == (18,)
    obs, _ = env.reset()
    torch.testing.assert_close(obs[:, 0], env.qpos[:, 0].float())
    vec = GymnasiumVectorEnv(envs.make("Hopper-v5", num_envs=3, seed=0))
    obs, _ = vec.reset()
    assert obs.shape == (3, 11)
    obs, reward, terminated, truncated, info = vec.step(vec.action_space.sample())
    assert reward.shape == (3,) and "reward_components" in info
