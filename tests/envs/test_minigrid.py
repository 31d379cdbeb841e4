"""The MiniGrid helpers and the intrinsic modules on MiniGrid observations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("minigrid")

from rewardlab import intrinsic  # noqa: E402
from rewardlab.envs.minigrid import make_minigrid, make_minigrid_vec  # noqa: E402


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
    with pytest.raises(ValueError, match="not a MiniGrid task"):
        make_minigrid("CartPole-v1")


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
