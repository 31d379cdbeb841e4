"""The records a search keeps: candidates, prescreen scores and final re-training runs."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.llm_reward.clients import Usage, typed_finish_reason, typed_usage
from rewardlab.llm_reward.search.config import SearchConfig
from rewardlab.llm_reward.search.reflection import RewardSignals
from rewardlab.llm_reward.training import Checkpoint, TrainingRun
from rewardlab.llm_reward.training.failures import Failure
from rewardlab.llm_reward.training.records import is_number

__all__ = ["Candidate", "FinalScore", "PrescreenScore", "SearchResult", "candidate_key",
           "journaled_cost", "journaled_count", "journaled_run"]

# Failure kinds a candidate can have besides those of reading its answer
# (rewardlab.llm_reward.training.failures) and of its evaluation.
LLM_FAILURE = "llm"
PRESCREEN_FAILURE = "prescreen"
#: the search itself failed on the candidate (an exception while handling it)
SEARCH_FAILURE = "error"


def candidate_key(iteration: int, sample: int) -> str:
    """``"it02_s05"``: the key of a candidate in the journal and its folder name.

    :param iteration: 0-based iteration.
    :param sample: 0-based sample within the iteration.
    """
    return f"it{iteration:02d}_s{sample:02d}"


@dataclass(frozen=True)
class PrescreenScore:
    """How a program ranks stored trajectories of known task return (CARD's trajectory
    preference evaluation).

    :param tau: Kendall's tau-b between the program's returns and the task returns over
        the trajectories (``None``: the program failed, or too few pairs differ).
    :param pairs: how many trajectory pairs have different task returns.
    :param passed: the program may be trained (tau at or above the threshold, or the
        test was inconclusive).
    :param returns: the program's undiscounted return on each trajectory.
    :param finding: what the score says, in words fit for the LLM.
    :param failure: the program failed on the trajectories (in the sandbox).
    """

    tau: float | None
    pairs: int
    passed: bool
    returns: list[float]
    finding: str
    failure: Failure | None = None

    def to_dict(self) -> dict[str, Any]:
        """The score as JSON data."""
        return {
            "tau": self.tau, "pairs": self.pairs, "passed": self.passed, "returns": self.returns,
            "finding": self.finding, "failure": None if self.failure is None else vars(self.failure),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrescreenScore:
        """Rebuild a score from :meth:`to_dict`'s output.

        :param data: the JSON data.
        """
        tau, pairs, passed = data.get("tau"), data.get("pairs"), data.get("passed")
        returns, finding = data.get("returns"), data.get("finding")
        if not (
            (tau is None or is_number(tau)) and isinstance(pairs, int) and isinstance(passed, bool)
            and isinstance(returns, list) and all(is_number(value) for value in returns)
            and isinstance(finding, str)
        ):
            raise ValueError("a prescreen record's tau, pairs, passed, returns or finding is not "
                             "of its type")
        return cls(tau, pairs, passed, returns, finding, Failure.from_dict(data.get("failure")))


@dataclass
class Candidate:
    """One proposed reward program and what became of it.

    :param iteration: 0-based iteration.
    :param sample: 0-based sample within the iteration.
    :param answer: the LLM's whole answer (the evolve proposer's: the program).
    :param source: the program found in the answer (``None``: none found).
    :param genome: the evolve proposer's description of the program.
    :param usage: tokens of the LLM call (``None`` without an LLM).
    :param cost_usd: its cost (``None``: unknown or no LLM).
    :param failure: why it was not trained (no answer, no code, checks, prescreen), or why
        its training failed.
    :param prescreen: its prescreen score, when the search prescreens.
    :param result: its evaluation, when it was trained.
    :param signals: its reward-hacking signals, when it trained successfully.
    :param finish_reason: why the LLM stopped writing the answer (``"length"``: the token
        limit cut it off), when the server said.
    """

    iteration: int
    sample: int
    answer: str | None = None
    source: str | None = None
    genome: list[dict[str, Any]] | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    failure: Failure | None = None
    prescreen: PrescreenScore | None = None
    result: TrainingRun | None = None
    signals: RewardSignals | None = None
    finish_reason: str | None = None
    #: a finalist's late fitness per extra seed (``None``: that seed failed), when the search confirms finalists
    confirmation: dict[int, float | None] | None = None

    def take_answer(self, record: Mapping[str, Any]) -> bool:
        """Fill in the answer's fields from its journal record, each typed (a journal is data
        of unknown type); an answer that is not text fails the candidate.

        :param record: the ``answer`` record.
        :return: the record held an answer as text.
        """
        genome = record.get("genome")
        terms = isinstance(genome, list) and all(isinstance(term, dict) for term in genome)
        self.genome = genome if terms else None
        self.finish_reason = typed_finish_reason(record.get("finish_reason"))
        self.usage = typed_usage(record.get("usage")) if "usage" in record else None
        self.cost_usd = journaled_cost(record.get("cost_usd")) if self.usage is not None else None
        text = record.get("text")
        if not isinstance(text, str):
            kind = "null" if text is None else type(text).__name__
            self.failure = Failure(SEARCH_FAILURE, f"the journaled answer is not text ({kind})")
            return False
        self.answer = text
        return True

    @property
    def key(self) -> str:
        """``"it02_s05"``."""
        return candidate_key(self.iteration, self.sample)

    @property
    def ok(self) -> bool:
        """It trained to the end."""
        return self.result is not None and self.result.ok

    @property
    def fitness(self) -> float | None:
        """Its task fitness, when it trained."""
        return self.result.fitness if self.result is not None and self.result.ok else None

    @property
    def status(self) -> str:
        """``"ok"``, or the kind of its failure."""
        if self.ok:
            return "ok"
        return self.failure.kind if self.failure is not None else "pending"


@dataclass
class FinalScore:
    """A program re-trained with several seeds.

    :param label: ``"best"``, ``"sparse"`` or ``"human"``.
    :param fitness: each seed's final fitness (``None``: that seed failed).
    :param failures: the failures of the seeds that failed.
    """

    label: str
    fitness: dict[int, float | None] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def values(self) -> list[float]:
        """The fitness of the seeds that trained."""
        return [value for value in self.fitness.values() if value is not None]

    @property
    def mean(self) -> float | None:
        """Mean fitness over the seeds that trained."""
        values = self.values
        return sum(values) / len(values) if values else None

    @property
    def std(self) -> float | None:
        """Standard deviation (population) over the seeds that trained."""
        values, mean = self.values, self.mean
        if mean is None:
            return None
        return (sum((value - mean) ** 2 for value in values) / len(values)) ** 0.5


def journaled_cost(value: object) -> float | None:
    """A journaled cost in USD if it is a finite non-negative number, else ``None`` (unknown).

    :param value: the journal's value.
    """
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
        return float(value)
    return None


def journaled_count(value: object, default: int = 0) -> int:
    """A journaled count if it is a non-negative integer, else ``default``.

    :param value: the journal's value.
    :param default: what a missing or malformed count is taken to be.
    """
    counted = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if counted else default


#: the checkpoints at the end of training whose mean fitness ranks a candidate
LATE_CHECKPOINTS = 3


def rank_key(candidate: Candidate) -> tuple[float, float, float]:
    """How good a candidate is, larger better: its task fitness over the last
    :data:`LATE_CHECKPOINTS` checkpoints (one lucky final evaluation of an unstable run does
    not win), then success rate, then the mean true return of its training episodes (which
    tells apart candidates that all score a floor, such as -200 on MountainCar before any
    evaluation episode reaches the flag)."""
    result = candidate.result
    late = late_fitness(result) if result is not None else None
    if result is None or late is None:
        return (-math.inf, -math.inf, -math.inf)
    returns = [point.train_return for point in result.curve if point.train_return is not None]
    success = result.success_rate if result.success_rate is not None else -math.inf
    return (late, success, sum(returns) / len(returns) if returns else -math.inf)


def late_fitness(result: TrainingRun) -> float | None:
    """The mean fitness of a training's last :data:`LATE_CHECKPOINTS` checkpoints (``None``: it failed)."""
    if result.fitness is None or not result.ok:
        return None
    late = [point.fitness for point in result.curve[-LATE_CHECKPOINTS:]] or [result.fitness]
    return sum(late) / len(late)


