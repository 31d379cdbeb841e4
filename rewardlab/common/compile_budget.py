"""When a training compiles PPO: runs of at least :data:`AUTO_COMPILE_STEPS` env steps.

Compiling costs 33-50 s on a fresh cache (about 1-2 s from the cache later) and trains 3.4x
(CartPole-v1, 72k -> 247k steps/s) to 4.2x (Acrobot-v1, 26k -> 111k) faster on one core
(``benchmarks/results/ppo_speed_xeon_jax.md``), and 2.7x on MiniGrid with a count bonus
(``benchmarks/results/intrinsic_minigrid.md``): a run breaks even on a fresh cache at about
3.4M, 1.7M and 1.1M steps, and on a filled cache within the first 50k-200k. Below the
threshold a run starts at once, eagerly, as short runs and quick starts should: ``rewardlab
train``'s runs and a search's candidates (whose fork server, on a busy machine, compiled for
minutes before the first candidate trained).

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
