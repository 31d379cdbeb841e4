"""What a finished search says to do next: train on its best program where that beat the env's
own reward, or raise the budget where nothing did.

On a sparse task, at a budget where no reward teaches the task, every candidate scores the
floor (MiniGrid's 0) and the best is picked by a tie-breaker: its program is no better than
the env's own reward, and "train on it" would say it won. A search compares its best with the
sparse reference over the final seeds (or, without them, its candidates with each other) and
says when it found nothing, with the budget to try next.

    >>> from rewardlab.llm_reward.search.verdict import verdict
    >>> verdict(result).message  # doctest: +SKIP
    "no candidate beat the env's own reward at this budget (best 0 ± 0 against 0 ± 0 ...": ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from rewardlab.llm_reward.search.budgets import solve_threshold
from rewardlab.llm_reward.search.records import FinalScore, SearchResult, standard_error

__all__ = ["RAISE_STEPS", "SeedFailures", "Verdict", "normalized_score", "references_tied",
           "seed_failures", "verdict"]

#: the factor of the steps that a search which found nothing suggests next
RAISE_STEPS = 4


@dataclass(frozen=True)
class Verdict:
    """A search's outcome against the env's own reward.

    :param beat_sparse: the best program scored above the sparse reference by more than their
        seeds' standard error (``None``: nothing to compare it with).
    :param message: one line for the user when it did not; empty when it did or is unknown.
    :param steps: the steps per candidate to search with next, when it did not.
    """

    beat_sparse: bool | None
    message: str = ""
    steps: int | None = None


def _apart(first: FinalScore, second: FinalScore) -> tuple[float, float]:
    """``(difference of the means, standard error of that difference)``; both means known."""
    assert first.mean is not None and second.mean is not None
    return first.mean - second.mean, math.hypot(standard_error(first.values), standard_error(second.values))


def normalized_score(final: Mapping[str, FinalScore]) -> float | None:
    """Eureka's ``(best - sparse) / |human - sparse|`` of the final means, where the human
    reference and the env's own reward are told apart over their seeds: their difference beyond
    its standard error. On a dense-reward task (Pendulum) the env's own reward is a good reward
    already, and the two references can be within each other's noise: a score divided by
    their gap is then noise over noise (17 on a Pendulum search whose references were 1.4
    apart with standard errors of 13 and 16). ``None`` there, and where a reference is missing.

    :param final: the final re-training per label (``best``, ``sparse``, ``human``).
    """
    best, sparse, human = (final.get(label) for label in ("best", "sparse", "human"))
    if best is None or sparse is None or human is None:
        return None
    if best.mean is None or sparse.mean is None or human.mean is None:
        return None
    gap, noise = _apart(human, sparse)
    if abs(gap) <= max(noise, 1e-12):
        return None
    return (best.mean - sparse.mean) / abs(gap)


def references_tied(final: Mapping[str, FinalScore]) -> str | None:
    """Why there is no normalised score although both references trained: one line, or ``None``
    where there is one (or a reference is missing).

    :param final: the final re-training per label.
    """
    sparse, human = final.get("sparse"), final.get("human")
    if sparse is None or human is None or sparse.mean is None or human.mean is None:
        return None
    best = final.get("best")
    if normalized_score(final) is not None or best is None or best.mean is None:
        return None
    gap, noise = _apart(human, sparse)
    return (f"the human reference and the env's own reward are not told apart over their seeds "
            f"(human - own {gap:.3g}, standard error {noise:.2g}): a score divided by their gap "
            "would be "
            "noise; compare the best with each of them")


def verdict(result: SearchResult) -> Verdict:
    """Whether the search's best program beat the env's own reward, and what to do if not.

    With final seeds: the best's mean against the sparse reference's, a win only beyond the
    standard error of their difference. Without them: a search whose trained candidates all
    scored the same found nothing either.

    :param result: a finished search with a best candidate.
    """
    steps = result.config.steps
    raise_to = (
        f"raise --steps to {RAISE_STEPS * steps:,} (now {steps:,}) and search again"
        if steps
        else "raise --steps and search again"
    )
    suggested = RAISE_STEPS * steps if steps else None
    best, sparse = result.final.get("best"), result.final.get("sparse")
    if (
        best is not None
        and sparse is not None
        and best.mean is not None
        and sparse.mean is not None
    ):
        difference, noise = _apart(best, sparse)
        if difference > max(noise, 1e-9 * max(1.0, abs(sparse.mean))):
            return Verdict(True)
        seeds = min(len(best.values), len(sparse.values))
        head = (
            "no candidate beat the env's own reward"
            if difference >= -noise
            else "the env's own reward scored above the best program"
        )
        return Verdict(
            False,
            f"{head} at this budget (best {best.mean:.3g} ± {best.std:.2g} against "
            f"{sparse.mean:.3g} ± {sparse.std:.2g} over {seeds} seeds): {raise_to}",
            suggested,
        )
    fitness = {
        candidate.fitness
        for candidate in result.candidates
        if candidate.ok and candidate.fitness is not None
    }
    if len(fitness) == 1 and sum(candidate.ok for candidate in result.candidates) > 1:
        return Verdict(
            False,
            f"every candidate tied at fitness {fitness.pop():.3g}: nothing told them apart "
            f"at this budget; {raise_to}",
            suggested,
        )
    return Verdict(None)


@dataclass(frozen=True)
class SeedFailures:
    """The final seeds on which the best program misses the task's solve threshold.

    :param threshold: the final fitness that solves the task (:func:`~rewardlab.llm_reward.search.budgets.solve_threshold`).
    :param seeds: the final seeds.
    :param best: the seeds where the best program scored below it (or failed to train).
    :param human: the same for the human reference (``None``: no human reference was trained).
    """

    threshold: float
    seeds: tuple[int, ...]
    best: tuple[int, ...]
    human: tuple[int, ...] | None

    @property
    def human_solves(self) -> bool:
        """The human reference reached the threshold on at least as many seeds as it missed."""
        return self.human is not None and len(self.human) * 2 <= len(self.seeds)

    @property
    def message(self) -> str:
        """One line: ``the best program fails 1 of 5 final seeds (seed 102: below 90) ...``."""
        count = f"{len(self.best)} of {len(self.seeds)} final seeds"
        which = f" (seed{'s' if len(self.best) > 1 else ''} {', '.join(map(str, self.best))})" if self.best else ""
        human = ("" if self.human is None else
                 f"; the human reward fails {len(self.human)} of {len(self.seeds)}")
        warning = " — the pick does not hold on every seed" if self.best and self.human_solves else ""
        return (f"the best program fails {count}{which} (final fitness below the task's solve threshold "
                f"{self.threshold:.4g}){human}{warning}")


def seed_failures(result: SearchResult) -> SeedFailures | None:
    """How many of the final seeds the best program fails: scores below the task's solve threshold
    on, or fails to train. ``None`` where the task has no threshold or there was no final re-training.

    :param result: a finished search.
    """
    threshold = solve_threshold(result.config.env_id)
    best = result.final.get("best")
    if threshold is None or best is None or not best.fitness:
        return None

    def failed(score: FinalScore) -> tuple[int, ...]:
        return tuple(seed for seed, value in score.fitness.items() if value is None or value < threshold)

    human = result.final.get("human")
    return SeedFailures(threshold, tuple(best.fitness), failed(best), None if human is None else failed(human))
