"""rewardlab.agents.PPO: GAE and bootstrapping, the decomposed critic, the intrinsic hook, logging,
seeding, save/load, predict, bad input, and a short CartPole run."""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from rewardlab import envs
from rewardlab.agents import PPO
from rewardlab.agents.evaluation import play_episodes
from rewardlab.agents.ppo import compute_gae
from rewardlab.common.running_stats import RunningMeanStd
from rewardlab.intrinsic import IntrinsicModule


class ChainEnv:
    """Batched toy task following docs/batched_envs.md: positions 0 -> 1 -> ... -> length.

    Every step moves one position right whatever the action; reaching ``length`` ends the
    episode (terminated, or truncated when ``terminal=False``) and restarts at 0. Rewards:
    ``extrinsic`` 1 per step and ``bonus`` (0.5 by default) for leaving an even position; the
    reward is their sum. Observations: one-hot of the position (``length + 1`` features), or the
    constant ``[1.0]`` with ``constant_obs=True``.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    spec_id = "Chain-v0"

    def __init__(
        self,
        num_envs: int,
        length: int = 4,
        terminal: bool = True,
        constant_obs: bool = False,
        bonus: float = 0.5,
    ) -> None:
        self.num_envs, self.length, self.terminal = num_envs, length, terminal
        self.constant_obs, self.bonus = constant_obs, bonus
        self.device = torch.device("cpu")
        obs_dim = 1 if constant_obs else length + 1
        self.single_observation_space = gymnasium.spaces.Box(0.0, 1.0, (obs_dim,), np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.position = torch.zeros(num_envs, dtype=torch.int64)

    def observe(self, position: torch.Tensor) -> torch.Tensor:
        if self.constant_obs:
            return torch.ones((self.num_envs, 1))
        return torch.nn.functional.one_hot(position, self.length + 1).float()

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[torch.Tensor, dict]:
        self.position.zero_()
        return self.observe(self.position), {}

    def step(self, actions: torch.Tensor) -> tuple:
        assert actions.shape == (self.num_envs,) and actions.dtype == torch.int64
        components = {
            "extrinsic": torch.ones(self.num_envs),
            "bonus": self.bonus * (self.position % 2 == 0).float(),
        }
        self.position = self.position + 1
        ended = self.position == self.length
        final_obs = self.observe(self.position)
        self.position = torch.where(ended, 0, self.position)
        terminated = ended if self.terminal else torch.zeros_like(ended)
        truncated = torch.zeros_like(ended) if self.terminal else ended
        reward = components["extrinsic"] + components["bonus"]
        info = {"final_obs": final_obs, "reward_components": components}
        return self.observe(self.position), reward, terminated, truncated, info

    def close(self) -> None:
        pass


def chain_values(length: int, gamma: float, reward: Any) -> list[float]:
    """Exact episodic values of positions 0..length-1 for a per-position reward."""
    values, future = [], 0.0
    for position in reversed(range(length)):
        future = reward(position) + gamma * future
        values.append(future)
    return values[::-1]


def one_hot_positions(length: int) -> torch.Tensor:
    return torch.eye(length + 1)[:length]


# Settings that make the critic a linear (here: tabular) regression that converges fast.
# Rollouts of 8 steps (a multiple of the chain length) x 8 envs, one minibatch.
LINEAR_CRITIC = dict(
    net_arch=[], learning_rate=0.1, anneal_lr=True, n_steps=8, batch_size=64, n_epochs=10,
    gae_lambda=1.0,
)  # fmt: skip


# small networks run fastest on one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


# ----------------------------------------------------------------------------- GAE


def test_gae_hand_computed_with_truncation_and_termination() -> None:
    # env 0 is truncated at t=1 (bootstraps from V(final_obs) = 10); env 1 terminates at t=1.
    rewards = torch.tensor([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    values = torch.tensor([[0.5, 1.0], [0.6, 1.0], [0.7, 1.0]])
    next_values = torch.tensor([[0.6, 1.0], [10.0, 5.0], [0.9, 2.0]])
    terminated = torch.tensor([[False, False], [False, True], [False, False]])
    ended = torch.tensor([[False, False], [True, True], [False, False]])
    advantages, returns = compute_gae(rewards, values, next_values, terminated, ended, 0.9, 0.8)
    # env 0: d2 = 3 + .9*.9 - .7 = 3.11; d1 = 2 + .9*10 - .6 = 10.4 (no carry across the end);
    #        A0 = (1 + .9*.6 - .5) + .9*.8*10.4 = 1.04 + 7.488
    # env 1: d2 = 1 + .9*2 - 1 = 1.8; d1 = 1 + 0 - 1 = 0 (terminated: V(final) ignored);
    #        A0 = (1 + .9*1 - 1) + .72*0 = 0.9
    expected = torch.tensor([[8.528, 0.9], [10.4, 0.0], [3.11, 1.8]])
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, expected + values)


def test_gae_matches_sb3_with_truncation_bonus_added_to_the_reward() -> None:
    from stable_baselines3.common.buffers import RolloutBuffer

    T, N, gamma, lam = 7, 3, 0.97, 0.9
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(T, N, generator=g)
    values = torch.randn(T + 1, N, generator=g)
    final_values = torch.randn(T, N, generator=g)
    terminated = torch.rand(T, N, generator=g) < 0.15
    truncated = (torch.rand(T, N, generator=g) < 0.15) & ~terminated
    ended = terminated | truncated
    next_values = torch.where(ended, final_values, values[1:])
    advantages, returns = compute_gae(
        rewards, values[:-1], next_values, terminated, ended, gamma, lam
    )

    # SB3 adds gamma * V(terminal_observation) to the reward of truncated steps itself.
    space = gymnasium.spaces.Box(-1, 1, (1,))
    buffer = RolloutBuffer(T, space, gymnasium.spaces.Discrete(2), "cpu", lam, gamma, N)
    sb3_rewards = rewards + gamma * final_values * truncated
    episode_starts = torch.cat([torch.zeros(1, N, dtype=torch.bool), ended[:-1]])
    buffer.rewards[:] = sb3_rewards.numpy()
    buffer.values[:] = values[:-1].numpy()
    buffer.episode_starts[:] = episode_starts.numpy()
    buffer.compute_returns_and_advantage(values[-1], ended[-1].numpy())
    np.testing.assert_allclose(advantages.numpy(), buffer.advantages, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(returns.numpy(), buffer.returns, rtol=1e-5, atol=1e-5)


def test_gae_per_head_sums_to_single_head_when_gammas_are_equal() -> None:
    T, N, H = 6, 4, 3
    g = torch.Generator().manual_seed(1)
    rewards, values, next_values = (torch.randn(T, N, H, generator=g) for _ in range(3))
    terminated = torch.rand(T, N, 1, generator=g) < 0.2
    ended = terminated | (torch.rand(T, N, 1, generator=g) < 0.2)
    per_head, per_head_returns = compute_gae(
        rewards, values, next_values, terminated, ended, torch.full((H,), 0.95), 0.9
    )
    single, single_returns = compute_gae(
        rewards.sum(-1), values.sum(-1), next_values.sum(-1), terminated[..., 0], ended[..., 0],
        0.95, 0.9,
    )  # fmt: skip
    torch.testing.assert_close(per_head.sum(-1), single)
    torch.testing.assert_close(per_head_returns.sum(-1), single_returns)


def test_truncated_episodes_bootstrap_from_final_obs() -> None:
    # Reward 1 forever with a constant observation: with bootstrapping V = 1 / (1 - gamma) = 2;
    # without it (truncation treated as termination) V would be the mean of 1.75, 1.5, 1.
    def fitted_value(terminal: bool) -> float:
        env = ChainEnv(8, length=3, terminal=terminal, constant_obs=True, bonus=0.0)
        settings = {**LINEAR_CRITIC, "n_steps": 12, "batch_size": 96, "gae_lambda": 0.95}
        model = PPO(env, gamma=0.5, **settings)
        model.learn(8 * 12 * 20)
        return model.policy.value(torch.ones(1, 1)).item()

    assert fitted_value(terminal=False) == pytest.approx(2.0, abs=0.05)
    assert fitted_value(terminal=True) == pytest.approx((1.75 + 1.5 + 1.0) / 3, abs=0.05)


# ------------------------------------------------------------------ decomposed critic


def test_the_rollout_keeps_the_behaviour_log_probabilities() -> None:
    model = PPO(envs.make("Pendulum-v1", num_envs=4, seed=0), seed=0, n_steps=8, normalize_obs=True)
    model.learn(4 * 8)  # normalisation statistics that are not the identity
    model._collect_rollout()
    rollout = model._rollout
    with torch.no_grad():
        obs = model._normalize_obs(rollout.obs).reshape(32, -1)
        log_prob, _ = model.policy.log_prob_and_entropy(obs, rollout.actions.reshape(32, -1))
    torch.testing.assert_close(rollout.log_prob, log_prob.reshape(8, 4))


def test_a_fresh_model_learns_its_first_rollout_from_whitened_observations() -> None:
    # MountainCar's velocity is a hundred times smaller than its position: the first update
    # must see both on unit scale, with behaviour log-probabilities taken on what it sees.
    model = PPO(envs.make("MountainCar-v0", num_envs=8, seed=0), seed=0, n_steps=16, normalize_obs=True)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    update = model._update

    def spy(obs: torch.Tensor, actions: torch.Tensor, old_log_prob: torch.Tensor, *rest: Any) -> Any:
        with torch.no_grad():
            log_prob, _ = model.policy.log_prob_and_entropy(obs, actions)
        seen.append((obs.clone(), old_log_prob - log_prob))
        return update(obs, actions, old_log_prob, *rest)

    model._update = spy  # type: ignore[method-assign]
    model.learn(2 * 8 * 16)
    (first_obs, first_gap), (second_obs, _) = seen
    torch.testing.assert_close(first_obs.mean(0), torch.zeros(2), atol=1e-4, rtol=0)
    # unit scale (a few clipped at 10 deviations from a 16-step start); 0.33 before
    torch.testing.assert_close(first_obs.std(0, unbiased=False), torch.ones(2), atol=0.05, rtol=0)
    torch.testing.assert_close(first_gap, torch.zeros_like(first_gap), atol=1e-6, rtol=0)
    # every observation is counted once, the first rollout's before its update
    assert float(model.obs_rms.count) == pytest.approx(2 * 8 * 16, abs=1e-3)
    assert not torch.equal(first_obs, second_obs)


def test_running_statistics_whiten_a_feature_that_varies_little() -> None:
    rms = RunningMeanStd(shape=(2,))
    # standard deviation 0.01: a variance floor of 1e-4 would leave it at 0.71
    batch = torch.stack([torch.randn(256), torch.randn(256) * 1e-2], dim=-1)
    rms.update(batch)
    for whitened in (rms.normalize(batch), rms.scale(batch)):
        torch.testing.assert_close(whitened.std(0, unbiased=False), torch.ones(2), atol=5e-3, rtol=0)


def test_trained_value_heads_sum_to_the_single_head_value() -> None:
    gamma, length = 0.9, 4
    single = PPO(ChainEnv(8, length), gamma=gamma, **LINEAR_CRITIC).learn(8 * 8 * 20)
    split = PPO(
        ChainEnv(8, length), gamma=gamma, value_heads=["extrinsic", "bonus"], **LINEAR_CRITIC
    ).learn(8 * 8 * 20)
    states = one_hot_positions(length)
    with torch.no_grad():
        total = single.policy.value(states)[:, 0]
        heads = split.policy.value(states)
    expected_extrinsic = chain_values(length, gamma, lambda p: 1.0)
    expected_bonus = chain_values(length, gamma, lambda p: 0.5 * (p % 2 == 0))
    torch.testing.assert_close(heads[:, 0], torch.tensor(expected_extrinsic), atol=0.03, rtol=0)
    torch.testing.assert_close(heads[:, 1], torch.tensor(expected_bonus), atol=0.03, rtol=0)
    torch.testing.assert_close(heads.sum(-1), total, atol=0.05, rtol=0)


def test_value_heads_have_their_own_gamma() -> None:
    length = 4
    model = PPO(
        ChainEnv(8, length),
        value_heads={"extrinsic": {"gamma": 0.5}, "bonus": {"gamma": 1.0, "weight": 2.0}},
        **LINEAR_CRITIC,
    ).learn(8 * 8 * 20)
    assert [h.weight for h in model.heads] == [1.0, 2.0]
    with torch.no_grad():
        heads = model.policy.value(one_hot_positions(length))
    expected = [
        chain_values(length, 0.5, lambda p: 1.0),
        chain_values(length, 1.0, lambda p: 0.5 * (p % 2 == 0)),
    ]
    torch.testing.assert_close(heads.T, torch.tensor(expected), atol=0.03, rtol=0)


# ---------------------------------------------------------------------- intrinsic hook


class ConstantBonus(IntrinsicModule):
    """A dummy intrinsic module: bonus 0.5 everywhere; records what it was given."""

    def __init__(self, length: int) -> None:
        super().__init__(gymnasium.spaces.Box(0.0, 1.0, (length,)), None, "dummy")
        self.length = length
        self.updates = 0
        self.batch_sizes: list[int] = []

    def compute(
        self, obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor,
        dones: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # Where an episode ended, next_obs is the true last observation, never the reset one.
        moved_from = obs.argmax(-1)
        moved_to = next_obs.argmax(-1)
        assert torch.equal(moved_to, moved_from + 1)
        self.batch_sizes.append(obs.shape[0])
        return torch.full((obs.shape[0],), 0.5)

    def update(self, obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor) -> None:
        self.updates += 1


def test_intrinsic_module_feeds_a_non_episodic_head() -> None:
    length = 4
    bonus = ConstantBonus(length)
    model = PPO(
        ChainEnv(8, length, bonus=0.0),
        gamma=0.5,
        value_heads={"extrinsic": {}, "intrinsic": {"gamma": 0.5, "episodic": False}},
        intrinsic=bonus,
        **LINEAR_CRITIC,
    )
    seen: list[dict[str, float]] = []
    model.learn(8 * 8 * 20, callback=lambda local: seen.append(local["logged"]))
    assert bonus.updates == 20 and set(bonus.batch_sizes) == {8 * 8}
    assert seen[-1]["reward/intrinsic/dummy"] == pytest.approx(0.5)
    assert seen[-1]["episode/intrinsic/dummy"] == pytest.approx(0.5 * length)
    with torch.no_grad():
        heads = model.policy.value(one_hot_positions(length))
    # Non-episodic: the bonus stream runs on through episode ends, V = 0.5 / (1 - 0.5) = 1.
    torch.testing.assert_close(heads[:, 1], torch.ones(length), atol=0.05, rtol=0)
    torch.testing.assert_close(
        heads[:, 0], torch.tensor(chain_values(length, 0.5, lambda p: 1.0)), atol=0.05, rtol=0
    )


def test_intrinsic_bonus_gets_a_non_episodic_head_without_value_heads() -> None:
    length = 4
    model = PPO(ChainEnv(8, length), gamma=0.9, intrinsic=ConstantBonus(length),
                intrinsic_gamma=0.5, **LINEAR_CRITIC)  # fmt: skip
    model.learn(8 * 8 * 20)
    with torch.no_grad():
        values = model.policy.value(one_hot_positions(length))
    expected = chain_values(length, 0.9, lambda p: 1.0 + 0.5 * (p % 2 == 0))
    torch.testing.assert_close(values[:, 0], torch.tensor(expected), atol=0.05, rtol=0)
    torch.testing.assert_close(values[:, 1], torch.ones(length), atol=0.05, rtol=0)


@pytest.mark.parametrize("names", ["rnd", "count"])
def test_intrinsic_package_modules_plug_in(names: str) -> None:
    from rewardlab import intrinsic

    env = cartpole(8)
    module = intrinsic.make(names, env.single_observation_space, env.single_action_space, seed=0)
    heads = {
        "extrinsic": {"gamma": 0.999, "weight": 2.0},
        "intrinsic": {"gamma": 0.99, "episodic": False},
    }  # RND's two-stream critic
    model = PPO(env, n_steps=16, value_heads=heads, intrinsic=module)
    logged: list[dict[str, float]] = []
    model.learn(8 * 16 * 2, callback=lambda local: logged.append(local["logged"]))
    assert math.isfinite(logged[-1][f"reward/intrinsic/{module.name}"])
    assert math.isfinite(logged[-1]["train/value_loss"])


# --------------------------------------------------------------------------- logging


def test_tensorboard_logs_sb3_keys_and_the_true_extrinsic_return(tmp_path: Any) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = PPO(ChainEnv(4, length=5), n_steps=10, tensorboard_log=tmp_path)
    model.learn(80)
    run = EventAccumulator(str(tmp_path / "PPO_1")).Reload()
    tags = set(run.Tags()["scalars"])
    expected = {
        "rollout/ep_rew_mean", "rollout/ep_len_mean", "time/fps",
        "train/policy_gradient_loss", "train/value_loss", "train/entropy_loss",
        "train/approx_kl", "train/clip_fraction", "train/learning_rate",
        "train/explained_variance", "train/n_updates",
        "reward/extrinsic", "reward/bonus", "episode/extrinsic", "episode/bonus",
    }  # fmt: skip
    assert expected <= tags
    # The env's reward includes the bonus; ep_rew_mean is the extrinsic return alone.
    assert [e.value for e in run.Scalars("rollout/ep_rew_mean")] == [5.0, 5.0]
    assert [e.step for e in run.Scalars("rollout/ep_rew_mean")] == [40, 80]
    assert run.Scalars("episode/bonus")[0].value == pytest.approx(1.5)
    assert run.Scalars("reward/bonus")[0].value == pytest.approx(1.5 / 5)
    assert model.ep_info_buffer[-1]["r"] == 5.0 and model.ep_info_buffer[-1]["l"] == 5
    model.learn(40, reset_num_timesteps=True)
    assert (tmp_path / "PPO_2").is_dir()


def test_reward_scaling_tracks_the_discounted_return() -> None:
    # Reward 1 per step, episodes of 4, gamma 0.5: the running discounted return (reset at
    # episode ends) cycles through 1, 1.5, 1.75, 1.875.
    model = PPO(ChainEnv(8, length=4, bonus=0.0), n_steps=8, gamma=0.5, normalize_reward=True)
    model.learn(64)
    cycle = torch.tensor([1.0, 1.5, 1.75, 1.875], dtype=torch.float64)
    torch.testing.assert_close(model.reward_rms.mean, cycle.mean().reshape(1), atol=1e-4, rtol=0)
    torch.testing.assert_close(
        model.reward_rms.var, cycle.var(unbiased=False).reshape(1), atol=1e-4, rtol=0
    )


def test_target_kl_stops_the_epochs_early() -> None:
    def epochs_run(**settings: Any) -> float:
        model = PPO(ChainEnv(8), n_steps=8, n_epochs=5, learning_rate=0.01, **settings)
        logged: list[dict[str, float]] = []
        model.learn(64, callback=lambda local: logged.append(local["logged"]))
        return logged[-1]["train/n_updates"]

    assert epochs_run() == 5
    # The first minibatch sees the rollout policy (KL 0); after one step the KL exceeds 1.5e-9.
    assert epochs_run(target_kl=1e-9) == 1
    assert epochs_run(clip_range_vf=0.1) == 5


def test_callback_returning_false_stops_training() -> None:
    model = PPO(ChainEnv(4), n_steps=8)
    calls: list[int] = []

    def stop_after_first(local: dict[str, Any]) -> bool:
        calls.append(local["iteration"])
        return False

    model.learn(10_000, callback=stop_after_first, progress_bar=True)
    assert calls == [1] and model.num_timesteps == 32


# ------------------------------------------------- a reward computed per rollout (reward_fn)
def upright_reward(obs: Any, actions: Any, next_obs: Any, terminated: Any, env_reward: Any) -> Any:
    bonus = 1.0 - 5.0 * next_obs[:, 2].abs() - 0.1 * actions.float()
    return bonus + 0.5 * env_reward, {"bonus": bonus}


class PerStepReward(envs.BatchedWrapper):
    """The same reward, computed at every step by a wrapper."""

    def reset(self, seed: Any = None, options: Any = None) -> Any:
        self._obs, info = self.env.reset(seed=seed, options=options)
        return self._obs, info

    def step(self, actions: Any) -> Any:
        obs, env_reward, terminated, truncated, info = self.env.step(actions)
        reward, parts = upright_reward(self._obs, actions, info["final_obs"], terminated, env_reward)
        self._obs = obs
        info = {**info, "reward_components": {**info["reward_components"], **parts}}
        return obs, reward, terminated, truncated, info


class SameReward(envs.BatchedWrapper):
    """A wrapper with a step of its own that changes nothing: the rollout then steps the env
    as it steps PerStepReward (no reset states drawn ahead), so both run the same episodes."""

    def step(self, actions: Any) -> Any:
        return self.env.step(actions)


def test_a_reward_per_rollout_trains_as_the_same_reward_per_step() -> None:
    logged: dict[str, list[Any]] = {"step": [], "rollout": []}
    models = {}
    runs = (("step", PerStepReward(cartpole(8)), None), ("rollout", SameReward(cartpole(8)), upright_reward))
    for kind, env, reward_fn in runs:
        models[kind] = PPO(env, seed=3, n_steps=32, n_epochs=2, reward_fn=reward_fn)
        models[kind].learn(1024, callback=lambda local, kind=kind: logged[kind].append(dict(local["logged"])))
    for mine, theirs in zip(models["step"].policy.parameters(), models["rollout"].policy.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    for per_step, per_rollout in zip(logged["step"], logged["rollout"], strict=True):
        for key in ("reward/bonus", "reward/extrinsic", "episode/extrinsic", "train/loss"):
            assert per_step.get(key) == per_rollout.get(key), key
    # the env's own return stays the true one
    assert models["rollout"].ep_info_buffer[-1]["r"] == models["rollout"].ep_info_buffer[-1]["l"]


@pytest.mark.parametrize(("reward_fn", "message"), [
    (lambda *batch: (torch.zeros(3), {}), r"as \(3,\); it must be a float tensor of shape \(64,\)"),
    (lambda obs, *rest: (obs[:, 0], {"extrinsic": obs[:, 0]}), "the env reports too"),
    (lambda obs, *rest: obs[:, 0], "must return \\(reward, components\\)"),
])
def test_a_malformed_reward_fn_is_named(reward_fn: Any, message: str) -> None:
    model = PPO(cartpole(8), n_steps=8, reward_fn=reward_fn)
    with pytest.raises((ValueError, TypeError), match=message):
        model.learn(64)


# ------------------------------------------------------------- CartPole: the real thing


def cartpole(num_envs: int = 16, seed: int = 0) -> Any:
    return envs.make("CartPole-v1", num_envs=num_envs, device="cpu", seed=seed)


def evaluate(model: PPO, env: Any) -> float:
    """Mean true return of the first episode of every env, deterministic actions."""
    return play_episodes(model, env).mean_return


@pytest.fixture(scope="module")
def solved_cartpole() -> PPO:
    """PPO trained until 16 evaluation episodes average 475 or more (30k to 50k steps)."""
    eval_env = cartpole(16, seed=123)
    eval_env.reset(seed=123)
    model = PPO(
        cartpole(64), seed=0, n_steps=32, n_epochs=10, learning_rate=1e-3, gamma=0.98,
        gae_lambda=0.8,
    )  # fmt: skip
    scores: list[float] = []

    def check(local: dict[str, Any]) -> bool:
        if local["iteration"] % 4:
            return True
        scores.append(evaluate(model, eval_env))
        return scores[-1] < 475

    model.learn(200_000, callback=check)
    assert scores and scores[-1] >= 475, f"evaluation returns {scores}"
    return model


def test_learns_cartpole(solved_cartpole: PPO) -> None:
    assert solved_cartpole.num_timesteps <= 200_000
    assert len(solved_cartpole.ep_info_buffer) == 100


def test_sb3_evaluate_policy_on_gymnasium_cartpole(solved_cartpole: PPO) -> None:
    from stable_baselines3.common.evaluation import evaluate_policy

    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    mean, _ = evaluate_policy(solved_cartpole, env, n_eval_episodes=3, warn=False)
    assert mean >= 450


def test_same_seed_same_returns() -> None:
    def run(seed: int) -> tuple[list[float], torch.Tensor]:
        model = PPO(cartpole(8), seed=seed, n_steps=64, n_epochs=2).learn(8 * 64 * 3)
        returns = [e["r"] for e in model.ep_info_buffer]
        return returns, torch.cat([p.detach().flatten() for p in model.policy.parameters()])

    first, second, other = run(3), run(3), run(4)
    assert first[0] == second[0] and torch.equal(first[1], second[1])
    assert first[0] != other[0]


def test_predict_keeps_the_form_of_its_input() -> None:
    model = PPO(cartpole(4), n_steps=8)
    batch = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    single, state = model.predict(batch[0])
    assert isinstance(single, np.ndarray) and single.shape == () and state is None
    many, _ = model.predict(batch)
    assert isinstance(many, np.ndarray) and many.shape == (5,) and many.dtype == np.int64
    as_tensor, _ = model.predict(torch.from_numpy(batch))
    assert isinstance(as_tensor, torch.Tensor) and torch.equal(as_tensor, torch.from_numpy(many))
    assert many[0] == single
    with pytest.raises(ValueError, match=r"expected \(4,\)"):
        model.predict(np.zeros((5, 3)))


def test_predict_clips_gaussian_actions_to_the_bounds() -> None:
    env = envs.make("Pendulum-v1", num_envs=4, device="cpu", seed=0)
    model = PPO(env, n_steps=8, log_std_init=3.0)
    obs = np.zeros((256, 3), dtype=np.float32)
    actions, _ = model.predict(obs, deterministic=False)
    assert actions.shape == (256, 1) and actions.dtype == np.float32
    assert actions.min() == -2.0 and actions.max() == 2.0
    steps = record_advances(env)
    model.learn(64)  # the rollout clips too, and learns from the unclipped samples
    assert model.num_timesteps == 64
    given_actions = torch.stack([actions for actions, _ in steps])
    assert given_actions.min() == -2.0 and given_actions.max() == 2.0
    assert model._rollout.actions.abs().max() > 2.0


def test_mujoco_control_cost_is_charged_on_clipped_actions() -> None:
    """Gymnasium's MuJoCo envs charge the control cost on the actions as given, so the
    rollout must clip the Gaussian samples to the Box (as SB3 does) before ``env.step``."""
    pytest.importorskip("mujoco.batch")
    from rewardlab.agents.ppo import MUJOCO_CONFIG

    env = envs.make("Hopper-v5", num_envs=4, device="cpu", seed=0, nthread=1)
    hyperparameters = {**MUJOCO_CONFIG.to_dict(), "n_steps": 16, "batch_size": 32}
    model = PPO(env, seed=0, **{**hyperparameters, "log_std_init": 2.0})
    steps = record_steps(env)
    model.learn(64)
    control_costs = torch.stack([info["reward_components"]["ctrl_cost"] for _, info in steps])
    # Hopper: 3 actuators in [-1, 1], ctrl_cost_weight 1e-3, so the cost is at most 3e-3.
    assert control_costs.min() >= -3e-3 - 1e-6
    assert model._rollout.actions.abs().max() > 1.0  # the samples themselves went beyond


def record_advances(env: Any) -> list[tuple[torch.Tensor, None]]:
    """Make ``env.advance_carried`` (the step of an env PPO's rollout steps by its carried
    form) record each call's actions; return the record."""
    steps: list[tuple[torch.Tensor, None]] = []
    advance = env.advance_carried

    def recording_advance(carry: Any, actions: torch.Tensor, fresh: torch.Tensor) -> tuple:
        steps.append((actions.clone(), None))
        return advance(carry, actions, fresh)

    env.advance_carried = recording_advance
    return steps


