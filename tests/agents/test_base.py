"""The learner base: predict, save and load, and the env checks, written once for PPO and HRA."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from rewardlab import envs
from rewardlab.agents.base import Learner
from rewardlab.agents.hra import HRA
from rewardlab.agents.ppo import PPO

LEARNERS: dict[str, Callable[[], Learner]] = {
    "PPO": lambda: PPO(envs.make("CartPole-v1", num_envs=4, seed=0), seed=0, n_steps=16),
    "HRA": lambda: HRA(envs.make("FruitCollection-v0", num_envs=4, seed=0), seed=0, net_arch=[16]),
}
# The entries of each learner's files, as the versions before the base wrote them (a file
# saved then still loads), and the value heads and the bonus's name the base adds
SAVED_KEYS = {
    "PPO": {"format", "seed", "hyperparameters", "observation_space", "action_space", "policy", "optimizer",
            "obs_rms", "reward_rms", "num_timesteps", "n_updates", "value_heads", "intrinsic"},
    "HRA": {"format", "seed", "hyperparameters", "heads", "head_weights", "feature_masks", "observation_space",
            "num_actions", "q_network", "target_network", "optimizer", "num_timesteps", "n_updates",
            "exploration_rate", "value_heads", "intrinsic"},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_every_learner_predicts_saves_and_checks_envs_through_the_base(name: str, tmp_path: Path) -> None:
    model = LEARNERS[name]()
    assert isinstance(model, Learner)
    obs = model.env.reset(seed=3)[0]
    batch, _ = model.predict(obs)
    assert isinstance(batch, torch.Tensor) and batch.shape[0] == 4
    single, state = model.predict(obs[1].cpu().numpy(), state="kept")
    assert isinstance(single, np.ndarray) and state == "kept"
    np.testing.assert_array_equal(single, batch[1].cpu().numpy())
    with pytest.raises(ValueError, match=r"observation has shape \(4, 3\); expected"):
        model.predict(np.zeros((4, 3)))

    model.save(tmp_path / "model.pt")
    data = torch.load(tmp_path / "model.pt", weights_only=True)
    assert set(data) == SAVED_KEYS[name] and data["format"] == f"rewardlab.agents.{name}/1"
    loaded = type(model).load(tmp_path / "model.pt")
    assert torch.equal(loaded.predict(obs)[0], batch)
    assert loaded.num_timesteps == model.num_timesteps and loaded.tensorboard_log is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'unknown'"):
        type(model).load(tmp_path / "model.pt", unknown=1)

    with pytest.raises(ValueError, match="the env's observation space .* differs from the model's"):
        loaded.set_env(envs.make("Acrobot-v1", num_envs=4))
    with pytest.raises(TypeError, match=f"{name} needs a batched torch env"):
        loaded.set_env(gymnasium.make("CartPole-v1"))


def test_a_model_trained_with_a_bonus_says_what_to_pass_to_load_its_heads(tmp_path: Path) -> None:
    from rewardlab import intrinsic

    env = envs.make("CartPole-v1", num_envs=4, seed=0)
    module = intrinsic.make("rnd", env.single_observation_space, env.single_action_space, seed=0)
    model = PPO(env, seed=0, n_steps=16, intrinsic=module)
    model.save(tmp_path / "model.pt")
    with pytest.raises(ValueError) as error:
        PPO.load(tmp_path / "model.pt")
    message = str(error.value)
    assert "\n" not in message and "has the value heads ['reward', 'intrinsic'], not the ['reward'] this load builds" in message
    assert "intrinsic=rewardlab.intrinsic.make('rnd'" in message
    # a file saved before the heads were named says so too
    older = {key: value for key, value in torch.load(tmp_path / "model.pt", weights_only=True).items()
             if key not in ("value_heads", "intrinsic")}
    torch.save(older, tmp_path / "older.pt")
    with pytest.raises(ValueError, match=r"older.pt has other value heads, not the \['reward'\] this load builds"):
        PPO.load(tmp_path / "older.pt")
    again = intrinsic.make("rnd", env.single_observation_space, env.single_action_space, seed=0)
    loaded = PPO.load(tmp_path / "model.pt", intrinsic=again)
    obs = env.reset(seed=1)[0]
    assert torch.equal(loaded.predict(obs)[0], model.predict(obs)[0])


class _Walker:
    """Two scripted episodes on a 1-D track: env 0 gets to 0.3, then a falling step shows 0.9
    and ends it without success; env 1 gets to 0.6 by the time limit (a NaN on the way)."""

    num_envs, device, max_episode_steps = 2, torch.device("cpu"), 10

    def reset(self, seed=None):
        self.t = 0
        return torch.zeros(2, 1), {}

    def step(self, actions):
        self.t += 1
        path = {1: (0.1, 0.2), 2: (0.3, float("nan")), 3: (0.9, 0.4), 4: (0.0, 0.6)}
        obs = torch.tensor([[path[self.t][0]], [path[self.t][1]]])
        terminated = torch.tensor([self.t == 3, False])
        truncated = torch.tensor([False, self.t == 4])
        info = {"final_obs": obs.clone(), "reward_components": {"extrinsic": torch.zeros(2)}}
        return obs, torch.zeros(2), terminated, truncated, info


def test_partial_success_skips_the_state_that_ended_an_episode_without_success_and_nan() -> None:
    from rewardlab.agents.evaluation import Episodes, play_episodes

    def success(final_obs, terminated, truncated):
        return terminated & (final_obs[:, 0] >= 1.0)

    played = play_episodes(lambda obs: torch.zeros(2), _Walker(), success=success,
                           partial=lambda obs: obs[:, 0].clamp(0.0, 1.0))
    assert played.partial == pytest.approx([0.3, 0.6])  # not the fall's 0.9; a time limit's last state counts
    assert played.partial_success == pytest.approx(0.45) and played.success_rate == 0.0
    # one episode of ten that barely moved is no signal: the mean is floored too
    assert Episodes([0.0] * 10, [False] * 10, [0.05] + [0.0] * 9).partial_success == 0.0
    assert Episodes([0.0], [False], [float("nan")]).partial_success == 0.0
