"""Checks and helpers that every learner in ``agents`` shares."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

Config = TypeVar("Config", bound="LearnerConfig")

BATCHED_ATTRIBUTES = ("num_envs", "device", "single_observation_space", "single_action_space", "step", "reset")


def check_batched(env: Any, learner: str, sb3_alternative: str) -> None:
    """Raise ``TypeError`` unless ``env`` follows the batched-env contract.

    :param env: the env given to the learner.
    :param learner: the learner's name, for the message.
    :param sb3_alternative: the SB3 algorithm to use on a plain ``gymnasium.Env`` instead.
    """
    missing = [attr for attr in BATCHED_ATTRIBUTES if not hasattr(env, attr)]
    if missing:
        raise TypeError(
            f"{learner} needs a batched torch env (docs/batched_envs.md); {type(env).__name__} "
            f"has no {', '.join(missing)}. Use rewardlab.envs.make(env_id, num_envs, device, seed), or wrap "
            f"a Gymnasium env in one of rewardlab.envs' adapters; for a plain gymnasium.Env use SB3's "
            f"{sb3_alternative}."
        )


def steps_bar(total: int) -> Any:
    """A tqdm bar over ``total`` env steps."""
    from tqdm import tqdm

    return tqdm(total=total, unit="steps")


def read_saved(path: Any, file_format: str, learner: str, env: Any, device: Any) -> tuple[dict, Any]:
    """Read a file a learner's ``save`` wrote, checking its format; resolve the load device.

    :param path: the file.
    :param file_format: the ``"format"`` entry the learner writes.
    :param learner: the learner's name, for the message.
    :param env: the env given to ``load``, or None.
    :param device: the device given to ``load``, or None: the env's device, else the CPU.
    :return: the saved data and the device to load onto.
    """
    import os

    import torch

    data = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(data, dict) or data.get("format") != file_format:
        raise ValueError(f"{os.fspath(path)!r} is not a file written by rewardlab's {learner}.save")
    if device is None:
        device = env.device if env is not None else "cpu"
    return data, device


class LearnerConfig:
    """What every learner's hyperparameter dataclass shares: copies with changes, and plain data.

    A subclass is a frozen dataclass whose fields are the hyperparameters and whose
    ``__post_init__`` checks them; ``learner`` names it in error messages.
    """

    learner: ClassVar[str]

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The hyperparameters' names, in field order."""
        return tuple(field.name for field in dataclasses.fields(cls))  # type: ignore[arg-type]

    def replace(self: Config, **changes: Any) -> Config:
        """A copy with ``changes``; a name that is not a hyperparameter raises ``ValueError``."""
        unknown = sorted(set(changes) - set(self.names()))
        if unknown:
            raise ValueError(
                f"unknown {self.learner} hyperparameter(s) {unknown}; known: {sorted(self.names())}"
            )
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_dict(self) -> dict[str, Any]:
        """Every hyperparameter, as plain data."""
        return {name: getattr(self, name) for name in self.names()}

    @classmethod
    def from_dict(cls: type[Config], data: Mapping[str, Any]) -> Config:
        """The config of :meth:`to_dict`'s data (missing names keep their defaults)."""
        return cls().replace(**data)

    def discount(self, component: str) -> float:
        """The discount the reward component ``component`` is learned with: the config's
        ``gamma`` (a learner with value heads of their own discounts says which one).

        Potential-based shaping ``gamma * phi(s') - phi(s)`` telescopes only at this discount,
        so whatever shapes a reward for this learner asks it here.

        :param component: a reward component's name (``"shaping"``).
        """
        return float(self.gamma)  # type: ignore[attr-defined]


class HyperparameterCheck:
    """The values of a config and the tests its checker applies, each naming what is wrong.

    :param config: a :class:`LearnerConfig` dataclass.
    """

    def __init__(self, config: LearnerConfig) -> None:
        self.values = {name: getattr(config, name) for name in config.names()}

    def fail(self, name: str, requirement: str) -> None:
        raise ValueError(f"{name} must be {requirement}, got {name}={self.values[name]!r}")

    def number(self, name: str) -> bool:
        """Whether the value is a finite int or float (not a bool)."""
        value = self.values[name]
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

    def integer(self, name: str) -> bool:
        """Whether the value is an int (not a bool)."""
        return isinstance(self.values[name], int) and not isinstance(self.values[name], bool)
