"""rewardlab.agents.LLMPolicy and the text codecs, against a local OpenAI-compatible server with scripted answers."""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np
import pytest
import torch
from llm_servers import ScriptedChatServer, current_observation, user_text

from rewardlab import envs
from rewardlab.agents import LLMPolicy
from rewardlab.agents.llm_policy import codec_for
from rewardlab.llm_reward.clients import LLMCallFailed
from rewardlab.shaping import BatchedPotentialShaping, potentials

# --- codecs -----------------------------------------------------------------------------------


def test_named_actions_parse_valid_and_invalid_answers():
    codec = codec_for("CartPole-v1")
    assert codec.action_names == ("push_left", "push_right")
    assert codec.parse_action("push_right") == 1
    assert codec.parse_action("  Push Left. ") == 0
    assert codec.parse_action("Action: push_right") == 1
    assert codec.parse_action("push_left or push_right") is None
    assert codec.parse_action("jump") is None
    assert codec.default_action == 0
    assert codec_for("MountainCar-v0").default_action == 1  # coast


def test_continuous_actions_parse_numbers_and_clip():
    codec = codec_for("Pendulum-v1")
    assert codec.action_names is None
    np.testing.assert_allclose(codec.parse_action("torque: 1.25"), [1.25])
    np.testing.assert_allclose(codec.parse_action("Between -2 and 2 I pick 7"), [2.0])
    np.testing.assert_allclose(codec.parse_action("[-3e1]"), [-2.0])
    assert codec.parse_action("swing harder") is None
    np.testing.assert_allclose(codec.default_action, [0.0])


def test_classic_codec_uses_the_reward_search_description():
    codec = codec_for("CartPole-v1")
    assert "pole angle from upright" in codec.system_text()
    text = codec.observation_text(np.array([0.5, -0.1, 0.02, 0.3], dtype=np.float32))
    assert text.startswith("x = 0.5 m, x_dot = -0.1 m/s, theta = 0.02 rad")
    # Derived variables of the description are shown too.
    acrobot = codec_for("Acrobot-v1").observation_text(np.array([1, 0, 1, 0, 0, 0], dtype=np.float32))
    assert "tip_height = -2" in acrobot


def test_grid_codecs_describe_positions_in_words():
    fruit_env = envs.make("FruitCollection-v0", num_envs=1, seed=0)
    obs, _ = fruit_env.reset()
    text = codec_for("FruitCollection-v0").observation_text(obs[0].numpy())
    row, column = divmod(int(obs[0, :100].argmax()), 10)
    assert text.startswith(f"you are at row {row}, column {column}")
    assert text.count("row ") == 1 + 5  # the agent and the five fruits
    sea = codec_for("DeepSea-v0", size=5, randomize_actions=False)
    assert sea.action_names == ("left", "right")
    assert sea.observation_text(np.eye(25)[7]) == "row 1 of 4, column 2 of 4"


def test_minigrid_codec_names_objects_with_minigrid_names():
    pytest.importorskip("minigrid")
    from rewardlab.envs.minigrid import make_minigrid

    env = make_minigrid("MiniGrid-DoorKey-5x5-v0", seed=0)
    obs, _ = env.reset(seed=0)
    codec = codec_for("MiniGrid-DoorKey-5x5-v0")
    assert "Mission: use the key to open the door" in codec.system_text()
    assert codec.parse_action("go forward") == 2
    text = codec.observation_text(obs)
    assert "a wall 1 step forward" in text and "key" in text


# --- the policy -------------------------------------------------------------------------------


def test_valid_and_invalid_answers_with_the_fallback_counted():
    def answer(messages: list) -> str:
        return "push_right" if "x = 1 m" in current_observation(messages) else "I would rather not"

    with ScriptedChatServer(answer) as server:
        policy = LLMPolicy(server.client(), codec_for("CartPole-v1"), max_concurrency=2)
        obs = np.array([[1, 0, 0, 0], [-1, 0, 0, 0], [1, 0, 0, 0]], dtype=np.float32)
        actions, state = policy.predict(obs)
        assert state is None
        np.testing.assert_array_equal(actions, [1, 0, 1])
        assert actions.dtype == np.int64
        stats = policy.stats()
        assert stats["requests"] == 3 and stats["invalid_answers"] == 1
        assert stats["invalid_rate"] == pytest.approx(1 / 3)
        assert stats["tokens"] > 0 and stats["cost_usd"] == 0.0  # a local provider is free
        # A single observation, as a tensor: a 0-d tensor back.
        action, _ = policy.predict(torch.tensor([1.0, 0, 0, 0]))
        assert isinstance(action, torch.Tensor) and action.shape == () and int(action) == 1
        policy.close()


