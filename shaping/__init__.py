"""rewardlab shaping: potential-based reward shaping, exact at episode ends.

``PotentialShaping`` (Gymnasium env), ``PotentialShapingVector`` (Gymnasium vector
env), ``VecPotentialShaping`` (SB3 VecEnv) and ``BatchedPotentialShaping``
(rewardlab's batched torch envs) share one core, :class:`PotentialTracker`.
"""

from typing import Any

from rewardlab.shaping import potentials
from rewardlab.shaping.core import PotentialTracker, evaluate_potential
from rewardlab.shaping.wrappers import (
    BatchedPotentialShaping,
    PotentialShaping,
    PotentialShapingVector,
)

__all__ = [
    "BatchedPotentialShaping",
    "PotentialShaping",
    "PotentialShapingVector",
    "PotentialTracker",
    "VecPotentialShaping",
    "evaluate_potential",
    "potentials",
]


def __getattr__(name: str) -> Any:
    # Importing stable_baselines3 takes a while; only pay for it when asked.
    if name == "VecPotentialShaping":
        from rewardlab.shaping.sb3 import VecPotentialShaping

        return VecPotentialShaping
    raise AttributeError(f"module 'rewardlab.shaping' has no attribute {name!r}")
