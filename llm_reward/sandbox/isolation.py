"""Kernel isolation of a sandbox worker, and the job's last step before untrusted code runs.

Python cannot guard Python, so everything here is enforced by the kernel: namespaces, a
private ``/proc``, Landlock, seccomp, no capabilities. A worker is four processes, forked
from the fork server by :func:`~rewardlab.llm_reward.sandbox.namespaces.run_isolated`:

1. the **keeper**, outside every namespace: writes the user namespace's id maps, watches
   the run directory's size (the disk quota, :mod:`~rewardlab.llm_reward.sandbox.quota`),
   puts the worker in cgroups of its own (:mod:`~rewardlab.llm_reward.sandbox.cgroups`) and
   reports how the worker ended;
2. the **namespace holder**: ``unshare`` of the user, mount, network, IPC, UTS and PID
   namespaces. Root inside maps to the caller's own user outside, one id only (so the
   worker reaches the run directory wherever the caller made it), and the job drops
   every capability: being uid 0 of its namespace gives it nothing the caller's user
   lacks, and Landlock decides what of that user's files it may touch
   (:mod:`~rewardlab.llm_reward.sandbox.readable`);
3. the namespace's **init** (PID 1): a private mount of a fresh ``/proc`` (no other
   process of the machine is visible, nor its ``environ``), the host name
   :data:`~rewardlab.llm_reward.sandbox.namespaces.SANDBOX_HOSTNAME` in place of the
   machine's, and the user namespace's inotify, fanotify and namespace counters set to 0
   (:data:`~rewardlab.llm_reward.sandbox.namespaces.ZEROED_COUNTERS`); it runs
4. the **job** (PID 2), which ends in :func:`confine` (here): Landlock rules for reads as
   well as writes, all capabilities dropped, ``PR_SET_NO_NEW_PRIVS`` and a seccomp filter
   (:mod:`~rewardlab.llm_reward.sandbox.seccomp`; a companion's refused calls are named
   by :mod:`~rewardlab.llm_reward.sandbox.refusals`).

When init dies, the kernel kills every process left in its PID namespace;
each of them dies with its parent (``PR_SET_PDEATHSIG``), so killing the keeper
ends the whole tree. The network namespace has only a loopback that is down: no TCP,
no UDP, no abstract Unix sockets of the host.

:func:`kernel_support` (:mod:`~rewardlab.llm_reward.sandbox.support`) says which of these
the kernel offers; a worker refuses to run when one is missing, unless the caller asked for
``REWARDLAB_UNSAFE_NO_ISOLATION=1``. :func:`describe_isolation` says what a worker gets here.
"""
from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import socket
from collections.abc import Iterable
from typing import Any

from rewardlab.llm_reward.sandbox.cgroups import cpu_limit, task_limit
from rewardlab.llm_reward.sandbox.refusals import RefusalWatch
from rewardlab.llm_reward.sandbox.seccomp import (
    NO_LISTENER,
    REFUSED_SIGNAL,
    allow_computation_only,
    load_deny_list,
    notification_supported,
)
from rewardlab.llm_reward.sandbox.support import (
    UNSAFE_OPT_OUT,
    c_library,
    check_errno,
    kernel_support,
    opted_out,
)

__all__ = [
    "REFUSED_SIGNAL", "UNSAFE_OPT_OUT", "RefusalWatch", "confine", "cpu_limit",
    "describe_isolation", "kernel_support", "make_undumpable", "task_limit",
]

_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 4, 38, 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def confine(
    run_dir: str | None,
    readable: Iterable[str],
    devices: Iterable[str] = (),
    companion: socket.socket | None = None,
) -> None:
    """The last step before untrusted code runs: Landlock, no capabilities, seccomp.

    :param run_dir: the only directory the job may write; None: none at all.
    :param readable: what it may read (see
        :func:`~rewardlab.llm_reward.sandbox.readable.readable_roots`).
    :param devices: device files it may open read-write with ``ioctl`` (see
        :func:`~rewardlab.llm_reward.sandbox.readable.gpu_devices`).
    :param companion: given for a job's companion, its channel to the job: its seccomp
        filter is then the allowlist alone (:func:`allow_computation_only`), whose refusals
        are named to the job over the channel; otherwise a deny list, answered ``EPERM``.
        Not both: filters stack and the kernel takes the strictest answer, so a deny list's
        ``EPERM`` would come before the allowlist's notice, and a refused call would go unseen.
    """
    from rewardlab.llm_reward.sandbox.landlock import restrict

    if opted_out():
        if companion is not None:
            companion.sendall(NO_LISTENER)
        return
    restrict(writable=[run_dir] if run_dir else [], readable=list(readable), devices=list(devices))
    _drop_capabilities()
    check_errno(c_library().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    if companion is None:
        load_deny_list()
    else:
        _bound_output()
        allow_computation_only(companion)


#: what a job's companion may add to the worker's log (its standard output and error), in MB
COMPANION_OUTPUT_MB = 8


def _bound_output() -> None:
    """Let this process write at most :data:`COMPANION_OUTPUT_MB` more to its log
    (``RLIMIT_FSIZE`` past the log's size now; ``SIGXFSZ`` ignored, so that a write past it
    fails with ``EFBIG`` rather than killing the process). The log stays in a search's
    candidate folder: a program that printed a megabyte per call left 66 MB there after a
    4,096-step run, and up to the disk quota (1 GB by default) per candidate (red-team finding)."""
    try:
        size = os.fstat(1).st_size
    except OSError:
        size = 0
    cap = size + COMPANION_OUTPUT_MB * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _drop_capabilities() -> None:
    """No capabilities, not even inside the user namespace: empty bounding, effective,
    permitted and inheritable sets."""
    libc = c_library()
    for capability in range(64):
        dropped = libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) >= 0
        if not dropped and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(_LINUX_CAPABILITY_VERSION_3, 0), (Data * 2)()
    check_errno(libc.capset(ctypes.byref(header), data), "capset(no capabilities)")


def make_undumpable() -> None:
    """``PR_SET_DUMPABLE`` 0: a process of the same user (a job's companion) cannot open
    this one's memory through ``/proc``."""
    check_errno(c_library().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 0)")


def describe_isolation() -> dict[str, Any]:
    """What a worker gets on this machine, for reports and benchmarks."""
    from rewardlab.llm_reward.sandbox.landlock import landlock_abi

    support = kernel_support()
    return {
        "namespaces": support["namespaces"] is None,
        "landlock_abi": landlock_abi(),
        "seccomp": support["seccomp"] is None,
        "refused_calls_named": notification_supported(),
        "opted_out": os.environ.get(UNSAFE_OPT_OUT) == "1",
        "task_limit": task_limit(),
        "cpu_limit": cpu_limit(),
    }