def seed_fitness(candidate: Candidate) -> list[float]:
    """A finalist's late fitness on each of its seeds: its search seed(s) (the mean of each
    seed's last :data:`LATE_CHECKPOINTS` checkpoints), then its extra seeds; a failed extra seed
    counts as the worst (``-inf``)."""
    runs = seed_runs(candidate.result)
    lates = [run[-LATE_CHECKPOINTS:] for run in runs if run]
    searched = [sum(point.fitness for point in late) / len(late) for late in lates]
    if not searched:
        searched = [rank_key(candidate)[0]]
    return [*searched, *(-math.inf if value is None else value
                         for value in (candidate.confirmation or {}).values())]


def confirmed_fitness(candidate: Candidate) -> float:
    """What finalists are compared by: the lower confidence bound of their late fitness over all
    their seeds (:func:`seed_fitness`), the mean less one standard error of it (the sample
    deviation over the square root of the seeds); ``-inf`` when a seed failed.

    A bound rather than the mean, or the IQM: the final re-training asks whether the pick holds
    on every one of five new seeds, and what loses seeds there is a reward that solves the task
    on most seeds and misses it on some (a car that never finds the flag). The mean of three
    seeds keeps such a finalist ahead when its good seeds are high enough, and the IQM of three
    is their median, blind to one bad seed in three; the bound charges the spread, so a
    consistent finalist beats an erratic one of a slightly higher mean. With one seed it is that
    seed's fitness.
    """
    values = seed_fitness(candidate)
    if any(math.isinf(value) for value in values):
        return -math.inf
    return sum(values) / len(values) - standard_error(values)


