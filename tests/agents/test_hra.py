"""rewardlab.agents.HRA: per-head values against dynamic programming (max and mean bootstrap, with
truncation), the greedy action on the sum, component selection and its errors, head weights,
feature masks, logging, save/load, predict and rewardlab train --algo hra."""

from __future__ import annotations

import json
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from rewardlab import envs
from rewardlab.agents import HRA
from rewardlab.agents.hra import MultiHeadQNetwork, select_components


class CorridorEnv:
    """Batched toy task following docs/batched_envs.md: cells 0..4, start in 1, 2 or 3.

    Action 0 moves left, 1 right. Entering cell 0 pays ``left`` = 1, entering cell 4 pays
    ``right`` = 2, both ending the episode (terminated); every step costs ``step`` = -0.5.
    Episodes are truncated after ``max_steps`` steps. Components: ``left``, ``right``,
    ``step`` and ``extrinsic`` (their sum, the reward); with ``broken=True`` the ``right``
    component reports 1 where the reward has 2. Observations: the one-hot cell.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    spec_id = "Corridor-v0"
    rewards = {"left": 1.0, "right": 2.0, "step": -0.5}

    def __init__(self, num_envs: int, max_steps: int = 3, broken: bool = False) -> None:
        self.num_envs, self.max_steps, self.broken = num_envs, max_steps, broken
        self.device = torch.device("cpu")
        self.single_observation_space = gymnasium.spaces.Box(0.0, 1.0, (5,), np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.generator = torch.Generator()
        self.cell = torch.ones(num_envs, dtype=torch.int64)
        self.elapsed = torch.zeros(num_envs, dtype=torch.int64)

    def _starts(self) -> torch.Tensor:
        return torch.randint(1, 4, (self.num_envs,), generator=self.generator)

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[torch.Tensor, dict]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self.cell, self.elapsed = self._starts(), torch.zeros_like(self.elapsed)
        return torch.nn.functional.one_hot(self.cell, 5).float(), {}

    def step(self, actions: torch.Tensor) -> tuple:
        self.cell = self.cell + 2 * torch.as_tensor(actions) - 1
        self.elapsed += 1
        left, right = (self.cell == 0).float(), (self.cell == 4).float()
        components = {
            "left": self.rewards["left"] * left,
            "right": (1.0 if self.broken else self.rewards["right"]) * right,
            "step": torch.full((self.num_envs,), self.rewards["step"]),
        }
        reward = self.rewards["left"] * left + self.rewards["right"] * right + self.rewards["step"]
        components["extrinsic"] = reward
        terminated = (self.cell == 0) | (self.cell == 4)
        truncated = (self.elapsed >= self.max_steps) & ~terminated
        final_obs = torch.nn.functional.one_hot(self.cell, 5).float()
        done = terminated | truncated
        self.cell = torch.where(done, self._starts(), self.cell)
        self.elapsed = torch.where(done, 0, self.elapsed)
        obs = torch.nn.functional.one_hot(self.cell, 5).float()
        info = {"final_obs": final_obs, "reward_components": components}
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        pass


def corridor_q_values(gamma: float, bootstrap: str) -> dict[str, np.ndarray]:
    """Q values ``(cells 1..3, actions)`` of each component by dynamic programming, without a
    time limit: of the uniformly random policy (``"mean"``) or of each component's own
    optimal policy (``"max"``)."""
    values = {}
    for name, size in CorridorEnv.rewards.items():
        q = np.zeros((5, 2))
        for _ in range(500):
            future = q.mean(axis=1) if bootstrap == "mean" else q.max(axis=1)
            new = np.zeros((5, 2))
            for cell in (1, 2, 3):
                for action, nxt in ((0, cell - 1), (1, cell + 1)):
                    reward = size if name == "step" or nxt == {"left": 0, "right": 4}[name] else 0.0
                    new[cell, action] = reward + (0.0 if nxt in (0, 4) else gamma * future[nxt])
            q = new
        values[name] = q[1:4]
    return values


def optimal_q_values(gamma: float) -> np.ndarray:
    """The optimal Q values ``(cells 1..3, actions)`` of the summed reward, by value iteration."""
    q = np.zeros((5, 2))
    step = CorridorEnv.rewards["step"]
    for _ in range(500):
        new = np.zeros((5, 2))
        for cell in (1, 2, 3):
            new[cell, 0] = step + (
                CorridorEnv.rewards["left"] if cell == 1 else gamma * q[cell - 1].max()
            )
            new[cell, 1] = step + (
                CorridorEnv.rewards["right"] if cell == 3 else gamma * q[cell + 1].max()
            )
        q = new
    return q[1:4]


GAMMA = 0.6
# Linear heads on one-hot cells (a table), uniformly random behaviour throughout.
TABULAR = dict(
    net_arch=[], gamma=GAMMA, learning_rate=0.03, batch_size=64, buffer_size=4096,
    learning_starts=64, target_update_interval=64, exploration_initial_eps=1.0,
    exploration_final_eps=1.0, log_interval=1024,
)  # fmt: skip
CELLS = torch.eye(5)[1:4]


# small networks run fastest on one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module", params=["mean", "max"])
def trained(request: pytest.FixtureRequest) -> HRA:
    model = HRA(CorridorEnv(16), bootstrap=request.param, seed=0, **TABULAR)
    return model.learn(8_000)


# ------------------------------------------------------------- learning the right values


def test_default_heads_are_the_components_that_decompose_the_reward(trained: HRA) -> None:
    assert trained.heads == ["left", "right", "step"]


def test_heads_converge_to_the_dynamic_programming_values(trained: HRA) -> None:
    # Episodes are truncated after 3 steps; bootstrapping from final_obs makes the values
    # those of the task without a time limit.
    expected = corridor_q_values(GAMMA, trained.config.bootstrap)
    q = trained.q_values(CELLS)
    for i, name in enumerate(trained.heads):
        np.testing.assert_allclose(q[:, i].numpy(), expected[name], atol=0.03, err_msg=name)


def test_greedy_action_on_the_sum_is_optimal(trained: HRA) -> None:
    # With max bootstrapping each head assumes it alone picks the actions, so the greedy
    # action on the sum need not be optimal; the corridor is set up so that here it is.
    best = optimal_q_values(GAMMA).argmax(axis=1)
    assert best.tolist() == [0, 1, 1]  # the task needs both ends
    summed = sum(corridor_q_values(GAMMA, trained.config.bootstrap).values())
    assert summed.argmax(axis=1).tolist() == best.tolist()
    actions, _ = trained.predict(CELLS)
    assert actions.tolist() == best.tolist()


def test_a_single_extrinsic_head_is_dqn_and_learns_the_optimal_values() -> None:
    model = HRA(CorridorEnv(16), components=["extrinsic"], bootstrap="max", seed=0, **TABULAR)
    model.learn(8_000)
    optimal = optimal_q_values(GAMMA)
    np.testing.assert_allclose(model.q_values(CELLS)[:, 0].numpy(), optimal, atol=0.03)
    assert model.predict(CELLS)[0].tolist() == optimal.argmax(axis=1).tolist()


# ------------------------------------------------------------------- the components


def test_component_selection_rules() -> None:
    n = 3
    parts = {"a": torch.tensor([1.0, 0.0, 2.0]), "b": torch.tensor([0.5, 1.0, 0.0])}
    reward = parts["a"] + parts["b"]
    decomposed = {"extrinsic": reward, **parts}
    assert select_components(decomposed, reward) == ["a", "b"]
    assert select_components({"extrinsic": reward}, reward) == ["extrinsic"]
    # A shaping wrapper adds a component on top of "extrinsic": both are needed.
    shaped = {"extrinsic": reward, "shaping": torch.full((n,), 0.3)}
    assert select_components(shaped, reward + 0.3) == ["extrinsic", "shaping"]
    assert select_components(decomposed, reward, ["b", "a"]) == ["b", "a"]
    with pytest.raises(ValueError, match=r"\['a'\] do not add up to the reward.*up to 1"):
        select_components(decomposed, reward, ["a"])
    with pytest.raises(ValueError, match=r"components \['c'\] are not reported"):
        select_components(decomposed, reward, ["c"])


def test_components_that_do_not_add_up_fail_at_construction() -> None:
    with pytest.raises(ValueError, match=r"\['left', 'right'\] do not add up.*by up to 0.5"):
        HRA(CorridorEnv(4), components=["left", "right"])  # without the step cost


def test_a_gap_that_appears_later_fails_at_the_next_log_point() -> None:
    # The first step of action 0 everywhere never reaches the right end, so the gap
    # (1 instead of 2) only shows once the agent does.
    env = CorridorEnv(4, broken=True)
    model = HRA(env, components=["left", "right", "step"], seed=0, log_interval=64)
    with pytest.raises(ValueError, match=r"differ from it by up to 1\b"):
        model.learn(2_000)


def test_learn_runs_at_the_models_threads_and_gives_the_users_back() -> None:
    seen: list[int] = []
    user_threads = torch.get_num_threads()
    torch.set_num_threads(2)  # a user of the Python API at torch's default on two cores
    try:
        model = HRA(CorridorEnv(4), seed=0, log_interval=64)
        model.learn(256, callback=lambda _: seen.append(torch.get_num_threads()))
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
        model.threads = None
        model.learn(256, callback=lambda _: seen.append(torch.get_num_threads()))
        assert seen[-1] == 2
    finally:
        torch.set_num_threads(user_threads)
    with pytest.raises(ValueError, match=r"threads=-1 is not a thread count"):
        HRA(CorridorEnv(4), threads=-1)


def test_a_component_function_supplies_the_heads() -> None:
    def two_parts(obs, actions, next_obs, reward, info):
        goal = info["reward_components"]["left"] + info["reward_components"]["right"]
        return {"goal": goal, "cost": reward - goal}

    model = HRA(
        CorridorEnv(8), reward_components=two_parts, seed=0, learning_starts=64, log_interval=64
    )
    assert model.heads == ["goal", "cost"]
    logged = []
    model.learn(512, callback=lambda local: logged.append(local["logged"]))
    assert {"reward/goal", "reward/cost", "reward/left", "train/q_goal"} <= set(logged[-1])
    with pytest.raises(ValueError, match=r"tensors of shape \(8,\)"):
        HRA(CorridorEnv(8), reward_components=lambda *a: {"x": torch.zeros(3)})


# --------------------------------------------------------- weights, masks and the network


def test_head_weights_change_the_greedy_action(trained: HRA) -> None:
    before = trained.head_weights
    try:
        trained.set_head_weights({"right": 0.0, "step": 0.0})  # only the left end counts
        assert trained.predict(CELLS)[0].tolist() == [0, 0, 0]
        trained.set_head_weights([0.0, 1.0, 0.0])  # only the right end counts
        assert trained.predict(CELLS)[0].tolist() == [1, 1, 1]
        with pytest.raises(ValueError, match="are not heads"):
            trained.set_head_weights({"up": 1.0})
        with pytest.raises(ValueError, match="got 2 weights for 3 heads"):
            trained.set_head_weights([1.0, 1.0])
    finally:
        trained.set_head_weights(before)


def test_feature_masks_hide_features_from_a_head() -> None:
    torch.manual_seed(0)
    masks = torch.tensor([[True, False, True], [True, True, True]])
    network = MultiHeadQNetwork(3, 2, 2, [8], input_masks=masks)
    obs = torch.randn(5, 3)
    moved = obs.clone()
    moved[:, 1] += 10.0  # a feature head 0 does not see
    q, q_moved = network(obs), network(moved)
    torch.testing.assert_close(q[:, 0], q_moved[:, 0])
    assert not torch.allclose(q[:, 1], q_moved[:, 1])


def test_separate_heads_split_the_hidden_units_to_match_a_single_head() -> None:
    def count(module: torch.nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    dqn = MultiHeadQNetwork(110, 4, 1, [250])
    hra = MultiHeadQNetwork(110, 4, 10, [250])
    assert hra.weights[0].shape == (10, 110, 25)
    assert abs(count(hra) - count(dqn)) / count(dqn) < 0.01
    shared = MultiHeadQNetwork(110, 4, 10, [250], shared_torso=True)
    assert shared(torch.zeros(7, 110)).shape == (7, 10, 4)


def test_fruit_collection_heads_and_masks() -> None:
    env = envs.make("FruitCollection-v0", num_envs=4, seed=0)
    model = HRA(env, feature_masks=env.feature_masks(), net_arch=[50], seed=0)
    assert model.heads == [f"fruit_{k}" for k in range(10)]
    assert model.q_network.input_masks[:, :, 0].sum(dim=1).tolist() == [101.0] * 10
    assert HRA(env, components=["extrinsic"]).heads == ["extrinsic"]
    with pytest.raises(ValueError, match="feature_masks need separate heads"):
        HRA(env, feature_masks=env.feature_masks(), shared_torso=True)
    with pytest.raises(ValueError, match="bool mask of shape"):
        HRA(env, feature_masks={"fruit_0": torch.ones(3, dtype=torch.bool)})


# ------------------------------------------------------------- logging, save, predict


def test_tensorboard_keys_and_the_true_extrinsic_return(tmp_path: Any) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = HRA(CorridorEnv(8), seed=0, tensorboard_log=tmp_path, log_interval=256)
    episodes = []
    model.learn(1_024, callback=lambda local: episodes.extend(local["self"].ep_info_buffer))
    tags = set(EventAccumulator(str(tmp_path / "HRA_1")).Reload().Tags()["scalars"])
    for key in ("rollout/ep_rew_mean", "rollout/ep_len_mean", "rollout/exploration_rate",
                "train/loss", "time/fps"):  # fmt: skip
        assert key in tags
    for name in ("left", "right", "step", "extrinsic"):
        assert f"reward/{name}" in tags and f"episode/{name}" in tags
    for head in model.heads:
        assert f"train/q_{head}" in tags and f"train/loss_{head}" in tags
    # Episode returns are the extrinsic reward: -0.5 per step plus what the end paid.
    for episode in episodes:
        ends = episode["r"] + 0.5 * episode["l"]
        assert min(abs(ends - v) for v in (0.0, 1.0, 2.0)) < 1e-5


def test_callback_returning_false_stops_training() -> None:
    model = HRA(CorridorEnv(8), seed=0, log_interval=64)
    model.learn(10_000, callback=lambda local: False)
    assert model.num_timesteps == 64


def test_same_seed_same_values() -> None:
    def run() -> torch.Tensor:
        model = HRA(CorridorEnv(8), seed=3, learning_starts=32, net_arch=[16])
        return model.learn(512).q_values(CELLS)

    torch.testing.assert_close(run(), run())


def test_predict_keeps_the_form_of_its_input(trained: HRA) -> None:
    single, state = trained.predict(np.eye(5, dtype=np.float32)[1])
    assert isinstance(single, np.ndarray) and single.shape == () and state is None
    batch, _ = trained.predict(np.eye(5, dtype=np.float32)[1:4])
    assert isinstance(batch, np.ndarray) and batch.shape == (3,)
    tensor, _ = trained.predict(CELLS)
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.int64
    assert trained.predict(CELLS[0])[0].shape == ()
    with pytest.raises(ValueError, match=r"expected \(5,\)"):
        trained.predict(np.zeros((2, 4), dtype=np.float32))


def test_save_load_round_trip(tmp_path: Any) -> None:
    env = envs.make("FruitCollection-v0", num_envs=4, seed=0)
    model = HRA(env, feature_masks=env.feature_masks(), net_arch=[20], learning_starts=0, seed=1)
    model.learn(200)
    model.set_head_weights({"fruit_3": 2.0})
    model.save(tmp_path / "hra.pt")
    loaded = HRA.load(tmp_path / "hra.pt")
    obs = env.reset(seed=5)[0]
    torch.testing.assert_close(loaded.q_values(obs), model.q_values(obs))
    assert loaded.head_weights == model.head_weights
    assert loaded.heads == model.heads and loaded.num_timesteps == model.num_timesteps
    assert torch.equal(loaded.predict(obs)[0], model.predict(obs)[0])
    loaded.set_env(env)
    loaded.learn(100, reset_num_timesteps=False)
    assert loaded.num_timesteps == 300
    with pytest.raises(ValueError, match="not a file written by rewardlab's HRA.save"):
        torch.save({"format": "other"}, tmp_path / "other.pt")
        HRA.load(tmp_path / "other.pt")


def test_bad_setup_errors() -> None:
    with pytest.raises(TypeError, match="HRA needs a batched torch env"):
        HRA(gymnasium.make("CartPole-v1"))
    with pytest.raises(ValueError, match="bootstrap must be one of"):
        HRA(CorridorEnv(2), bootstrap="min")
    with pytest.raises(ValueError, match="HRA needs Discrete actions"):
        HRA(envs.make("Pendulum-v1", num_envs=2, seed=0))
    with pytest.raises(ValueError, match="buffer_size=1 is smaller"):
        HRA(CorridorEnv(2), buffer_size=1)


def test_rewardlab_train_algo_hra(tmp_path: Any) -> None:
    from rewardlab.app.cli import main

    code = main([
        "train", "--env", "FruitCollection-v0", "--algo", "hra", "--steps", "600",
        "--num-envs", "4", "--logdir", str(tmp_path), "--no-progress",
    ])  # fmt: skip
    assert code == 0
    metrics = json.loads((tmp_path / "seed_0" / "metrics.json").read_text())
    assert metrics["algo"] == "hra" and metrics["num_timesteps"] == 600
    assert (tmp_path / "seed_0" / "model.pt").exists()
    assert HRA.load(tmp_path / "seed_0" / "model.pt").heads[0] == "fruit_0"
