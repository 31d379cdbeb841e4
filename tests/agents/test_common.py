"""The learners' typed configs: one dataclass per learner, checked once, saved as data."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from rewardlab import envs
from rewardlab.agents import HRA, PPO
from rewardlab.agents.hra import HRAConfig
from rewardlab.agents.ppo import MUJOCO_CONFIG, PPOConfig


@pytest.mark.parametrize("config_class", [PPOConfig, HRAConfig])
def test_config_round_trips_as_json_data(config_class) -> None:
    config = config_class().replace(gamma=0.9, learning_rate=1e-3)
    data = json.loads(json.dumps(config.to_dict()))
    assert config_class.from_dict(data) == config
    assert set(data) == set(config_class.names())
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.gamma = 0.5  # type: ignore[misc]


@pytest.mark.parametrize("config_class", [PPOConfig, HRAConfig])
def test_unknown_or_bad_hyperparameters_are_named(config_class) -> None:
    with pytest.raises(ValueError, match=r"unknown \w+ hyperparameter\(s\) \['gama'\]; known: .*'gamma'"):
        config_class().replace(gama=0.9)
    with pytest.raises(ValueError, match="gamma must be a number in \\[0, 1\\], got gamma=1.5"):
        config_class(gamma=1.5)


def test_ppo_keyword_changes_apply_on_top_of_a_config() -> None:
    env = envs.make("CartPole-v1", num_envs=4, seed=0)
    model = PPO(env, config=MUJOCO_CONFIG, n_steps=8, batch_size=16)
    assert model.config == MUJOCO_CONFIG.replace(n_steps=8, batch_size=16)
    assert model.config.normalize_obs and model.config.anneal_lr  # the rest of the preset
    assert PPO(env).config == PPOConfig()
    with pytest.raises(ValueError, match="unknown PPO hyperparameter"):
        PPO(env, n_step=8)


def test_saved_models_carry_their_config(tmp_path) -> None:
    env = envs.make("CartPole-v1", num_envs=4, seed=0)
    model = PPO(env, n_steps=8, net_arch={"pi": [16], "vf": [32]})
    model.save(tmp_path / "ppo.pt")
    assert PPO.load(tmp_path / "ppo.pt", env=env).config == model.config
    hra = HRA(env, ["extrinsic"], learning_starts=8, buffer_size=64, net_arch=[16])
    hra.save(tmp_path / "hra.pt")
    loaded = HRA.load(tmp_path / "hra.pt", env=env)
    assert loaded.config == hra.config and loaded.config.net_arch == [16]
    obs, _ = env.reset(seed=1)
    assert torch.equal(loaded.q_values(obs), hra.q_values(obs))