def standard_error(values: Sequence[float]) -> float:
    """The standard error of the mean of ``values``: their sample deviation over the square
    root of their count; 0 for fewer than two."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    variance = sum((value - mean) ** 2 for value in values) / (len(values) - 1)
    return math.sqrt(variance / len(values))


def best_of(candidates: Sequence[Candidate]) -> Candidate | None:
    """The trained candidate with the highest :func:`rank_key` (the earliest on ties), or ``None``."""
    trained = [c for c in candidates if c.ok]
    if not trained:
        return None
    best = max(rank_key(c) for c in trained)
    return min((c for c in trained if rank_key(c) == best), key=lambda c: (c.iteration, c.sample))


def seed_runs(result: TrainingRun | None) -> list[list[Checkpoint]]:
    """Each seed's checkpoints of ``result`` (its mean curve when no seed kept any)."""
    if result is None:
        return []
    return [run.checkpoints for run in result.seeds if run.checkpoints] or ([result.curve] if result.curve else [])


def journaled_run(record: Mapping[str, Any]) -> TrainingRun:
    """A journaled training's result; a failed run that says so when the record's result is
    malformed (a journal is data of unknown type: one bad record stops no search or report).

    :param record: a journal record with a ``result``.
    """
    try:
        return TrainingRun.from_dict(record.get("result"))
    except ValueError as error:
        failure = Failure(SEARCH_FAILURE, f"the journaled result is malformed ({error})")
        return TrainingRun("", False, None, None, [], [], failure, 0, 0.0, None, None, None, None,
                           "")


def journal_runs(records: Iterable[Mapping[str, Any]], field_name: str) -> dict[str, list[list[Checkpoint]]]:
    """Journaled one-seed trainings (``final``, ``finalist`` records): their seeds'
    checkpoints grouped by each record's ``field_name`` (``label``, ``candidate``)."""
    runs: dict[str, list[list[Checkpoint]]] = {}
    for record in records:
        runs.setdefault(str(record.get(field_name)), []).extend(seed_runs(journaled_run(record)))
    return runs


@dataclass
class SearchResult:
    """What a search found and spent.

    :param config: the search's config.
    :param out: its run directory.
    :param candidates: every candidate, in (iteration, sample) order.
    :param best: the best trained candidate (``None``: none trained).
    :param final: the final re-training per label (``best``, ``sparse``, ``human``).
    :param normalized_score: Eureka's ``(best - sparse) / |human - sparse|`` of the final
        means (``None`` without both references or when they are equal).
    :param usage: tokens of all LLM answers of the run (earlier sessions included).
    :param cost_usd: their cost, as far as the prices are known.
    :param cost_unknown: some call's price was unknown.
    :param llm_calls: answers received.
    :param llm_failures: requests that failed for good.
    :param llm_retries: retried tries, over all requests.
    :param executor: where evaluations ran.
    :param llm: the endpoint and model, if any.
    :param wall_s: this session's wall time.
    :param feedback: the human feedback given before each iteration (from the journal).
    :param final_runs: each final label's one-seed runs, their checkpoints (from the journal).
    :param finalist_runs: each finalist's extra seeds' runs, their checkpoints (from the journal).
    :param fork_server_start_s: the sandbox's fork server start-up, seconds summed over this
        session (``None``: none started).
    """

    config: SearchConfig
    out: Path
    candidates: list[Candidate]
    best: Candidate | None
    final: dict[str, FinalScore]
    normalized_score: float | None
    usage: Usage
    cost_usd: float
    cost_unknown: bool
    llm_calls: int
    llm_failures: int
    llm_retries: int
    executor: str
    llm: str | None
    wall_s: float
    feedback: dict[int, str | None] = field(default_factory=dict)
    final_runs: dict[str, list[list[Checkpoint]]] = field(default_factory=dict)
    finalist_runs: dict[str, list[list[Checkpoint]]] = field(default_factory=dict)
    fork_server_start_s: float | None = None

    @property
    def failures(self) -> Counter[str]:
        """How many candidates failed (or were rejected), by kind; those early stopping stopped
        are no failures (:attr:`stopped_early`)."""
        return Counter(candidate.status for candidate in self.candidates
                       if not candidate.ok and not self._stopped(candidate))

    @property
    def stopped_early(self) -> int:
        """How many candidates early stopping stopped, at a rung of their budget."""
        return sum(self._stopped(candidate) for candidate in self.candidates)

    @staticmethod
    def _stopped(candidate: Candidate) -> bool:
        return candidate.result is not None and candidate.result.stopped is not None
