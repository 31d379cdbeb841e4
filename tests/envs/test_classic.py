"""Parity of the batched classic-control envs with Gymnasium's own.

Each test puts Gymnasium's env in exactly our state (``write_gymnasium_state``), applies
the same random actions to both and compares what they return. Our states are float32
where Gymnasium's are float64, so observations agree to float32 rounding after one step
and drift over an episode; the tolerances below say how far (and why two envs run in
float64).
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rewardlab import envs

CLASSIC_IDS = [
    "CartPole-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Acrobot-v1",
    "Pendulum-v1",
]
TIME_LIMITS = {
    "CartPole-v1": 500,
    "MountainCar-v0": 200,
    "MountainCarContinuous-v0": 999,
    "Acrobot-v1": 500,
    "Pendulum-v1": 200,
}
NUM_ENVS = 4


def random_actions(space: spaces.Space, rng: np.random.Generator, num_envs: int) -> np.ndarray:
    """A batch of random actions; Box actions reach 20% past the bounds to exercise clipping."""
    if isinstance(space, spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, num_envs)
    span = space.high - space.low
    low, high = space.low - 0.2 * span, space.high + 0.2 * span
    return rng.uniform(low, high, (num_envs, *space.shape)).astype(np.float32)


def gymnasium_action(space: spaces.Space, actions: np.ndarray, index: int) -> int | np.ndarray:
    return int(actions[index]) if isinstance(space, spaces.Discrete) else actions[index]


def synced_pair(env_id: str, seed: int) -> tuple[envs.BatchedEnv, list[gymnasium.Env]]:
    """Our batched env and one Gymnasium env per copy, all in the same state."""
    ours = envs.make(env_id, NUM_ENVS, seed=seed)
    ours.reset()
    theirs = [gymnasium.make(env_id) for _ in range(NUM_ENVS)]
    for index, env in enumerate(theirs):
        env.reset(seed=seed + index)
        ours.write_gymnasium_state(env.unwrapped, index)
    return ours, theirs


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_spaces_and_metadata_match_gymnasium(env_id: str) -> None:
    env = envs.make(env_id, NUM_ENVS)
    reference = gymnasium.make(env_id)
    assert env.single_observation_space == reference.observation_space
    assert env.single_action_space == reference.action_space
    assert env.observation_space.shape == (NUM_ENVS, *reference.observation_space.shape)
    assert env.max_episode_steps == TIME_LIMITS[env_id] == reference.spec.max_episode_steps
    assert env.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
    assert env.spec_id == env_id


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_one_step_from_the_same_state_matches_gymnasium(env_id: str) -> None:
    """Resync every step: the dynamics, rewards and termination agree to float32 rounding."""
    ours, theirs = synced_pair(env_id, seed=1)
    rng = np.random.default_rng(1)
    space = ours.single_action_space
    for _ in range(200):
        actions = random_actions(space, rng, NUM_ENVS)
        _, reward, terminated, truncated, info = ours.step(actions)
        for index, env in enumerate(theirs):
            obs, their_reward, their_terminated, their_truncated, _ = env.step(
                gymnasium_action(space, actions, index)
            )
            np.testing.assert_allclose(info["final_obs"][index].numpy(), obs, rtol=1e-5, atol=1e-5)
            assert float(reward[index]) == pytest.approx(their_reward, rel=1e-5, abs=1e-5)
            assert bool(terminated[index]) == their_terminated
            assert bool(truncated[index]) == their_truncated
            if their_terminated or their_truncated:
                env.reset()
            ours.write_gymnasium_state(env.unwrapped, index)


# How far free-running trajectories stay from Gymnasium's over 1000 steps (several
# episodes per copy, synced again only where an episode ends), as (tolerance at the
# first step of an episode, growth per step). CartPole runs in float32 against
# Gymnasium's float64 (for speed), and the upright pole is unstable, so the rounding
# grows by about 5% a step: 1e-7 after one step, 2e-5 after 80 (measured over 1500
# steps of 32 copies). MountainCar runs in float32 too, but its dynamics do not amplify
# rounding; MountainCarContinuous is float32 in Gymnasium as well. Pendulum (whose angle
# is never wrapped) and Acrobot (chaotic) run in float64 as Gymnasium does: in float32,
# Pendulum's observations drift by 3e-2 within an episode and Acrobot's separate from
# Gymnasium's after 250-500 steps; in float64 both agree to 1e-6 over whole episodes.
FREE_RUNNING_TOLERANCE = {
    "CartPole-v1": (4e-6, 1.05),
    "MountainCar-v0": (1e-5, 1.0),
    "MountainCarContinuous-v0": (1e-5, 1.0),
    "Acrobot-v1": (1e-5, 1.0),
    "Pendulum-v1": (1e-5, 1.0),
}


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_whole_episodes_match_gymnasium(env_id: str) -> None:
    """Over 1000 steps every copy ends at least one episode (Acrobot, MountainCar and
    Pendulum with random actions mostly by truncation, so whole 200- to 999-step episodes
    are compared) and every step agrees within the tolerance above."""
    ours, theirs = synced_pair(env_id, seed=2)
    rng = np.random.default_rng(2)
    space = ours.single_action_space
    first_step_tolerance, growth = FREE_RUNNING_TOLERANCE[env_id]
    episode_steps = np.zeros(NUM_ENVS, dtype=int)
    episodes = np.zeros(NUM_ENVS, dtype=int)
    for _ in range(1000):
        actions = random_actions(space, rng, NUM_ENVS)
        _, reward, terminated, truncated, info = ours.step(actions)
        episode_steps += 1
        for index, env in enumerate(theirs):
            obs, their_reward, their_terminated, their_truncated, _ = env.step(
                gymnasium_action(space, actions, index)
            )
            tolerance = first_step_tolerance * growth ** episode_steps[index]
            np.testing.assert_allclose(
                info["final_obs"][index].numpy(), obs, rtol=tolerance, atol=tolerance
            )
            assert float(reward[index]) == pytest.approx(their_reward, rel=tolerance, abs=tolerance)
            assert bool(terminated[index]) == their_terminated
            assert bool(truncated[index]) == their_truncated
            if their_terminated or their_truncated:
                episodes[index] += 1
                episode_steps[index] = 0
                env.reset()
                ours.write_gymnasium_state(env.unwrapped, index)
    assert episodes.min() >= 1


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_reset_states_are_in_gymnasiums_reset_box(env_id: str) -> None:
    env = envs.make(env_id, 4096, seed=3)
    env.reset()
    state = env.state
    low, high = (torch.tensor(bound, dtype=state.dtype) for bound in env.reset_bounds(None))
    assert ((state >= low) & (state <= high)).all()
    spread = state.max(0).values - state.min(0).values
    assert torch.allclose(spread, high - low, atol=0.01 * float((high - low).max()))
    obs, _ = env.reset()
    assert env.single_observation_space.contains(obs[0].numpy())


def test_reset_options_change_the_reset_box_for_autoresets_too() -> None:
    env = envs.make("CartPole-v1", 256, seed=4, max_episode_steps=1)
    obs, _ = env.reset(options={"low": -0.01, "high": 0.01})
    assert obs.abs().max() <= 0.01
    obs, *_ = env.step(torch.zeros(256, dtype=torch.int64))
    assert obs.abs().max() <= 0.01
    obs, _ = env.reset()
    assert obs.abs().max() > 0.04


@pytest.mark.parametrize("env_id", ["MountainCar-v0", "Pendulum-v1"])
def test_time_limit_truncates_at_gymnasiums_step(env_id: str) -> None:
    env = envs.make(env_id, 16, seed=5)
    env.reset()
    space = env.single_action_space
    rng = np.random.default_rng(5)
    limit = TIME_LIMITS[env_id]
    for step in range(1, limit + 1):
        _, _, terminated, truncated, info = env.step(random_actions(space, rng, 16))
        assert not terminated.any()
        assert bool(truncated.all()) == (step == limit)
    assert not torch.equal(info["final_obs"], env.observe(env.state.T))
    _, _, _, truncated, _ = env.step(random_actions(space, rng, 16))
    assert not truncated.any()


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_render_draws_what_gymnasium_draws_for_the_same_state(env_id: str) -> None:
    ours, theirs = synced_pair(env_id, seed=7)
    space = ours.single_action_space
    actions = random_actions(space, np.random.default_rng(7), NUM_ENVS)
    ours.step(actions)
    reference = gymnasium.make(env_id, render_mode="rgb_array")
    reference.reset(seed=0)
    ours.write_gymnasium_state(reference.unwrapped, 3)
    frame = ours.render(index=3)
    assert frame.dtype == np.uint8 and frame.ndim == 3
    np.testing.assert_array_equal(frame, reference.render())
    ours.close()
    reference.close()