def record_steps(env: Any) -> list[tuple[torch.Tensor, dict]]:
    """Make ``env.step`` record each call's actions and returned info; return the record."""
    steps: list[tuple[torch.Tensor, dict]] = []
    step = env.step

    def recording_step(actions: torch.Tensor) -> tuple:
        result = step(actions)
        steps.append((actions.clone(), result[4]))
        return result

    env.step = recording_step
    return steps


def test_save_load_round_trip(tmp_path: Any) -> None:
    env = cartpole(8)
    model = PPO(env, n_steps=16, normalize_obs=True, normalize_reward=True, learning_rate=1e-3)
    model.learn(8 * 16 * 2)
    path = tmp_path / "ppo.pt"
    model.save(path)
    obs = torch.randn(32, 4)

    loaded = PPO.load(path)
    assert loaded.env is None and loaded.num_timesteps == model.num_timesteps
    assert loaded.config == model.config
    torch.testing.assert_close(loaded.obs_rms.mean, model.obs_rms.mean)
    assert torch.equal(loaded.predict(obs)[0], model.predict(obs)[0])
    for mine, theirs in zip(model.policy.parameters(), loaded.policy.parameters(), strict=True):
        assert torch.equal(mine, theirs)

    resumed = PPO.load(path, env=cartpole(8))
    resumed.learn(8 * 16, reset_num_timesteps=False)
    assert resumed.num_timesteps == model.num_timesteps + 8 * 16
    with pytest.raises(ValueError, match="not a file written by"):
        torch.save({"something": 1}, tmp_path / "other.pt")
        PPO.load(tmp_path / "other.pt")


