"""The seeds every command takes: integers from 0 to 2**32 - 1.

Gymnasium refuses a negative seed and NumPy's global seeding (SB3's ``set_random_seed``)
one past 2**32 - 1, each with its own error deep inside a run; checking here first lets the
command say which flag was wrong before it writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_SEED = 2**32 - 1


def check_seeds(seeds: Iterable[object], flags: str) -> None:
    """Raise ``ValueError`` naming the first seed that is not in [0, 2**32 - 1] and ``flags``.

    :param seeds: the seeds given.
    :param flags: the flag(s) they came from, e.g. ``"--seed"`` or ``"--seed/--seeds"``.
    """
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise ValueError(
                f"seed {seed!r} is out of range for {flags}: a seed is an integer from 0 to "
                f"{MAX_SEED} (2**32 - 1), e.g. 0"
            )
