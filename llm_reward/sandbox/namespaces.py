"""A worker's processes and namespaces: the keeper, the namespace holder, the namespace's init
and the job, made by :func:`run_isolated` (see :mod:`~rewardlab.llm_reward.sandbox.isolation`
for what each does)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from rewardlab.llm_reward.sandbox.cgroups import limit_worker, remove_cgroup
from rewardlab.llm_reward.sandbox.quota import watch_quota
from rewardlab.llm_reward.sandbox.refusals import syscall_names
from rewardlab.llm_reward.sandbox.support import (
    c_library,
    check_errno,
    opted_out,
    report_failure,
    require_support,
)

__all__ = ["SANDBOX_HOSTNAME", "ZEROED_COUNTERS", "run_isolated"]

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_NAMESPACES = (
    _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS | _CLONE_NEWPID
)
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_PR_SET_PDEATHSIG = 1


def run_isolated(
    job: Callable[[], None],
    run_dir: str,
    quota_mb: float,
    max_tasks: int | None = None,
    cpus: float | None = None,
) -> None:
    """In the fork server's child (the keeper): run ``job`` isolated, exit as it exited.

    Never returns. The keeper's exit status is the job's (a signal that killed it is re-raised), or
    :data:`~rewardlab.llm_reward.sandbox.quota.QUOTA_EXIT` when the run directory outgrew
    ``quota_mb``.

    :param job: runs in the job process, after the namespaces are made and ``/proc`` is mounted; it
        calls :func:`~rewardlab.llm_reward.sandbox.isolation.confine` itself once it has imported
        what it needs.
    :param run_dir: the directory the job may write, whose size the keeper watches.
    :param quota_mb: the most the run directory may hold, in MB.
    :param max_tasks: the most processes and threads the worker's namespaces may hold together,
        through a ``pids`` cgroup of the worker's own where this process may make one (see
        :func:`~rewardlab.llm_reward.sandbox.cgroups.task_limit`); ``None``: no cgroup.
    :param cpus: the most CPUs the worker's tasks may use together, through a ``cpu`` cgroup's quota
        where this process may make one (see
        :func:`~rewardlab.llm_reward.sandbox.cgroups.cpu_limit`); ``None``: none.
    """
    status = 1 << 8  # a wait status: exit code 1, should the keeper itself fail
    cgroups: list[str] = []
    try:
        _die_with_parent()
        require_support()
        # the job names its companion's refused calls once it may not call libseccomp
        syscall_names()
        if opted_out():
            job()  # the loudly named opt-out: no namespaces on this kernel
            os._exit(0)
        outside_uid, outside_gid = os.geteuid(), os.getegid()
        unshared_r, unshared_w = os.pipe()
        mapped_r, mapped_w = os.pipe()
        holder = os.fork()
        if holder == 0:
            os.close(unshared_r)
            os.close(mapped_w)
            _namespace_holder(job, unshared_w, mapped_r)
        os.close(unshared_w)
        os.close(mapped_r)
        if os.read(unshared_r, 1) != b"u":
            os.waitpid(holder, 0)
            os._exit(1)
        _write_id_maps(holder, outside_uid, outside_gid)
        # before the holder forks: its every descendant is counted
        cgroups = limit_worker(holder, max_tasks, cpus)
        os.write(mapped_w, b"m")
        os.close(mapped_w)
        status = watch_quota(holder, run_dir, quota_mb)
    except BaseException as error:  # noqa: B036 - the keeper must exit, never return
        report_failure(error, "sandbox keeper")
    for cgroup in cgroups:
        remove_cgroup(cgroup)  # the holder is reaped: every task of the namespaces is gone
    _exit_like(status)


def _namespace_holder(job: Callable[[], None], unshared_w: int, mapped_r: int) -> None:
    status = 1 << 8  # a wait status: exit code 1
    try:
        _die_with_parent()
        check_errno(c_library().unshare(_NAMESPACES),
                    "unshare(user, mount, network, IPC, UTS, PID namespaces)")
        os.write(unshared_w, b"u")
        os.close(unshared_w)
        if os.read(mapped_r, 1) != b"m":
            os._exit(1)
        os.close(mapped_r)
        init = os.fork()  # PID 1 of the new PID namespace
        if init == 0:
            _namespace_init(job)
        _, status = os.waitpid(init, 0)
    except BaseException as error:  # noqa: B036
        report_failure(error, "sandbox namespaces")
    _exit_like(status)


#: the host name inside a worker's namespaces
SANDBOX_HOSTNAME = b"sandbox"


def _namespace_init(job: Callable[[], None]) -> None:
    """PID 1 of the new PID namespace: mount its ``/proc``, run the job as PID 2, exit as it did.

    The job is not PID 1 itself because the kernel spares PID 1 the signals it has no
    handler for, ``SIGXCPU`` of the CPU-time limit among them.
    """
    status = 1 << 8
    try:
        _die_with_parent()
        libc = c_library()
        check_errno(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None),
                    "mount --make-rprivate /")
        fresh = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        check_errno(libc.mount(b"proc", b"/proc", b"proc", fresh, None),
               "mount a fresh /proc")
        # the UTS namespace starts with the machine's name, which a program would read in uname
        check_errno(libc.sethostname(SANDBOX_HOSTNAME, len(SANDBOX_HOSTNAME)), "sethostname")
        _zero_namespace_counters()
        worker = os.fork()
        if worker == 0:
            try:
                _die_with_parent()
                job()
            finally:
                os._exit(1)
        _, status = os.waitpid(worker, 0)
    except BaseException as error:  # noqa: B036
        report_failure(error, "sandbox init")
    _exit_like(status)


#: per-user kernel objects the worker needs none of, set to 0 for its user namespace: the
#: kernel charges them to the caller's user outside as well, so a worker that held every
#: inotify instance made the caller's own inotify_init1 fail (red-team finding)
ZEROED_COUNTERS = (
    "max_inotify_instances", "max_inotify_watches", "max_fanotify_groups", "max_fanotify_marks",
    "max_user_namespaces", "max_mnt_namespaces", "max_net_namespaces", "max_pid_namespaces",
    "max_ipc_namespaces", "max_uts_namespaces", "max_cgroup_namespaces", "max_time_namespaces",
)


def _zero_namespace_counters() -> None:
    """Set the user namespace's ``/proc/sys/user/max_*`` counters of :data:`ZEROED_COUNTERS`
    to 0 (those this kernel has); the user namespace's root may, before it drops its
    capabilities. Where one cannot be written, the seccomp filters still refuse the calls."""
    for name in ZEROED_COUNTERS:
        try:
            with open(f"/proc/sys/user/{name}", "w") as counter:
                counter.write("0")
        except FileNotFoundError:
            continue
        except OSError as error:
            report_failure(error, f"sandbox init: /proc/sys/user/{name} stays as it was")


def _write_id_maps(pid: int, uid: int, gid: int) -> None:
    with open(f"/proc/{pid}/setgroups", "w") as setgroups:
        setgroups.write("deny")
    with open(f"/proc/{pid}/uid_map", "w") as uid_map:
        uid_map.write(f"0 {uid} 1")
    with open(f"/proc/{pid}/gid_map", "w") as gid_map:
        gid_map.write(f"0 {gid} 1")


def _exit_like(wait_status: int) -> None:
    """Exit as a child that ended with ``wait_status`` did: same code, or the same signal.

    PID 1 of a namespace cannot kill itself with a signal, so there a signal ``N`` becomes
    exit code ``128 + N``, which the namespace holder turns back into the signal.
    """
    passed_on = os.WIFEXITED(wait_status) and 128 < os.WEXITSTATUS(wait_status) < 128 + 65
    if passed_on and os.getpid() != 1:
        wait_status = os.WEXITSTATUS(wait_status) - 128  # a signal that init passed on as a code
    if os.WIFSIGNALED(wait_status) and os.getpid() == 1:
        os._exit(128 + os.WTERMSIG(wait_status))
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), number)
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else 1)


def _die_with_parent() -> None:
    check_errno(c_library().prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0),
                "prctl(PR_SET_PDEATHSIG)")