def test_a_file_saved_before_adam_was_fused_loads_and_continues_the_same(tmp_path: Any) -> None:
    """Files written before PPO's Adam was ``fused=True`` hold optimiser groups without it:
    they load into the fused optimiser, with the Adam state that continues the same steps."""
    model = PPO(cartpole(8), n_steps=16, learning_rate=1e-3)
    model.learn(8 * 16)
    model.save(tmp_path / "new.pt")
    data = torch.load(tmp_path / "new.pt", weights_only=True)
    for group in data["optimizer"]["param_groups"]:
        group["fused"] = None  # as torch.optim.Adam(...) without fused= saved it
    torch.save(data, tmp_path / "old.pt")

    old, new = (PPO.load(tmp_path / name, env=cartpole(8)) for name in ("old.pt", "new.pt"))
    assert old.optimizer.param_groups[0]["fused"] is True
    for model in (old, new):
        model.learn(8 * 16, reset_num_timesteps=False)
    for a, b in zip(old._parameters, new._parameters, strict=True):
        assert torch.equal(a, b)
        saved = data["optimizer"]["state"][0]["step"]
        steps = float(old.optimizer.state[a]["step"]), float(new.optimizer.state[b]["step"])
        assert steps[0] == steps[1] > saved


# -------------------------------------------------------------------------- bad input


