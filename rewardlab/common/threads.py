"""torch's intra-op threads for the span of rewardlab's hot loops, and back after.

rewardlab's batched steps and its learners' small networks run tensors of thousands of
rows through many short operators. A second intra-op thread barely shortens one of them,
and on a machine whose cores other work shares, every operator waits for a thread that is
not running: the batched envs' eager step is then several times slower than on one thread
(``benchmarks/results/threads_under_load.md``). So each env step and reset, and each
learner's ``learn``, runs at its own ``threads`` setting (default 1 on a CPU) and restores
the caller's setting when it returns: a user's ``torch.set_num_threads`` holds everywhere
outside them. ``threads=None`` leaves torch's setting as it is. On a GPU the setting has
no effect: the work is the device's, and torch's CPU threads are left alone.

Setting the count and giving it back costs about a microsecond (more on a busy machine),
small beside a step of a batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

Method = TypeVar("Method", bound=Callable[..., Any])

#: the ``threads`` setting of rewardlab's envs and learners unless a user gives another
DEFAULT_THREADS = 1


def check_threads(threads: int | None) -> int | None:
    """``threads`` if it is a valid setting: a positive int, or None.

    :param threads: torch intra-op threads for a hot loop, or None to leave torch's setting.
    :raises ValueError: anything else.
    """
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(
            f"threads={threads!r} is not a thread count: give a positive int, or None to "
            "leave torch's own setting (torch.set_num_threads)"
        )
    return threads


class torch_threads:
    """Run the block at ``threads`` torch intra-op threads on a CPU ``device``, then restore
    the count the caller had (also when the block raises).

    Nests: an inner block at the count already in force sets nothing. A class rather than a
    generator, because it wraps every env step: entering and leaving stay within a few
    hundred nanoseconds of the two ``torch.set_num_threads`` calls.

    :param threads: the thread count inside the block; None leaves torch's setting.
    :param device: where the block's tensors live; on any device but the CPU nothing changes.

    Example::

        >>> import torch
        >>> from rewardlab.common.threads import torch_threads
        >>> with torch_threads(1):
        ...     torch.get_num_threads()
        1
    """

    __slots__ = ("_before", "_threads")

    def __init__(self, threads: int | None, device: torch.device | str = "cpu") -> None:
        on_cpu = (
            device.type if isinstance(device, torch.device) else torch.device(device).type
        ) == "cpu"
        self._threads = threads if on_cpu else None
        self._before: int | None = None

    def __enter__(self) -> None:
        if self._threads is not None:
            before = torch.get_num_threads()
            if before != self._threads:
                self._before = before
                torch.set_num_threads(self._threads)

    def __exit__(self, *exception: object) -> None:
        if self._before is not None:
            torch.set_num_threads(self._before)
            self._before = None


def at_own_threads(method: Method) -> Method:
    """``method`` run at its object's ``threads`` on its ``device`` (:func:`torch_threads`):
    how an env's ``step`` and ``reset`` and a learner's ``learn`` hold their setting.

    :param method: a method of an object with ``threads`` and ``device`` attributes.
    """

    @functools.wraps(method)
    def at_threads(self: Any, *args: Any, **kwargs: Any) -> Any:
        with torch_threads(self.threads, self.device):
            return method(self, *args, **kwargs)

    return at_threads  # type: ignore[return-value]


class ThreadsSetting:
    """The ``threads`` setting of an object whose hot loops run at it (:func:`at_own_threads`):
    rewardlab's batched envs (``step``, ``reset``) and learners (``learn``)."""

    @property
    def threads(self) -> int | None:
        """torch's intra-op threads while this object's hot loops run: 1 by default (their
        short operators gain little from a second thread, and lose many times their time
        where other work shares the cores), None to run at torch's own setting. The
        caller's count is restored when each call returns; on a GPU nothing changes."""
        return self.__dict__.get("_threads", DEFAULT_THREADS)

    @threads.setter
    def threads(self, threads: int | None) -> None:
        self.__dict__["_threads"] = check_threads(threads)
