"""The records of training on a reward program: what it trains with, what the worker
reports, what the caller measures.

- :class:`Budget`: what one training trains with (steps, envs, PPO's settings);
- :class:`Progress`: what the worker reports at a checkpoint (never a fitness: the worker
  does not measure, see :mod:`~rewardlab.llm_reward.training.snapshots`);
- :class:`Checkpoint`: a progress point with the fitness the caller measured;
- :class:`SeedRun` and :class:`TrainingRun`: one seed's checkpoints, and the whole run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rewardlab.llm_reward.training.failures import MAX_REASON_CHARS, Failure, cut
from rewardlab.llm_reward.training.stopping import Stop, rung_value

__all__ = ["Budget", "Checkpoint", "Progress", "SeedRun", "TrainingRun", "is_number"]


@dataclass(frozen=True)
class Budget:
    """What one candidate trains with.

    :param steps: env steps per seed.
    :param num_envs: batched envs.
    :param ppo_kwargs: ``rewardlab.agents.PPO`` settings (JSON data).
    :param note: where the budget comes from, for the report.
    """

    steps: int
    num_envs: int
    ppo_kwargs: dict[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass
class Progress:
    """What a training run reports at one checkpoint; it holds no fitness, which only the
    caller measures, from the policy shipped beside it.

    :param step: env steps trained so far.
    :param train_return: mean true return of the training episodes that finished since the
        previous checkpoint (``None`` if none did).
    :param components: mean per step of each reward component since the previous checkpoint.
    :param reward: mean per step of the reward trained on (the program's own reward) since
        the previous checkpoint.
    """

    step: int
    train_return: float | None
    components: dict[str, float] = field(default_factory=dict)
    reward: float | None = None


@dataclass
class Checkpoint:
    """The state of one training run at one point, measured.

    :param step: env steps trained so far.
    :param fitness: mean true return of the evaluation episodes.
    :param success_rate: share of successful evaluation episodes (``None`` when the task
        has no success rule).
    :param train_return: mean true return of the training episodes that finished since the
        previous checkpoint (``None`` if none did).
    :param components: mean per step of each reward component since the previous checkpoint.
    :param reward: mean per step of the reward trained on (the program's own reward) since
        the previous checkpoint; with ``fitness`` it shows whether the two move together.
    :param partial_success: how far the evaluation episodes got toward success
        (:attr:`rewardlab.agents.evaluation.Episodes.partial_success`); ``None`` when the
        task has no such rule.
    """

    step: int
    fitness: float
    success_rate: float | None
    train_return: float | None
    components: dict[str, float] = field(default_factory=dict)
    reward: float | None = None
    partial_success: float | None = None

    @classmethod
    def measured(cls, progress: Progress, fitness: float, success_rate: float | None,
                 partial_success: float | None = None) -> Checkpoint:
        """``progress`` with the fitness (success rate, partial success) the caller measured for it."""
        return cls(step=progress.step, fitness=fitness, success_rate=success_rate,
                   train_return=progress.train_return, components=dict(progress.components),
                   reward=progress.reward, partial_success=partial_success)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        """A checkpoint from :func:`dataclasses.asdict`'s output (a journal's, of any version).

        :param data: the plain data.
        :raises ValueError: a field is not of its type.
        """
        data = _mapping(data, "checkpoint")
        components = _mapping(data.get("components", {}), "checkpoint's components")
        return cls(
            step=_integer(data.get("step"), "checkpoint's step"),
            fitness=_number(data.get("fitness"), "checkpoint's fitness"),
            success_rate=_number(data.get("success_rate"), "success_rate", optional=True),
            train_return=_number(data.get("train_return"), "train_return", optional=True),
            components={str(name): _number(value, "component")
                        for name, value in components.items()},
            reward=_number(data.get("reward"), "reward", optional=True),
            partial_success=_number(data.get("partial_success"), "partial_success", optional=True),
        )


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _mapping(value: object, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"a training record's {name} is {_kind(value)}, not an object")
    return value


def is_number(value: object) -> bool:
    """Whether ``value``, read back as JSON, is a number (an int or a float, not a bool).

    :param value: the value as read.
    """
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: object, name: str, optional: bool = False) -> Any:
    """``value`` if it is a number (or ``None`` where ``optional``); a record read back from a
    journal or a worker is data of unknown type."""
    if is_number(value) or (value is None and optional):
        return value
    raise ValueError(f"a training record's {name} is {_kind(value)}, not a number")


def _integer(value: object, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"a training record's {name} is {_kind(value)}, not an integer")


def _text(value: object, name: str, optional: bool = False) -> Any:
    if (value is None and optional) or isinstance(value, str):
        return value
    raise ValueError(f"a training record's {name} is {_kind(value)}, not text")


def _list(value: object, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"a training record's {name} is {_kind(value)}, not a list")
    return value


@dataclass
class SeedRun:
    """One seed's training run.

    :param seed: the seed.
    :param checkpoints: what was measured, in order.
    :param wall_s: its training time in the worker (``None`` if it did not finish).
    """

    seed: int
    checkpoints: list[Checkpoint]
    wall_s: float | None


@dataclass
class TrainingRun:
    """The record of one training on a reward program, measured; JSON-serialisable with :meth:`to_json`.

    :param env_id: the env.
    :param ok: every seed trained to the end without a failure.
    :param fitness: mean over seeds of the last checkpoint's true return (``None`` if not ok).
    :param success_rate: same for the success rate, where the task has one.
    :param curve: the checkpoints averaged over seeds, index by index.
    :param seeds: each seed's run (what was measured before a failure is kept).
    :param failure: why it failed, or ``None``.
    :param steps: the training budget per seed.
    :param wall_s: wall time of the whole evaluation (sandbox start to result).
    :param peak_rss_mb: the worker's peak resident memory, when it reported one.
    :param peak_vm_mb: the worker's peak address space (what ``memory_mb`` limits), when it
        reported one.
    :param cpu_s: the CPU time the worker used (all threads), when it reported it.
    :param run_dir: where the run wrote its files (``None`` when a temporary one was removed).
    :param source: the program's source.
    :param notes: what was done to run the program as written (annotations or decorators
        removed, constants, per-state execution), for the report and the next prompt.
    :param compiled: whether the worker trained with PPO's compiled graphs.
    :param compile_note: why it trained eagerly although asked to compile ("" otherwise).
    :param stopped: where and why it was stopped early (its failure's kind is ``"stopped"``),
        or ``None``.
    """

    env_id: str
    ok: bool
    fitness: float | None
    success_rate: float | None
    curve: list[Checkpoint]
    seeds: list[SeedRun]
    failure: Failure | None
    steps: int
    wall_s: float
    peak_rss_mb: float | None
    peak_vm_mb: float | None
    cpu_s: float | None
    run_dir: str | None
    source: str
    notes: list[str] = field(default_factory=list)
    compiled: bool = False
    compile_note: str = ""
    stopped: Stop | None = None

    def rung_values(self) -> list[float]:
        """What early stopping's rungs compare, per checkpoint of the first seed (what its own
        stopper saw): :func:`~rewardlab.llm_reward.training.stopping.rung_value`."""
        points = self.seeds[0].checkpoints if self.seeds else self.curve
        return [rung_value(point.fitness, point.partial_success) for point in points]

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data."""
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        """The record as JSON text.

        :param indent: JSON indentation.
        """
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainingRun:
        """Rebuild a record from :meth:`to_dict`'s output, a journal's or a worker's: every
        field is typed, none trusted.

        :param data: the plain data.
        :raises ValueError: a field is not of its type, naming it.
        """
        data = _mapping(data, "result")
        stopped = data.get("stopped")
        return cls(
            env_id=_text(data.get("env_id"), "env_id"),
            ok=data.get("ok") is True,
            fitness=_number(data.get("fitness"), "fitness", optional=True),
            success_rate=_number(data.get("success_rate"), "success_rate", optional=True),
            curve=[Checkpoint.from_dict(point) for point in _list(data.get("curve"), "curve")],
            seeds=[
                SeedRun(_integer(run.get("seed"), "seed"),
                        [Checkpoint.from_dict(point)
                         for point in _list(run.get("checkpoints"), "checkpoints")],
                        _number(run.get("wall_s"), "seed's wall_s", optional=True))
                for run in (_mapping(run, "seed run") for run in _list(data.get("seeds"), "seeds"))
            ],
            failure=Failure.from_dict(data.get("failure")),
            steps=_integer(data.get("steps"), "steps"),
            wall_s=_number(data.get("wall_s"), "wall_s"),
            peak_rss_mb=_number(data.get("peak_rss_mb"), "peak_rss_mb", optional=True),
            peak_vm_mb=_number(data.get("peak_vm_mb"), "peak_vm_mb", optional=True),
            cpu_s=_number(data.get("cpu_s"), "cpu_s", optional=True),
            run_dir=_text(data.get("run_dir"), "run_dir", optional=True),
            source=_text(data.get("source"), "source"),
            notes=[cut(_text(note, "note"), MAX_REASON_CHARS)
                   for note in _list(data.get("notes", []), "notes")],
            compiled=data.get("compiled") is True,
            compile_note=cut(_text(data.get("compile_note", ""), "compile_note"), MAX_REASON_CHARS),
            stopped=Stop.from_dict(dict(_mapping(stopped, "stop"))) if stopped else None,
        )
