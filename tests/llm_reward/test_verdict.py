"""A search's next step: train on the best program only where it beat the env's own reward."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardlab.llm_reward.clients import Usage
from rewardlab.llm_reward.search.config import SearchConfig
from rewardlab.llm_reward.search.records import Candidate, FinalScore, SearchResult
from rewardlab.llm_reward.search.verdict import RAISE_STEPS, verdict
from rewardlab.llm_reward.training import Checkpoint, TrainingRun


def _candidate(sample: int, fitness: float) -> Candidate:
    point = Checkpoint(step=100, fitness=fitness, success_rate=None, train_return=None)
    run = TrainingRun(
        "CartPole-v1", True, fitness, None, [point], [], None, 100, 1.0, None, None, None, None, ""
    )
    return Candidate(0, sample, source=f"# {sample}", result=run)


def _result(final: dict[str, list[float]], fitness: tuple[float, ...] = (0.0, 1.0)) -> SearchResult:
    config = SearchConfig(env_id="CartPole-v1", task="balance", proposer="evolve", steps=20_000)
    candidates = [_candidate(sample, value) for sample, value in enumerate(fitness)]
    scores = {label: FinalScore(label, dict(enumerate(values))) for label, values in final.items()}
    return SearchResult(
        config,
        Path("out"),
        candidates,
        candidates[-1],
        scores,
        None,
        Usage(),
        0.0,
        False,
        0,
        0,
        0,
        "local",
        None,
        1.0,
    )


def test_a_tie_at_the_sparse_rewards_level_says_so_with_the_budget_to_raise() -> None:
    tie = verdict(_result({"best": [0.0] * 5, "sparse": [0.0] * 5}))
    assert tie.beat_sparse is False and tie.steps == RAISE_STEPS * 20_000
    assert tie.message.startswith("no candidate beat the env's own reward at this budget")
    assert f"raise --steps to {RAISE_STEPS * 20_000:,} (now 20,000)" in tie.message
    # within the seeds' noise is no win either
    noisy = verdict(
        _result({"best": [0.0, 0.9, 0.0, 0.0, 0.0], "sparse": [0.0, 0.0, 0.8, 0.0, 0.0]})
    )
    assert noisy.beat_sparse is False


def test_a_clear_win_trains_on_it_and_a_clear_loss_is_named() -> None:
    assert (
        verdict(_result({"best": [0.9, 0.8, 0.9, 0.95, 0.9], "sparse": [0.0] * 5})).beat_sparse
        is True
    )
    lost = verdict(_result({"best": [0.0] * 5, "sparse": [0.9, 0.8, 0.9, 0.95, 0.9]}))
    assert lost.beat_sparse is False and lost.message.startswith(
        "the env's own reward scored above"
    )


def test_without_final_seeds_only_candidates_that_all_tie_found_nothing() -> None:
    assert verdict(_result({}, fitness=(0.0, 0.0, 0.0))).beat_sparse is False
    assert "every candidate tied at fitness 0" in verdict(_result({}, fitness=(0.0, 0.0))).message
    assert verdict(_result({}, fitness=(0.0, 0.5))).beat_sparse is None
    assert verdict(_result({}, fitness=(0.5,))).beat_sparse is None, "one candidate is no tie"


def test_the_report_gives_the_same_next_step_as_the_command_line() -> None:
    from rewardlab.llm_reward.search.report import REPORT_FILE, TRAIN_FOLDER, render

    tie = render(_result({"best": [0.0] * 5, "sparse": [0.0] * 5}))[REPORT_FILE]
    assert "Train on it" not in tie and "No candidate beat the env's own reward" in tie
    won = render(_result({"best": [0.9, 0.8, 0.9, 0.95, 0.9], "sparse": [0.0] * 5}))[REPORT_FILE]
    assert f"--logdir out/{TRAIN_FOLDER}`" in won and "runs/best_reward" not in won


def test_the_report_counts_the_final_seeds_the_best_program_fails() -> None:
    from rewardlab.llm_reward.search.report import REPORT_FILE, render, summary
    from rewardlab.llm_reward.search.verdict import seed_failures

    # CartPole solves at 475: the best misses seed 2 (and seed 4 failed to train), the human none
    result = _result({"best": [500.0, 490.0, 120.0, 500.0], "human": [500.0] * 5, "sparse": [30.0] * 5})
    result.final["best"].fitness[4] = None
    failures = seed_failures(result)
    assert failures is not None and failures.threshold == 475.0
    assert failures.best == (2, 4) and failures.human == () and failures.human_solves
    assert failures.message.startswith("the best program fails 2 of 5 final seeds (seeds 2, 4)")
    assert "the pick does not hold on every seed" in failures.message
    assert "The best program fails 2 of 5 final seeds" in render(result)[REPORT_FILE]
    assert summary(result)["failed_final_seeds"] == {"threshold": 475.0, "best": [2, 4], "human": []}
    # every seed solving is said too, without the warning
    held = seed_failures(_result({"best": [500.0] * 5, "human": [480.0] * 5}))
    assert held is not None and held.message.startswith("the best program fails 0 of 5")
    assert "does not hold" not in held.message
    # a task without a threshold (a user's env) says nothing
    other = _result({"best": [1.0] * 5})
    other.config.env_id = "MiniGrid-Empty-5x5-v0"
    assert seed_failures(other) is None


def test_no_normalised_score_where_the_human_reward_and_the_envs_own_are_within_noise() -> None:
    from rewardlab import llm_reward
    from rewardlab.llm_reward.search.report import REPORT_FILE, render, summary
    from rewardlab.llm_reward.search.verdict import normalized_score, references_tied

    # Pendulum's reference is the env's own (dense) reward, not a sparse program ...
    sparse = llm_reward.reference_programs("Pendulum-v1")["sparse"].source
    assert "theta**2 + 0.1 * theta_dot**2 + 0.001" in sparse
    # ... and a search's two references there were 1.4 apart with seeds 26 and 32 wide
    final = {"best": [-201.4, -206.6, -204.5, -174.4, -185.9], "sparse": [-197.4, -264.6, -227.6, -206.3, -196.5],
             "human": [-266.8, -221.9, -231.6, -184.9, -180.1]}
    result = _result(final)
    result.config.env_id = "Pendulum-v1"
    assert normalized_score(result.final) is None
    assert references_tied(result.final).startswith("the human reference and the env's own reward are not told "
                                                    "apart over their seeds (human - own 1.42, standard error 20)")
    assert "Normalised score (best - sparse) / |human - sparse|: undefined (the human reference and the env's own" \
        in render(result)[REPORT_FILE]
    assert summary(result)["normalized_score"] is None and summary(result)["normalized_score_note"]
    # told apart (CartPole's references): Eureka's score
    apart = _result({"best": [480.0, 490.0], "sparse": [100.0, 120.0], "human": [400.0, 420.0]})
    assert normalized_score(apart.final) == pytest.approx((485.0 - 110.0) / 300.0)
    assert references_tied(apart.final) is None
