"""``info["reward_components"]``: how every reward-changing layer keeps its terms visible.

A step's components are a dict ``name -> value`` (a float for one env, an array or tensor
``(N,)`` for a batch). ``"extrinsic"`` is always there and is the env's own reward; each
wrapper adds its own names and never overwrites one an inner layer reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def with_components(
    components: Mapping[str, Any] | None, extrinsic: Any, added: Mapping[str, Any], fix: str
) -> dict[str, Any]:
    """A new components dict: ``components`` plus ``added``; the input is left as it was.

    :param components: what the inner layers reported, or None (then the env's own reward
        is the only one so far: ``{"extrinsic": extrinsic}``).
    :param extrinsic: the env's own reward, used when ``components`` is None or empty.
    :param added: the new terms, by name.
    :param fix: what the user should do when a name is taken, for the error message.
    :raises ValueError: a name in ``added`` is already a component.
    """
    updated = dict(components) if components else {"extrinsic": extrinsic}
    taken = sorted(set(added) & set(updated))
    if taken:
        raise ValueError(
            f"reward component(s) {taken} are already reported by an inner layer "
            f"(it reports {sorted(updated)}); {fix}"
        )
    updated.update(added)
    return updated
