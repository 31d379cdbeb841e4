"""The statistics a reviewer expects of RL results over seeds (rliable's): IQM, bootstrap
intervals and the probability of improvement. Shared by ``rewardlab compare`` and the search's report."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["BOOTSTRAP_SAMPLES", "bootstrap_ci", "iqm", "probability_of_improvement"]

BOOTSTRAP_SAMPLES = 2000


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the middle 50% (scipy's trim_mean(values, 0.25))."""
    values = np.sort(values, axis=axis)
    n = values.shape[axis]
    cut = int(0.25 * n)
    return np.take(values, range(cut, n - cut), axis=axis).mean(axis=axis)


def bootstrap_ci(
    values: np.ndarray, statistic: Callable[..., np.ndarray], rng: np.random.Generator, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over the seeds in ``values``."""
    samples = values[rng.integers(0, len(values), size=(BOOTSTRAP_SAMPLES, len(values)))]
    stats = statistic(samples, axis=1)
    low, high = np.quantile(stats, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) for a run of X against a run of Y, ties counting half (the Mann-Whitney U
    statistic over all pairs of seeds, as rliable reports it)."""
    x, y = np.asarray(x, dtype=float)[:, None], np.asarray(y, dtype=float)[None, :]
    return float(((x > y) + 0.5 * (x == y)).mean())