def test_the_llm_policy_predicts_in_the_learners_forms():
    # one predict contract (agents.base.predict_in_form): the LLM policy answers in the forms PPO does
    from rewardlab.agents import PPO

    env = envs.make("CartPole-v1", num_envs=2, seed=0)
    learner = PPO(env, seed=0, n_steps=8)
    with ScriptedChatServer(lambda messages: "push_right") as server:
        policy = LLMPolicy(server.client(), codec_for("CartPole-v1"))
        for observation in (np.zeros(4, dtype=np.float32), np.zeros((3, 4), dtype=np.float32), torch.zeros(4),
                            torch.zeros((3, 4))):
            ours, theirs = policy.predict(observation)[0], learner.predict(observation)[0]
            assert type(ours) is type(theirs) and ours.shape == theirs.shape
        for model in (policy, learner):
            with pytest.raises(ValueError, match=r"observation has shape \(2, 5\); expected \(4,\)"):
                model.predict(np.zeros((2, 5)))
        policy.close()
    env.close()


def test_continuous_answers_are_clipped_and_the_default_is_configurable():
    answers = iter(["5", "no idea"])
    with ScriptedChatServer(lambda messages: next(answers)) as server:
        policy = LLMPolicy(server.client(), codec_for("Pendulum-v1"), max_concurrency=1,
                           default_action=np.array([-0.5], dtype=np.float32))  # fmt: skip
        first, _ = policy.predict(np.zeros((1, 3), dtype=np.float32))
        second, _ = policy.predict(np.zeros((1, 3), dtype=np.float32))
        np.testing.assert_allclose(first, [[2.0]])
        np.testing.assert_allclose(second, [[-0.5]])
        assert policy.invalid_answers == 1
        policy.close()


def test_shaping_components_reach_the_prompt_and_the_history_is_bounded():
    with ScriptedChatServer(lambda messages: "push_left") as server:
        env = BatchedPotentialShaping(
            envs.make("CartPole-v1", num_envs=2, seed=0), potentials.for_env("CartPole-v1"), gamma=0.99
        )
        policy = LLMPolicy(server.client(), codec_for("CartPole-v1"), history=3)
        obs, _ = env.reset()
        for _ in range(5):
            actions, _ = policy.predict(obs)
            obs, reward, terminated, truncated, info = env.step(actions)
            policy.record_step(info["reward_components"], terminated | truncated)
        last = user_text(server.requests[-1])
        past = [line for line in last.splitlines() if line.startswith("t-")]
        assert len(past) == 3  # five steps taken, three shown
        assert all("action: push_left" in line for line in past)
        assert all(re.search(r"extrinsic \+1\b.*shaping [-+]\d", line) for line in past)
        assert "Current observation: x = " in last
        # An episode's end clears the history of that env only.
        policy.record_step({"extrinsic": np.ones(2)}, np.array([True, False]))
        policy.predict(obs)
        first_env, second_env = (user_text(m) for m in server.requests[-2:])
        texts = sorted([first_env, second_env], key=lambda text: text.count("t-"))
        assert texts[0].count("t-") == 0 and texts[1].count("t-") == 3
        policy.close()


def test_concurrency_limit_is_respected():
    with ScriptedChatServer(lambda messages: "push_left", delay_s=lambda messages: 0.15) as server:
        policy = LLMPolicy(server.client(), codec_for("CartPole-v1"), max_concurrency=3)
        started = time.monotonic()
        policy.predict(np.zeros((9, 4), dtype=np.float32))
        elapsed = time.monotonic() - started
        assert server.max_in_flight == 3
        assert elapsed >= 3 * 0.15  # nine requests, three at a time
        policy.close()


def test_failed_and_timed_out_requests_fall_back_and_are_counted():
    def delay(messages: list) -> float:
        return 1.0 if "x = 1 m" in current_observation(messages) else 0.0

    with ScriptedChatServer(lambda messages: "push_right", delay_s=delay) as server:
        # The client's own timeout: the request fails (LLMCallFailed) and falls back.
        policy = LLMPolicy(server.client(timeout_s=0.3), codec_for("CartPole-v1"), default_action=0)
        obs = np.array([[1, 0, 0, 0], [0, 0, 0, 0]], dtype=np.float32)
        actions, _ = policy.predict(obs)
        np.testing.assert_array_equal(actions, [0, 1])
        assert policy.failures == 1 and "timed out" in policy.last_error
        policy.close()
        # The policy's step deadline: a slow answer is not waited for.
        policy = LLMPolicy(server.client(), codec_for("CartPole-v1"), step_timeout_s=0.3)
        started = time.monotonic()
        actions, _ = policy.predict(obs)
        assert time.monotonic() - started < 0.9
        np.testing.assert_array_equal(actions, [0, 1])
        assert policy.timeouts == 1 and policy.stats()["fallback_rate"] == 0.5
        policy.close()


