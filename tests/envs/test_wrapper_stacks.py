"""Batched reward wrappers stacked in any order and seen through every adapter.

A shaped (or reward-program) batched env must stay shaped when it becomes an SB3 VecEnv
or a Gymnasium VectorEnv, and wrappers must stack on each other in either order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rewardlab import envs, llm_reward
from rewardlab.envs.adapters import GymnasiumVectorEnv, SB3VecEnv
from rewardlab.envs.core import Batched
from rewardlab.llm_reward.programs.loading import reward_file_text
from rewardlab.shaping import BatchedPotentialShaping, potentials

ENV_ID = "MountainCar-v0"


def shaped(num_envs: int = 4, name: str = "shaping") -> BatchedPotentialShaping:
    env = envs.make(ENV_ID, num_envs=num_envs, seed=0)
    return BatchedPotentialShaping(env, potentials.for_env(ENV_ID), gamma=0.99, name=name)


def program_reward(tmp_path: Path) -> llm_reward.LoadedReward:
    source = llm_reward.reference_programs(ENV_ID)["human"].source
    path = tmp_path / "best_reward.py"
    path.write_text(reward_file_text(source, ENV_ID, ["a test program"]))
    return llm_reward.load_reward(path)


def test_a_shaped_env_is_a_batched_wrapper() -> None:
    env = shaped()
    assert isinstance(env, envs.BatchedWrapper) and isinstance(env, Batched)
    assert env.unwrapped is env.env
    assert env.num_envs == 4 and env.spec_id == ENV_ID  # looked up on the wrapped env


def test_sb3_adapter_of_a_shaped_env_keeps_the_shaping() -> None:
    venv = SB3VecEnv(shaped())
    venv.reset()
    _, rewards, _, infos = venv.step(np.full(4, 2))
    components = [info["reward_components"] for info in infos]
    assert all(set(c) == {"extrinsic", "shaping"} for c in components)
    np.testing.assert_allclose(rewards, [c["extrinsic"] + c["shaping"] for c in components], rtol=1e-5)
    assert any(c["shaping"] != 0.0 for c in components)


def test_gymnasium_adapter_of_a_shaped_env_keeps_the_shaping() -> None:
    vector = GymnasiumVectorEnv(shaped())
    vector.reset(seed=0)
    _, rewards, _, _, info = vector.step(np.full(4, 2))
    components = info["reward_components"]
    assert set(components) == {"extrinsic", "shaping"}
    np.testing.assert_allclose(rewards, components["extrinsic"] + components["shaping"], rtol=1e-5)
    assert np.any(components["shaping"] != 0.0)


@pytest.mark.parametrize("program_inside", [True, False], ids=["program-then-shaping", "shaping-then-program"])
def test_program_reward_and_shaping_stack_in_either_order(tmp_path: Path, program_inside: bool) -> None:
    reward = program_reward(tmp_path)
    if program_inside:
        env = BatchedPotentialShaping(
            reward.wrap(envs.make(ENV_ID, num_envs=3, seed=0), trusted=True), potentials.for_env(ENV_ID),
            gamma=0.99,
        )
    else:
        env = reward.wrap(shaped(3), trusted=True)
    env.reset(seed=0)
    _, total, _, _, info = env.step(torch.full((3,), 2))
    components = info["reward_components"]
    program_terms = [name for name in components if name.startswith("program/")]
    assert "extrinsic" in components and "shaping" in components and program_terms
    program_total = sum(components[name] for name in program_terms)
    if program_inside:  # the shaping is added to the program's reward
        expected = program_total + components["shaping"]
    else:  # the program replaces the (shaped) reward it wraps
        expected = program_total
    torch.testing.assert_close(total, expected.to(total.dtype), rtol=1e-5, atol=1e-6)
    # and the stack still adapts as a whole
    venv = SB3VecEnv(env)
    venv.reset()
    _, _, _, infos = venv.step(np.full(3, 2))
    assert set(infos[0]["reward_components"]) == set(components)


def test_two_shaping_wrappers_need_two_names() -> None:
    env = BatchedPotentialShaping(shaped(2), potentials.for_env(ENV_ID), gamma=0.99)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="'shaping'.*another name="):
        env.step(torch.full((2,), 2))
    env = BatchedPotentialShaping(shaped(2), potentials.for_env(ENV_ID), gamma=0.99, name="energy")
    env.reset(seed=0)
    _, _, _, _, info = env.step(torch.full((2,), 2))
    assert set(info["reward_components"]) == {"extrinsic", "shaping", "energy"}