def test_refuses_an_env_that_is_not_batched() -> None:
    with pytest.raises(TypeError, match="rewardlab.envs.make"):
        PPO(gymnasium.make("CartPole-v1"))
    with pytest.raises(TypeError, match="has no device"):
        PPO(gymnasium.make_vec("CartPole-v1", num_envs=2))


@pytest.mark.parametrize(
    ("hyperparameters", "named"),
    [
        ({"n_steps": 0}, "n_steps=0"),
        ({"n_epochs": 2.5}, "n_epochs=2.5"),
        ({"batch_size": 1}, "batch_size=1"),
        ({"gamma": 1.5}, "gamma=1.5"),
        ({"gae_lambda": -0.1}, "gae_lambda=-0.1"),
        ({"learning_rate": 0.0}, "learning_rate=0.0"),
        ({"clip_range": -0.2}, "clip_range=-0.2"),
        ({"clip_range_vf": 0}, "clip_range_vf=0"),
        ({"target_kl": -1.0}, "target_kl=-1.0"),
        ({"ent_coef": -0.01}, "ent_coef=-0.01"),
        ({"max_grad_norm": 0}, "max_grad_norm=0"),
        ({"normalize_obs": "yes"}, "normalize_obs='yes'"),
        ({"activation": "gelu"}, "activation='gelu'"),
        ({"net_arch": [64, 0]}, r"net_arch=\[64, 0\]"),
        ({"net_arch": {"pi": [8]}}, "keys 'pi' and 'vf'"),
        ({"value_heads": []}, r"value_heads=\[\]"),
        ({"value_heads": ["extrinsic", "extrinsic"]}, "distinct"),
        ({"value_heads": {"extrinsic": {"gama": 0.9}}}, r"value_heads\['extrinsic'\]"),
        ({"value_heads": {"extrinsic": {"gamma": 2.0}}}, r"\['gamma'\] must be in \[0, 1\]"),
        ({"value_heads": {"extrinsic": {"episodic": 1}}}, r"\['episodic'\]"),
    ],
)
def test_bad_hyperparameters_are_named(hyperparameters: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        PPO(ChainEnv(2), **hyperparameters)


def test_bad_setup_errors() -> None:
    with pytest.raises(ValueError, match="batch_size=100 exceeds the rollout size"):
        PPO(ChainEnv(2), n_steps=8, batch_size=100)
    with pytest.raises(ValueError, match="device='meta'"):
        PPO(ChainEnv(2), device="meta")
    with pytest.raises(ValueError, match="no 'intrinsic' head"):
        PPO(ChainEnv(2), value_heads=["extrinsic"], intrinsic=ConstantBonus(4))
    with pytest.raises(TypeError, match="not a rewardlab.intrinsic.IntrinsicModule"):
        PPO(ChainEnv(2), intrinsic=object())
    model = PPO(ChainEnv(2), n_steps=4)
    with pytest.raises(ValueError, match="total_timesteps"):
        model.learn(0)
    with pytest.raises(TypeError, match="callback must be a function"):
        model.learn(8, callback="stop")


@pytest.mark.parametrize("threads", [1, None])
def test_learn_runs_at_the_models_threads_and_gives_the_users_back(threads: int | None) -> None:
    seen: list[int] = []
    user_threads = torch.get_num_threads()
    torch.set_num_threads(2)  # a user of the Python API at torch's default on two cores
    try:
        model = PPO(ChainEnv(2), n_steps=4, threads=threads)
        model.learn(16, callback=lambda _: seen.append(torch.get_num_threads()))
        assert torch.get_num_threads() == 2
        assert set(seen) == {1 if threads == 1 else 2}
        with pytest.raises(TypeError, match="callback must be a function"):
            model.learn(8, callback="stop")
        assert torch.get_num_threads() == 2  # also when learn raises
    finally:
        torch.set_num_threads(user_threads)
    with pytest.raises(ValueError, match=r"threads=0 is not a thread count"):
        PPO(ChainEnv(2), threads=0)


def test_value_head_for_a_component_the_env_does_not_report() -> None:
    model = PPO(ChainEnv(2), n_steps=4, value_heads=["extrinsic", "shaping"])
    with pytest.raises(
        ValueError, match=r"value_heads names \['shaping'\].*reports \['extrinsic', 'bonus'\]"
    ):
        model.learn(8)


def test_heads_that_miss_part_of_the_reward_warn() -> None:
    with pytest.warns(UserWarning, match=r"components \['bonus'\]"):
        PPO(ChainEnv(2), n_steps=4, value_heads=["extrinsic"]).learn(8)


def test_intrinsic_module_returning_the_wrong_shape() -> None:
    class Bad(ConstantBonus):
        def compute(
            self, obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor,
            dones: torch.Tensor | None = None,
        ) -> torch.Tensor:
            return torch.zeros(obs.shape[0], 1)

    with pytest.raises(
        ValueError, match=r"'dummy'.compute returned \(8, 1\); expected a tensor of shape \(8,\)"
    ):
        PPO(ChainEnv(2), n_steps=4, intrinsic=Bad(4)).learn(8)


# ---------------------------------------------------------------------------- helpers


def test_running_mean_std_matches_numpy() -> None:
    rms = RunningMeanStd(shape=(3,), epsilon=1e-8)
    batches = [torch.randn(n, 3) * 2 + 1 for n in (5, 17, 64)]
    for batch in batches:
        rms.update(batch)
    everything = torch.cat(batches).double()
    torch.testing.assert_close(rms.mean, everything.mean(0))
    torch.testing.assert_close(rms.var, everything.var(0, unbiased=False))
    x = torch.randn(4, 3)
    expected = (
        (x - everything.mean(0)) / torch.sqrt(everything.var(0, unbiased=False) + 1e-8)
    ).float()
    torch.testing.assert_close(rms.normalize(x), expected)
    restored = RunningMeanStd(shape=(3,), epsilon=1e-8)
    restored.load_state_dict(rms.state_dict())
    torch.testing.assert_close(restored.normalize(x), expected)
    assert math.isclose(float(restored.count), float(rms.count))


def test_policy_sampling_and_log_probabilities_match_torch_distributions() -> None:
    from rewardlab.agents.ppo import ActorCritic

    box = gymnasium.spaces.Box(-1, 1, (3,))
    obs = torch.randn(20_000, 3)
    generator = torch.Generator().manual_seed(0)

    discrete = ActorCritic(box, gymnasium.spaces.Discrete(3), [8], [8], 1, "tanh", 0.0)
    torch.nn.init.normal_(discrete.actor[0][-1].weight)  # make the policy far from uniform
    with torch.no_grad():
        logits = discrete.actor(obs)
        actions = discrete.act(obs, generator)
        log_prob, entropy = discrete.log_prob_and_entropy(obs, actions)
    reference = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(log_prob, reference.log_prob(actions))
    torch.testing.assert_close(entropy, reference.entropy())
    # Sampled frequencies match the mean probabilities.
    frequencies = torch.bincount(actions, minlength=3) / len(actions)
    torch.testing.assert_close(frequencies, reference.probs.mean(0), atol=0.01, rtol=0)

    gaussian = ActorCritic(box, gymnasium.spaces.Box(-2, 2, (2,)), [8], [8], 1, "tanh", -0.5)
    with torch.no_grad():
        mean = gaussian.actor(obs)
        actions = gaussian.act(obs, generator)
        log_prob, entropy = gaussian.log_prob_and_entropy(obs, actions)
    reference = torch.distributions.Normal(mean, torch.full_like(mean, -0.5).exp())
    torch.testing.assert_close(log_prob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))
    torch.testing.assert_close(
        (actions - mean).std(0), torch.full((2,), math.exp(-0.5)), atol=0.01, rtol=0
    )