def test_fatal_errors_are_raised_not_counted():
    class Unreachable:
        def complete(self, messages: list) -> Any:
            raise LLMCallFailed("nothing listens")

    policy = LLMPolicy(Unreachable(), codec_for("CartPole-v1"), fatal_errors=(LLMCallFailed,))
    with pytest.raises(LLMCallFailed, match="nothing listens"):
        policy.predict(np.zeros(4, dtype=np.float32))
    policy.close()


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="max_concurrency=0"):
        LLMPolicy(object.__new__(type("C", (), {"complete": lambda self, m: None})),
                  codec_for("CartPole-v1"), max_concurrency=0)  # fmt: skip
    with pytest.raises(ValueError, match="no complete"):
        LLMPolicy(object(), codec_for("CartPole-v1"))
    policy = LLMPolicy(type("C", (), {"complete": lambda self, m: None})(), codec_for("CartPole-v1"))
    with pytest.raises(ValueError, match=r"expected \(4,\)"):
        policy.predict(np.zeros((2, 3)))
    policy.close()


# --- LLMRankedPotential -----------------------------------------------------------------------

GOAL = np.array([0.5, 0.5])


def describe_point(state: np.ndarray) -> str:
    return f"x = {state[0]:.3f}, y = {state[1]:.3f}"


def distance_in(text: str) -> float:
    x, y = (float(v) for v in re.findall(r"= (-?\d+\.\d+)", text))
    return float(np.hypot(x - GOAL[0], y - GOAL[1]))


def concordance(phi: np.ndarray, distance: np.ndarray) -> float:
    """The fraction of pairs that phi orders as the distance to the goal does (closer = higher)."""
    upper = np.triu_indices(len(phi), 1)
    agree = np.sign(phi[:, None] - phi[None, :]) == np.sign(distance[None, :] - distance[:, None])
    return float(agree[upper].mean())


def test_ranked_potential_recovers_a_scripted_judges_ordering():
    rng = np.random.default_rng(0)
    states = rng.uniform(-1, 1, (200, 2)).astype(np.float32)

    def judge(a: str, b: str) -> float:
        return 1.0 if distance_in(a) < distance_in(b) else 0.0

    phi = potentials.LLMRankedPotential(judge, describe_point, weight=2.0).fit(states, num_pairs=400)
    assert phi.judgements == 400 and phi.unanswered == 0
    test = rng.uniform(-1, 1, (100, 2)).astype(np.float32)
    values = phi(test)
    assert values.shape == (100,) and values.dtype == np.float64
    assert concordance(values, np.hypot(*(test - GOAL).T)) > 0.9
    fitted = phi(states)
    assert fitted.max() == pytest.approx(0.0, abs=1e-5) and fitted.min() == pytest.approx(-2.0, abs=1e-5)
    as_tensor = phi(torch.as_tensor(test))
    assert isinstance(as_tensor, torch.Tensor) and as_tensor.shape == (100,)
    np.testing.assert_allclose(as_tensor.numpy(), values, rtol=1e-5, atol=1e-6)


def test_ranked_potential_asks_a_chat_client():
    def answer(messages: list) -> str:
        prompt = user_text(messages)
        a, b = (re.search(rf"State {s}: (.*)", prompt).group(1) for s in "AB")
        if distance_in(a) == distance_in(b):
            return "They look the same."  # no judgement
        return "A" if distance_in(a) < distance_in(b) else "B is closer"

    states = np.random.default_rng(1).uniform(-1, 1, (60, 2)).astype(np.float32)
    with ScriptedChatServer(answer) as server:
        phi = potentials.LLMRankedPotential(server.client(), describe_point, task="Reach (0.5, 0.5).")
        phi.fit(states, num_pairs=80)
    assert len(server.requests) == 80 and "Reach (0.5, 0.5)." in user_text(server.requests[0])
    assert phi.judgements == 80
    assert concordance(phi(states), np.hypot(*(states - GOAL).T)) > 0.8
    with pytest.raises(ValueError, match="not been fitted"):
        potentials.LLMRankedPotential(lambda a, b: None, describe_point)(states)
