"""The final evaluation's success rule: MiniGrid's episodes succeed by a positive return."""

from __future__ import annotations

import pytest
import torch

from rewardlab import envs
from rewardlab.agents.evaluation import evaluate_batched, positive_return, success_rule_of

# MiniGrid-Empty-5x5: the agent starts at (1, 1) facing right and the goal is at (3, 3):
# forward, forward, turn right, forward, forward
TO_THE_GOAL = (2, 2, 1, 2, 2)


def scripted(actions: tuple[int, ...]):
    """A policy that plays ``actions`` in every env, then turns left for ever."""
    step = [0]

    def act(obs: torch.Tensor) -> torch.Tensor:
        action = actions[step[0]] if step[0] < len(actions) else 0
        step[0] += 1
        return torch.full((obs.shape[0],), action, dtype=torch.long)

    return act


def test_a_minigrid_episode_succeeds_when_it_is_paid():
    pytest.importorskip("minigrid")
    reached = evaluate_batched(scripted(TO_THE_GOAL), "MiniGrid-Empty-5x5-v0", episodes=3)
    assert reached.successes == [True] * 3 and reached.success_rate == 1.0
    assert reached.returns == pytest.approx([1 - 0.9 * 5 / 100] * 3)
    # turning on the spot runs out of time unpaid
    stuck = evaluate_batched(scripted(()), "MiniGrid-Empty-5x5-v0", episodes=2)
    assert stuck.successes == [False, False] and stuck.returns == [0.0, 0.0]


def test_only_envs_with_a_rule_report_successes():
    pytest.importorskip("minigrid")
    env = envs.make("MiniGrid-Empty-5x5-v0", num_envs=1)
    assert success_rule_of(env) is positive_return
    assert success_rule_of(envs.make("CartPole-v1", num_envs=1)) is None
    # a step penalty of the user's own pays every episode below 0: the return tells no success
    penalised = envs.make(
        "MiniGrid-Empty-5x5-v0", num_envs=1, reward_fn=lambda events, success: success - 0.01
    )
    assert success_rule_of(penalised) is None
    played = evaluate_batched(lambda obs: torch.zeros(obs.shape[0], dtype=torch.long), "CartPole-v1", episodes=2)
    assert played.successes is None and played.success_rate is None
