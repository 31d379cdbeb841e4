"""The built-in potentials of Gymnasium's v5 MuJoCo tasks on Gymnasium envs and the batched ones."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco.batch")

from shaping_checks import assert_episode_shaping_telescopes  # noqa: E402

from rewardlab import envs  # noqa: E402
from rewardlab.shaping import PotentialShapingVector, potentials  # noqa: E402

POTENTIALS = {
    "Hopper-v5": potentials.HopperHealthMargin,
    "Walker2d-v5": potentials.Walker2dHealthMargin,
    "HalfCheetah-v5": potentials.HalfCheetahUpright,
    "Ant-v5": potentials.AntUpright,
    "InvertedPendulum-v5": potentials.InvertedPendulumUpright,
}
TERMINATE_ON_RANDOM_ACTIONS = ("Hopper-v5", "Walker2d-v5", "InvertedPendulum-v5")
# Time limits short enough that random actions also reach them.
MAX_EPISODE_STEPS = {"InvertedPendulum-v5": 6}


def _random_actions(space: gymnasium.spaces.Box, num_envs: int, generator: torch.Generator):
    low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
    return low + (high - low) * torch.rand((num_envs, *low.shape), generator=generator)


@pytest.mark.parametrize("env_id", sorted(POTENTIALS))
def test_for_env_returns_the_potential(env_id):
    phi = potentials.for_env(env_id)
    assert type(phi) is POTENTIALS[env_id] and phi.weight == 1.0
    assert potentials.available()[env_id]
    assert potentials.for_env(env_id, weight=3.0).weight == 3.0


@pytest.mark.parametrize("env_id", sorted(POTENTIALS))
def test_numpy_torch_gymnasium_and_batched_agree(env_id):
    num_envs = 3
    env = envs.make(env_id, num_envs=num_envs, seed=0, nthread=1)
    env.reset()
    phi = potentials.for_env(env_id)
    reference = gymnasium.make(env_id).unwrapped
    reference.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        obs, _, _, _, info = env.step(_random_actions(env.single_action_space, num_envs, generator))
        # The true last observations too: those of ended episodes are the unhealthy states.
        both = torch.cat([obs, info["final_obs"]])
        torch_values = phi(both)
        numpy_values = phi(both.numpy())
        assert isinstance(torch_values, torch.Tensor) and torch_values.shape == (2 * num_envs,)
        assert isinstance(numpy_values, np.ndarray) and numpy_values.shape == (2 * num_envs,)
        np.testing.assert_allclose(torch_values.numpy(), numpy_values, rtol=1e-6, atol=1e-6)
        # The simulations hold the states of obs (after any reset), which Gymnasium's env takes.
        for index in range(num_envs):
            env.write_gymnasium_state(reference, index)
            gymnasium_value = phi(reference._get_obs()[None])
            np.testing.assert_allclose(gymnasium_value, numpy_values[index : index + 1], atol=1e-5)


@pytest.mark.parametrize("env_id", sorted(POTENTIALS))
def test_finite_on_states_random_actions_reach(env_id):
    vector = gymnasium.make_vec(env_id, num_envs=2, vectorization_mode="sync")
    vector = PotentialShapingVector(vector, potentials.for_env(env_id), gamma=0.99)
    vector.action_space.seed(0)
    vector.reset(seed=0)
    for _ in range(60):
        # The wrapper checks that the potential is finite with one value per env.
        _, _, _, _, info = vector.step(vector.action_space.sample())
        assert np.isfinite(info["reward_components"]["shaping"]).all()
    vector.close()
    single = gymnasium.make(env_id)
    obs, _ = single.reset(seed=1)
    assert np.isfinite(potentials.for_env(env_id)(obs[None])).all()


@pytest.mark.parametrize("env_id", sorted(POTENTIALS))
def test_batched_shaping_is_exact_per_episode(env_id):
    env = envs.make(
        env_id, num_envs=4, seed=0, max_episode_steps=MAX_EPISODE_STEPS.get(env_id, 25), nthread=1
    )
    seen = assert_episode_shaping_telescopes(env, potentials.for_env(env_id), steps=60)
    assert seen["truncated"] > 0
    if env_id in TERMINATE_ON_RANDOM_ACTIONS:
        assert seen["terminated"] > 0


def test_potential_values_mean_what_they_say():
    hopper = potentials.for_env("Hopper-v5", weight=2.0)
    standing, high_hop, tilted, fallen = np.zeros((4, 11))
    standing[0], high_hop[0], tilted[:2], fallen[0] = 1.25, 1.8, (1.25, 0.2), 0.7
    np.testing.assert_allclose(hopper(np.stack([standing, high_hop, tilted, fallen])), [2, 2, 1, 1])
    walker = potentials.for_env("Walker2d-v5")
    centred, edge = np.zeros((2, 17))
    centred[0], edge[:2] = 1.4, (2.0, -1.0)
    np.testing.assert_allclose(walker(np.stack([centred, edge])), [1.0, 0.0], atol=1e-12)
    ant = potentials.for_env("Ant-v5")
    upright, upside_down = np.zeros((2, 105))
    upright[:2] = 0.6, 1.0  # height, quaternion w
    upside_down[:3] = 0.6, 0.0, 1.0  # half a turn about x
    np.testing.assert_allclose(ant(np.stack([upright, upside_down])), [1.0, 0.5])
    cheetah = potentials.for_env("HalfCheetah-v5")
    level, on_its_back = np.zeros((2, 17))
    on_its_back[1] = np.pi
    np.testing.assert_allclose(cheetah(np.stack([level, on_its_back])), [1.0, -1.0])
    pendulum = potentials.for_env("InvertedPendulum-v5")
    np.testing.assert_allclose(pendulum(np.array([[0.5, 0.0, 1, 1], [0.0, -0.25, 0, 0]])), [1.0, 0.0])


def test_wrong_layouts_are_named():
    with pytest.raises(ValueError, match=r"HopperHealthMargin .* \(N, 11\); got \(2, 12\)"):
        potentials.for_env("Hopper-v5")(np.zeros((2, 12)))
    with pytest.raises(ValueError, match=r"AntUpright .* \(N, 105\).* \(N, 27\)"):
        potentials.for_env("Ant-v5")(torch.zeros((2, 29)))
    assert potentials.for_env("Ant-v5")(torch.ones((2, 27))).shape == (2,)
