"""The SB3 glue: the callback that logs every reward component."""

from __future__ import annotations

import pytest
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from rewardlab.agents.sb3 import RewardComponentCallback


class Recorded(BaseCallback):
    """What the logger holds just before each dump (the mean of every recorded key)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, list[float]] = {}

    def _on_step(self) -> bool:
        for key, value in self.logger.name_to_value.items():
            self.values.setdefault(key, []).append(float(value))
        return True


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("algorithm", [PPO, DQN])
def test_extrinsic_is_logged_for_an_env_no_rewardlab_wrapper_touched(algorithm, normalize):
    venv = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    if normalize:  # it scales the rewards the learner gets, not the env's own
        venv = VecNormalize(venv)
    settings = {"n_steps": 32, "batch_size": 64, "n_epochs": 1} if algorithm is PPO else {"learning_starts": 16}
    model = algorithm("MlpPolicy", venv, seed=0, device="cpu", **settings)
    recorded = Recorded()
    model.learn(256, callback=CallbackList([RewardComponentCallback(), recorded]))
    # CartPole pays +1 a step: the mean per step is 1, an episode's sum its length
    assert recorded.values["reward/extrinsic"] and set(recorded.values["reward/extrinsic"]) == {1.0}
    assert recorded.values["episode/extrinsic"] and min(recorded.values["episode/extrinsic"]) >= 8

