"""Early stopping of search candidates: successive halving on the fitness at rungs of the budget.

A candidate's training streams its checkpoints back as they are made; the caller measures
the fitness of those at the *rungs* (:func:`rung_indices`) and asks the candidate's
:class:`Stopper` whether to go on. Where the env's return is its success flag alone (the
MuJoCo behaviours), a rung compares the episodes' *partial success* instead
(:func:`rung_value`): there most candidates' success rate is still 0 at a third of the
budget, and a rule that sees only ties stops nobody (a HalfCheetah-Backward search at the
defaults stopped none of 20), while how far the episodes got already tells a reward that
moves the robot the right way from one that does not. The rule is Optuna's ``SuccessiveHalvingPruner``
(asynchronous successive halving, ASHA) on the level, with a trend beside it: a candidate stops
at a rung only when its value there is not in the top ``1 / reduction_factor`` of the
candidates that reached that rung (behind on level) *and* it is no higher than at the
previous rung (behind on trend: not rising). The level alone stops late risers: a reward
whose policy finds the goal after a third of the budget (a car that reaches the flag late, a
CartPole seed that wobbles before it balances) is behind at the early rungs. Replayed on the
journals of five default searches, the level alone stops the final best program's full
trainings (its finalist and final seeds) 24 times in 140 tries and the human reference's 37 in
80, the level and the trend 8 and 8 (``benchmarks/results/stopping_replay.md``). The first rung
has no trend yet: it records where the candidate stands, and no one stops there.

The candidates it is compared with are those of the search's earlier iterations, whose
rung values are all known when an iteration starts (:func:`population`): the decision for a
candidate depends on its own training and the journal only, never on which of the
candidates training beside it got to a rung first, so a search and a resumed one (or one
with more workers) stop the same candidates at the same rungs. The first iteration has no
one to be compared with and trains its candidates to the end.

Only the search's candidates stop early; the reference rewards, the finalists' extra seeds
and the final re-training always train their whole budget.

    rule = StopRule(rungs=rung_indices(10), population=((3.0, 9.0), (0.0, 1.0), (5.0, 8.0)),
                    num_checkpoints=10)
    stopper = rule.stopper()
    stopper.at(0, 1_000, 0.0)  # None: no trend yet at the first rung
    stopper.at(2, 3_000, 0.0)  # a Stop: still 0 at the second rung, below the others and not rising
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["RUNG_FRACTIONS", "STOPPED", "Stop", "StopRule", "Stopper", "population", "rung_indices", "rung_value"]

#: the failure kind of a stopped candidate
STOPPED = "stopped"
#: where the rungs are, as shares of the budget. ASHA's rungs are geometric in its reduction
#: factor; with the last rung the full budget, factor 3 puts them at a ninth and a third. A
#: ninth is about when a working reward first shows: the references' fitness has left its
#: floor by then on the classic tasks' default budgets, while a flat curve there is flat for
#: good in most candidates; a third stops those that moved a little and then stalled. Later
#: rungs would save too little training to pay for the risk of stopping a late riser.
RUNG_FRACTIONS = (1 / 9, 1 / 3)
#: the candidates kept at a rung: the top half (Optuna's reduction factor 2). Gentler than
#: the rungs' spacing of 3: a reward's early fitness says less about its final one than a
#: learning rate's early loss does in hyperparameter search.
REDUCTION_FACTOR = 2
#: no candidate stops at a rung that fewer earlier candidates reached: with one or two to
#: compare with, "the bottom half" is one unlucky comparison
MIN_POPULATION = 3
#: the rungs' names in words, for the report and the LLM's feedback
_FRACTION_WORDS = {RUNG_FRACTIONS[0]: "a ninth", RUNG_FRACTIONS[1]: "a third"}


def rung_value(fitness: float, partial_success: float | None) -> float:
    """What a rung compares: the checkpoint's partial success where its env has a rule for it
    (:attr:`rewardlab.envs.descriptions.EnvDescription.partial_success`), else its fitness.

    :param fitness: the checkpoint's fitness.
    :param partial_success: its partial success, or ``None``.
    """
    return float(fitness if partial_success is None else partial_success)


def rung_indices(num_checkpoints: int) -> tuple[int, ...]:
    """The checkpoints (0-based, of ``num_checkpoints`` evenly spaced ones) nearest each of
    :data:`RUNG_FRACTIONS`; never the last one (stopping there saves nothing).

    With the default 10 checkpoints: the 1st and the 3rd (a tenth and three tenths).

    :param num_checkpoints: checkpoints per training run.
    """
    indices = []
    for fraction in RUNG_FRACTIONS:
        index = max(1, round(fraction * num_checkpoints)) - 1
        if index < num_checkpoints - 1 and index not in indices:
            indices.append(index)
    return tuple(indices)


def rung_words(rung: int, num_checkpoints: int) -> str:
    """``"a ninth"`` or ``"a third"`` (``"3/10"`` where the checkpoints put it elsewhere).

    :param rung: the rung's number (0: the first).
    :param num_checkpoints: checkpoints per training run.
    """
    index = rung_indices(num_checkpoints)[rung]
    share = (index + 1) / num_checkpoints
    nearest = min(RUNG_FRACTIONS, key=lambda fraction: abs(fraction - share))
    if abs(nearest - share) <= 0.05:  # 3/10 is a third, near enough (the step is given too)
        return _FRACTION_WORDS[nearest]
    return f"{index + 1}/{num_checkpoints}"


@dataclass(frozen=True)
class Stop:
    """Where and why a candidate stopped.

    :param rung: the rung's number (0: the first).
    :param checkpoint: the checkpoint it stopped at (0-based).
    :param step: env steps trained by then.
    :param share: the share of the budget that is (``"a ninth"``, ``"a third"``).
    :param fitness: its fitness there.
    :param kept_from: the lowest value at that rung that went on (the cut; a partial
        success where ``partial_success`` is given, else a fitness).
    :param compared: how many earlier candidates reached that rung.
    :param kept: how many of them and this one went on (the pruner's share, at least one).
    :param partial_success: its partial success there, what the rung compared (``None``:
        the fitness was compared).
    :param previous: its value at the previous rung, which it did not rise above (``None``:
        a rule that judged the level alone).
    """

    rung: int
    checkpoint: int
    step: int
    share: str
    fitness: float
    kept_from: float
    compared: int
    kept: int
    partial_success: float | None = None
    previous: float | None = None

    @property
    def reason(self) -> str:
        """In words, for the report and the LLM: ``stopped at a third of the budget with fitness f ...``."""
        measure = "fitness" if self.partial_success is None else "partial success"
        partial = "" if self.partial_success is None else f" and partial success {self.partial_success:.4g}"
        trend = ("" if self.previous is None else
                 f", and no higher than at the previous rung ({measure} {self.previous:.4g})")
        return (f"stopped at {self.share} of the budget (step {self.step:,}) with fitness {self.fitness:.4g}"
                f"{partial}: not among the best {self.kept} of the {self.compared + 1} candidates "
                "that got "
                f"there (this one and earlier ones; {measure} {self.kept_from:.4g} or more went on){trend}")

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stop:
        """Rebuild from :meth:`to_dict`'s output.

        :param data: the JSON data.
        """
        partial, previous = data.get("partial_success"), data.get("previous")
        return cls(int(data["rung"]), int(data["checkpoint"]), int(data["step"]), str(data["share"]),
                   float(data["fitness"]), float(data["kept_from"]), int(data["compared"]), int(data["kept"]),
                   None if partial is None else float(partial), None if previous is None else float(previous))


@dataclass(frozen=True)
class StopRule:
    """The early-stopping rule of one iteration's candidates, as plain data (it travels
    with the evaluation task, to a Ray node too).

    :param rungs: the rungs' checkpoints (0-based), in order.
    :param population: each earlier candidate's :func:`rung_value` at the rungs it reached, in order.
    :param num_checkpoints: checkpoints per training run (names the rungs).
    :param reduction_factor: the top ``1 / reduction_factor`` at a rung go on.
    :param min_population: fewest earlier candidates at a rung for anyone to stop there.
    :param trend: stop only what is behind on level and not rising since the previous rung
        (the search's rule); ``False`` judges the level alone, as ASHA does (kept to measure
        what the trend changes, ``benchmarks/stopping_replay.py``).
    """

    rungs: tuple[int, ...]
    population: tuple[tuple[float, ...], ...]
    num_checkpoints: int
    reduction_factor: int = REDUCTION_FACTOR
    min_population: int = MIN_POPULATION
    trend: bool = True

    def stopper(self) -> Stopper:
        """A fresh :class:`Stopper` for one candidate."""
        return Stopper(self)

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return {"rungs": list(self.rungs), "population": [list(values) for values in self.population],
                "num_checkpoints": self.num_checkpoints, "reduction_factor": self.reduction_factor,
                "min_population": self.min_population, "trend": self.trend}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StopRule:
        """Rebuild from :meth:`to_dict`'s output.

        :param data: the JSON data.
        """
        return cls(tuple(int(index) for index in data["rungs"]),
                   tuple(tuple(float(value) for value in values) for values in data["population"]),
                   int(data["num_checkpoints"]), int(data["reduction_factor"]), int(data["min_population"]),
                   bool(data.get("trend", True)))


class Stopper:
    """One candidate's early stopping: fed the value at each rung (:func:`rung_value`), says whether it stops.

    An in-memory Optuna study holds one trial per earlier candidate (its rung values as
    ``SuccessiveHalvingPruner`` records them) and one for this candidate, which reports its
    value at each rung; ``should_prune`` decides.

    :param rule: the iteration's rule.
    """

    def __init__(self, rule: StopRule):
        import optuna

        self.rule = rule
        self.values: list[float] = []
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # the rungs as Optuna's pruner places them: rung r at step reduction_factor ** r
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=rule.reduction_factor,
                                                        min_early_stopping_rate=0)
        self._study = optuna.create_study(direction="maximize", pruner=pruner,
                                          sampler=optuna.samplers.RandomSampler(seed=0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            for values in rule.population:
                self._study.add_trial(optuna.trial.create_trial(
                    state=optuna.trial.TrialState.PRUNED,
                    intermediate_values={rule.reduction_factor ** rung: value for rung, value in enumerate(values)},
                    system_attrs={f"completed_rung_{rung}": value for rung, value in enumerate(values)},
                ))  # fmt: skip
        self._trial = self._study.ask()

    def at(self, checkpoint: int, step: int, fitness: float, partial_success: float | None = None) -> Stop | None:
        """Take what was measured at ``checkpoint``; a :class:`Stop` if the candidate stops
        there, ``None`` if it goes on (or the checkpoint is no rung).

        :param checkpoint: the checkpoint's index (0-based) in the candidate's first seed.
        :param step: env steps trained by then.
        :param fitness: the fitness measured there.
        :param partial_success: the partial success measured there, where the env has a rule
            for it: then it is what the rung compares (:func:`rung_value`).
        """
        rule = self.rule
        if checkpoint not in rule.rungs:
            return None
        rung = rule.rungs.index(checkpoint)
        if rung != len(self.values):  # a rung skipped (or repeated): the rule cannot place this value
            raise ValueError(f"checkpoint {checkpoint} is rung {rung}, but {len(self.values)} rungs were reported")
        value = rung_value(fitness, partial_success)
        self.values.append(value)
        self._trial.report(value, rule.reduction_factor ** rung)
        reached = [values[rung] for values in rule.population if len(values) > rung]
        if len(reached) < rule.min_population:
            # too few to compare with; fewer still reached the later rungs (each earlier
            # candidate's values are a prefix), so this candidate asks the pruner no more
            return None
        # asked at every rung, the first too: the pruner records each rung it has judged, and
        # would judge an unrecorded earlier rung on the level alone when asked at a later one
        behind = self._trial.should_prune()
        previous = self.values[-2] if rule.trend and rung > 0 else None
        if not behind or (rule.trend and (previous is None or value > previous)):
            return None
        ranked = sorted([*reached, value], reverse=True)
        kept = max(len(ranked) // rule.reduction_factor, 1)  # the pruner's rule, for the record
        return Stop(rung=rung, checkpoint=checkpoint, step=int(step), share=rung_words(rung, rule.num_checkpoints),
                    fitness=float(fitness), kept_from=ranked[kept - 1], compared=len(reached), kept=kept,
                    partial_success=partial_success, previous=previous)


def population(curves: Sequence[Sequence[float]], rungs: Sequence[int]) -> tuple[tuple[float, ...], ...]:
    """Each earlier candidate's value at the rungs it reached: ``curves`` holds each one's
    :func:`rung_value` per checkpoint of its first seed (what its stopper saw), as far as it trained.

    :param curves: per candidate, the values at its checkpoints (empty: never trained).
    :param rungs: the rungs' checkpoints.
    """
    rows = []
    for curve in curves:
        values = []
        for index in rungs:
            if index >= len(curve):
                break
            values.append(float(curve[index]))
        if values:
            rows.append(tuple(values))
    return tuple(rows)
