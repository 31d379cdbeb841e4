"""When a training compiles PPO: runs of at least :data:`AUTO_COMPILE_STEPS` env steps.

Compiling costs about a minute on a fresh cache and a second or two from the cache later
(``benchmarks/results/cold_start.md``), and trains several times faster than eagerly
(``benchmarks/results/ppo_speed_xeon_jax.md``, ``intrinsic_minigrid.md``): below the
threshold a run starts at once, eagerly, as short runs and quick starts should.
``rewardlab train`` asks it of one run; a search of the steps its trainings add up to
(one compile serves them all).

    >>> compiles(60_000), compiles(3_000_000)
    (False, True)
"""

from __future__ import annotations

__all__ = ["AUTO_COMPILE_STEPS", "compiles"]

#: the fewest env steps a run compiles PPO for, unless told otherwise
AUTO_COMPILE_STEPS = 2_000_000


def compiles(steps: int) -> bool:
    """Whether a PPO run of ``steps`` env steps compiles by default.

    :param steps: the run's env steps (per seed).
    """
    return steps >= AUTO_COMPILE_STEPS