def test_an_image_shape_reads_minigrids_view_through_a_cnn_and_saves_it(tmp_path) -> None:
    from rewardlab.agents.networks import ImageEncoder

    pytest.importorskip("minigrid")
    env = envs.make("MiniGrid-Empty-5x5-v0", num_envs=8, seed=0)
    model = PPO(env, seed=0, n_steps=16, image_shape=(7, 7, 3))
    assert isinstance(model.policy.actor[0], ImageEncoder) and isinstance(model.policy.critic[0], ImageEncoder)
    assert model.policy.actor[0] is not model.policy.critic[0]  # each its own, as the MLPs are
    obs, _ = env.reset(seed=0)
    # the flat view is MiniGrid's image, (height, width, channels) in that order: the
    # convolutions see its 3 channels (object, colour, state) at each of the 7 x 7 cells
    encoder = model.policy.actor[0]
    channels_first = obs[:1].reshape(1, 7, 7, 3).permute(0, 3, 1, 2)
    assert torch.equal(encoder(obs[:1]), encoder.layers(channels_first))
    model.learn(256)
    model.save(tmp_path / "cnn")
    loaded = PPO.load(tmp_path / "cnn", env=env)
    assert loaded.config.image_shape == [7, 7, 3]
    assert torch.equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


@pytest.mark.parametrize(("shape", "message"), [
    ((7, 7, 2), "image_shape=[7, 7, 2] holds 98 values, the observations 147"),
    ((3, 3, 3), "height and width at least 7"),
])
def test_a_wrong_image_shape_is_one_line(shape, message) -> None:
    pytest.importorskip("minigrid")
    env = envs.make("MiniGrid-Empty-5x5-v0", num_envs=2, seed=0)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        PPO(env, image_shape=shape)
