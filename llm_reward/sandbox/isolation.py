"""Kernel isolation of a sandbox worker: namespaces, a private ``/proc``, Landlock, seccomp, no capabilities.

Python cannot guard Python, so everything here is enforced by the kernel. A worker is
four processes, forked from the fork server (see :func:`run_isolated`):

1. the **keeper**, outside every namespace: writes the user namespace's id maps,
   watches the run directory's size (the disk quota) and reports how the worker ended;
2. the **namespace holder**: ``unshare`` of the user, mount, network, IPC, UTS and PID
   namespaces. Root inside maps to the caller's own user outside, one id only (so the
   worker reaches the run directory wherever the caller made it), and the job drops
   every capability: being uid 0 of its namespace gives it nothing the caller's user
   lacks, and Landlock decides what of that user's files it may touch;
3. the namespace's **init** (PID 1): a private mount of a fresh ``/proc`` (no other
   process of the machine is visible, nor its ``environ``), the host name
   :data:`SANDBOX_HOSTNAME` in place of the machine's, and the user namespace's
   inotify, fanotify and namespace counters set to 0 (:data:`ZEROED_COUNTERS`); it runs
4. the **job** (PID 2), which ends in :func:`confine`: Landlock rules for reads as well
   as writes, all capabilities dropped, ``PR_SET_NO_NEW_PRIVS`` and a seccomp filter.

When init dies, the kernel kills every process left in its PID namespace;
each of them dies with its parent (``PR_SET_PDEATHSIG``), so killing the keeper
ends the whole tree. The network namespace has only a loopback that is down: no TCP,
no UDP, no abstract Unix sockets of the host.

:func:`kernel_support` says which of these the kernel offers; a worker refuses to run
when one is missing, unless the caller asked for ``REWARDLAB_UNSAFE_NO_ISOLATION=1``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import functools
import math
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["IsolationUnavailable", "RefusalWatch", "confine", "cpu_limit", "gpu_devices", "kernel_support",
           "readable_roots", "run_isolated", "syscall_name", "task_limit"]

# An explicit, loudly named opt-out for kernels that lack a feature (never the default).
UNSAFE_OPT_OUT = "REWARDLAB_UNSAFE_NO_ISOLATION"
# Exit code of the keeper when the run directory outgrew its quota.
QUOTA_EXIT = 90
QUOTA_POLL_S = 0.05

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_CLONE_THREAD = 0x00010000
_NAMESPACES = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS | _CLONE_NEWPID
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 1, 4, 38, 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class IsolationUnavailable(RuntimeError):
    """The kernel lacks a feature the sandbox needs; the message names it."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


# ---------------------------------------------------------------- what the kernel offers
@functools.cache  # the kernel's features do not change while a process runs
def kernel_support() -> dict[str, str | None]:
    """Each feature the sandbox uses, mapped to ``None`` when available or to why it is not.

    Features: ``namespaces`` (user, PID, network, mount, IPC), ``landlock`` (ABI 1 or
    newer) and ``seccomp`` (libseccomp through ``pyseccomp``).
    """
    from rewardlab.llm_reward.sandbox.landlock import landlock_abi

    support: dict[str, str | None] = {"namespaces": None, "landlock": None, "seccomp": None}
    if not sys.platform.startswith("linux"):
        return dict.fromkeys(support, f"not Linux ({sys.platform})")
    try:
        with open("/proc/sys/user/max_user_namespaces") as limit:
            if int(limit.read().strip() or 0) == 0:
                support["namespaces"] = "user namespaces are disabled (user.max_user_namespaces = 0)"
    except OSError:
        support["namespaces"] = "the kernel has no user namespaces (/proc/sys/user/max_user_namespaces)"
    try:
        with open("/proc/sys/kernel/unprivileged_userns_clone") as switch:
            if os.geteuid() != 0 and switch.read().strip() == "0":
                support["namespaces"] = "unprivileged user namespaces are off (kernel.unprivileged_userns_clone = 0)"
    except OSError:
        pass
    if landlock_abi() < 1:
        support["landlock"] = "the kernel has no Landlock (Linux 5.13+, enabled in the LSM list)"
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as error:
        support["seccomp"] = f"libseccomp is not usable through pyseccomp ({error})"
    return support


def _opted_out() -> bool:
    """Whether to run without isolation: the kernel lacks a feature and the user opted out."""
    return os.environ.get(UNSAFE_OPT_OUT) == "1" and any(kernel_support().values())


def _require_support() -> None:
    missing = {name: why for name, why in kernel_support().items() if why is not None}
    if missing and os.environ.get(UNSAFE_OPT_OUT) != "1":
        details = "; ".join(f"{name}: {why}" for name, why in missing.items())
        raise IsolationUnavailable(
            f"refusing to run untrusted code without kernel isolation ({details}). Run on a Linux "
            f"kernel that has them, or set {UNSAFE_OPT_OUT}=1 to run reward programs with the "
            "Python-level checks only, which do not stop a program written to escape"
        )


# ------------------------------------------------------------- the worker's processes
def run_isolated(
    job: Callable[[], None], run_dir: str, quota_mb: float, max_tasks: int | None = None, cpus: float | None = None
) -> None:
    """In the fork server's child (the keeper): run ``job`` isolated, exit as it exited.

    Never returns. The keeper's exit status is the job's (a signal that killed it is
    re-raised), or :data:`QUOTA_EXIT` when the run directory outgrew ``quota_mb``.

    :param job: runs in the job process, after the namespaces are made and ``/proc`` is
        mounted; it calls :func:`confine` itself once it has imported what it needs.
    :param run_dir: the directory the job may write, whose size the keeper watches.
    :param quota_mb: the most the run directory may hold, in MB.
    :param max_tasks: the most processes and threads the worker's namespaces may hold
        together, through a ``pids`` cgroup of the worker's own where this process may make
        one (see :func:`task_limit`); ``None``: no cgroup.
    :param cpus: the most CPUs the worker's tasks may use together, through a ``cpu``
        cgroup's quota where this process may make one (see :func:`cpu_limit`); ``None``: none.
    """
    status = 1 << 8  # a wait status: exit code 1, should the keeper itself fail
    cgroups: list[str] = []
    try:
        _die_with_parent()
        _require_support()
        syscall_names()  # the job names its companion's refused calls once it may not call libseccomp
        if _opted_out():
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
        cgroups = _limit_worker(holder, max_tasks, cpus)
        os.write(mapped_w, b"m")
        os.close(mapped_w)
        status = _watch(holder, run_dir, quota_mb)
    except BaseException as error:  # noqa: B036 - the keeper must exit, never return
        _report(error, "sandbox keeper")
    for cgroup in cgroups:
        _remove_cgroup(cgroup)  # the holder is reaped: every task of the namespaces is gone
    _exit_like(status)


def _namespace_holder(job: Callable[[], None], unshared_w: int, mapped_r: int) -> None:
    status = 1 << 8  # a wait status: exit code 1
    try:
        _die_with_parent()
        _check(_libc().unshare(_NAMESPACES), "unshare(user, mount, network, IPC, UTS, PID namespaces)")
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
        _report(error, "sandbox namespaces")
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
        libc = _libc()
        _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
        _check(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None),
               "mount a fresh /proc")
        # the UTS namespace starts with the machine's name, which a program would read in uname
        _check(libc.sethostname(SANDBOX_HOSTNAME, len(SANDBOX_HOSTNAME)), "sethostname")
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
        _report(error, "sandbox init")
    _exit_like(status)


#: per-user kernel objects the worker needs none of, set to 0 for its user namespace: the
#: kernel charges them to the caller's user outside as well, so a worker that held every
#: inotify instance made the caller's own inotify_init1 fail (red-team finding)
ZEROED_COUNTERS = ("max_inotify_instances", "max_inotify_watches", "max_fanotify_groups", "max_fanotify_marks",
                   "max_user_namespaces", "max_mnt_namespaces", "max_net_namespaces", "max_pid_namespaces",
                   "max_ipc_namespaces", "max_uts_namespaces", "max_cgroup_namespaces", "max_time_namespaces")


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
            _report(error, f"sandbox init: /proc/sys/user/{name} stays as it was")


def _write_id_maps(pid: int, uid: int, gid: int) -> None:
    with open(f"/proc/{pid}/setgroups", "w") as setgroups:
        setgroups.write("deny")
    with open(f"/proc/{pid}/uid_map", "w") as uid_map:
        uid_map.write(f"0 {uid} 1")
    with open(f"/proc/{pid}/gid_map", "w") as gid_map:
        gid_map.write(f"0 {gid} 1")


def _watch(holder: int, run_dir: str, quota_mb: float) -> int:
    """Wait for the holder; kill it if the run directory grows past the quota (or cannot be
    measured: see :func:`directory_bytes`)."""
    quota = int(quota_mb * 2**20)
    ended = process_handle(holder)  # readable once the holder has exited: no wait for the next look
    try:
        while True:
            pid, status = os.waitpid(holder, os.WNOHANG)
            over = directory_bytes(run_dir) > quota  # also once the job has ended: no result past it
            if pid == holder and not over:
                return status
            if over:
                if pid != holder:
                    os.kill(holder, signal.SIGKILL)
                    os.waitpid(holder, 0)
                os.write(2, f"sandbox: the run directory outgrew its quota of {quota_mb:g} MB (or holds more "
                            f"than {MAX_ENTRIES:,} entries, or folders too deep to measure)\n".encode())
                return QUOTA_EXIT << 8
            if ended is None:
                time.sleep(QUOTA_POLL_S)
            else:
                select.select([ended], [], [], QUOTA_POLL_S)
    finally:
        if ended is not None:
            os.close(ended)


def process_handle(pid: int) -> int | None:
    """A descriptor that turns readable when the child ``pid`` exits (``pidfd_open``, Linux
    5.3+), for waiting on it with ``select`` beside other things; None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


# ------------------------------------------------------- the worker's cgroups: tasks and CPU
#: name of the worker's own cgroups, followed by the keeper's process id
CGROUP_PREFIX = "rewardlab-worker-"
#: the period of a worker's CPU quota (cgroup v1 ``cpu.cfs_period_us``, v2 ``cpu.max``), in µs
CPU_PERIOD_US = 100_000
_CONTROLS = {"pids": ("pids.max",), "cpu": ("cpu.max", "cpu.cfs_quota_us")}


def _cgroup_parent(controller: str) -> str | None:
    """The folder of this process's cgroup in ``controller``'s hierarchy (v1 or v2), or ``None``."""
    try:
        with open("/proc/self/cgroup") as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):  # cgroup v1: a hierarchy of its own
            for mount in (controllers, controller):  # cpu is often mounted as "cpu,cpuacct"
                folder = os.path.join("/sys/fs/cgroup", mount, path.lstrip("/"))
                if os.path.isdir(folder):
                    return folder
            return None
    for line in lines:
        if line.startswith("0::"):  # cgroup v2, where its controllers list this one
            folder = os.path.join("/sys/fs/cgroup", line[3:].lstrip("/"))
            try:
                with open(os.path.join(folder, "cgroup.controllers")) as file:
                    return folder if controller in file.read().split() else None
            except OSError:
                return None
    return None


def _new_cgroup(controller: str, name: str) -> str | None:
    """A new cgroup of ``controller`` below this process's own, or ``None`` where none can be made."""
    parent = _cgroup_parent(controller)
    if parent is None:
        return None
    _remove_stale_cgroups(parent)
    folder = os.path.join(parent, name)
    try:
        os.mkdir(folder, 0o755)
    except FileExistsError:
        pass  # left by a keeper of the same process id, gone (or the other controller's, on v2)
    except OSError:
        return None

    def controlled() -> bool:
        return any(os.path.exists(os.path.join(folder, control)) for control in _CONTROLS[controller])

    if not controlled():  # v2: the parent does not hand the controller down
        try:
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as control:
                control.write(f"+{controller}")
        except OSError:
            pass
    if not controlled():
        _remove_cgroup(folder, tries=1)
        return None
    return folder


def _remove_stale_cgroups(parent: str) -> None:
    """Remove the cgroups of keepers that are gone (killed before they could remove theirs)."""
    try:
        names = [name for name in os.listdir(parent) if name.startswith(CGROUP_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(CGROUP_PREFIX):]
        if not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        try:
            os.rmdir(os.path.join(parent, name))  # fails while a task is still in it
        except OSError:
            pass


def _remove_cgroup(folder: str, tries: int = 50) -> None:
    for _ in range(tries):
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)  # a killed task leaves its cgroup a moment after its parent reaps it


def remove_keeper_cgroup(keeper: int) -> None:
    """Remove the cgroups of a reaped keeper (one killed before it could), if empty."""
    for controller in _CONTROLS:
        parent = _cgroup_parent(controller)
        if parent is not None:
            _remove_cgroup(os.path.join(parent, f"{CGROUP_PREFIX}{keeper}"), tries=1)


def _write_cpu_quota(folder: str, cpus: float) -> None:
    quota = max(1000, int(cpus * CPU_PERIOD_US))
    if os.path.exists(os.path.join(folder, "cpu.max")):  # v2
        with open(os.path.join(folder, "cpu.max"), "w") as limit:
            limit.write(f"{quota} {CPU_PERIOD_US}")
        return
    with open(os.path.join(folder, "cpu.cfs_period_us"), "w") as period:
        period.write(str(CPU_PERIOD_US))
    with open(os.path.join(folder, "cpu.cfs_quota_us"), "w") as limit:
        limit.write(str(quota))


def _limit_worker(holder: int, max_tasks: int | None, cpus: float | None) -> list[str]:
    """Move the namespace holder into cgroups of its own: a ``pids`` one that holds at most
    ``max_tasks`` tasks (the holder, init, the job, its companion and their threads) and a
    ``cpu`` one whose quota is ``cpus`` CPUs, all its threads together (so a program's busy
    threads slow its own candidate, never a neighbour). Each is skipped where this process
    cannot make it (then only ``RLIMIT_NPROC`` in the job limits the tasks, which does not
    bind when the caller is root, and nothing bounds the CPU share: see :func:`cpu_limit`).

    :return: the cgroups made, to remove once the holder is reaped.
    """
    made = []
    for controller, value in (("pids", max_tasks), ("cpu", cpus)):
        if value is None:
            continue
        folder = _new_cgroup(controller, f"{CGROUP_PREFIX}{os.getpid()}")
        if folder is None:
            continue
        try:
            if controller == "pids":
                with open(os.path.join(folder, "pids.max"), "w") as limit:
                    limit.write(str(int(value)))
            else:
                _write_cpu_quota(folder, float(value))
            with open(os.path.join(folder, "cgroup.procs"), "w") as procs:
                procs.write(str(holder))
        except OSError as error:
            _report(error, f"sandbox keeper: no {controller} cgroup")
            _remove_cgroup(folder, tries=1)
            continue
        made.append(folder)
    return made


def _can_make_cgroup(controller: str) -> bool:
    folder = _new_cgroup(controller, f"{CGROUP_PREFIX}{os.getpid()}")
    if folder is None:
        return False
    _remove_cgroup(folder, tries=1)
    return True


@functools.cache
def task_limit() -> str | None:
    """What caps the number of a worker's threads and processes here: ``"cgroup pids.max"``
    (a ``pids`` cgroup per worker, where the caller may make one), ``"RLIMIT_NPROC"`` (the
    caller is not root: the limit counts the tasks of the worker's own user namespace), or
    ``None`` (the caller is root and may make no ``pids`` cgroup: ``RLIMIT_NPROC`` does not
    bind a task whose user is root outside, and only the address-space limit bounds the
    number of threads)."""
    if _can_make_cgroup("pids"):
        return "cgroup pids.max"
    return "RLIMIT_NPROC" if os.getuid() != 0 else None


@functools.cache
def cpu_limit() -> str | None:
    """What bounds a worker's share of the CPUs here: ``"cgroup cpu quota"`` (a ``cpu`` cgroup
    per worker with a quota of its ``threads`` CPUs, where the caller may make one: cgroup
    v1, or v2 with the ``cpu`` controller delegated), or ``None``: nothing does, and a
    program's busy threads take CPU time from the other candidates."""
    return "cgroup cpu quota" if _can_make_cgroup("cpu") else None


#: the most files and folders a run directory may hold: each look of the quota's watchdog
#: takes longer the more there are, and a worker could write between two slow looks
MAX_ENTRIES = 20_000


def directory_bytes(path: str) -> float:
    """Disk space used beneath ``path``, counting allocated blocks, following no link.

    ``math.inf`` where what is beneath cannot be measured in full: more than
    :data:`MAX_ENTRIES` entries, or an entry the scan cannot reach (a path longer than the
    kernel's limit, below a chain of folders a worker made by changing into each one; a
    folder it made without permissions). A worker could otherwise hide what it writes there
    from the watchdog (a red-team finding: 1.6 GB under a 40 MB quota).
    """
    total, entries, pending = 0, 0, [path]
    while pending:
        try:
            with os.scandir(pending.pop()) as listing:
                for entry in listing:
                    entries += 1
                    if entries > MAX_ENTRIES:
                        return math.inf
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed since it was listed
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(entry.path)
        except FileNotFoundError:
            continue
        except OSError:
            return math.inf
    return total


def _report(error: BaseException, stage: str) -> None:
    """Write why a stage of the worker failed to its standard error (``worker.log``)."""
    try:
        os.write(2, f"{stage}: {error}\n".encode(errors="replace"))
    except OSError:
        pass


def _exit_like(wait_status: int) -> None:
    """Exit as a child that ended with ``wait_status`` did: same code, or the same signal.

    PID 1 of a namespace cannot kill itself with a signal, so there a signal ``N`` becomes
    exit code ``128 + N``, which the namespace holder turns back into the signal.
    """
    if os.WIFEXITED(wait_status) and os.getpid() != 1 and 128 < os.WEXITSTATUS(wait_status) < 128 + 65:
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
    _check(_libc().prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


# ------------------------------------------------------------------- inside the job
def readable_roots(extra: Iterable[str] = (), kernel_views: bool = True) -> list[str]:
    """What a worker may read, from an allowlist: Python, the modules imported, system libraries.

    Python's own libraries (:func:`library_roots`: the standard library, the site-packages
    folders on the import path, the shared libraries beside them) and the interpreter's
    file, never a whole installation prefix, which may hold a ``pip.conf`` with an index
    token, a conda env's saved variables or a virtual environment's scripts; for every
    module imported outside them, its package's folder (or a plain module's file), as an
    editable install maps rewardlab's packages to a checkout; the system's shared libraries
    and the few files the C libraries open (the loader cache, time zones, CPU facts,
    ``/dev/null`` and the random devices). No folder merely on ``sys.path``: a script's
    folder (which ``python script.py`` and Ray's workers put there), the working directory
    or a project's root stays unreadable, the ``.env`` beside the script included; nothing
    under ``/home``, ``/root``, ``/tmp`` or the rest of ``/etc``.

    :param extra: more paths (device files, CUDA's ``/sys`` folders).
    :param kernel_views: whether the namespace's ``/proc`` and the cgroup tree are readable.
        A job's companion, which runs the untrusted program, gets neither: they would show
        it the mount table (the machine's folder layout), the cgroups' names and the job's
        command line, and nothing the program computes needs them (its libraries are loaded
        before it is confined).
    """
    libraries = library_roots()
    roots = libraries | {os.path.realpath(sys.executable)}
    roots |= _imported_outside(libraries)
    roots |= {"/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/usr/share/zoneinfo",
              "/etc/ld.so.cache", "/etc/localtime", "/sys/devices/system/cpu",
              "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"}
    if kernel_views:
        roots |= {"/proc", "/sys/fs/cgroup"}
    roots |= set(extra)
    return sorted(root for root in roots if os.path.exists(root))


def library_roots() -> set[str]:
    """The folders of Python's libraries, real paths (Landlock's rules hold for what a path
    leads to): see :func:`_library_folders`."""
    return {os.path.realpath(path) for path in _library_folders()}


def _library_folders() -> set[str]:
    """The standard library (its extension modules included), each site-packages folder on
    the import path, and each prefix's ``lib`` folders, where a conda env keeps the shared
    libraries its packages load (a virtual environment's holds its site-packages only); as
    written, links unresolved."""
    paths = sysconfig.get_paths()
    found = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    found |= {path for path in sys.path
              if os.path.basename(path) in ("site-packages", "dist-packages")}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        found |= {os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")}
    return {os.path.normpath(path) for path in found if path and os.path.isdir(path)}


def _imported_outside(roots: set[str]) -> set[str]:
    """The top-level package folders and module files of the imported modules that lie
    outside ``roots``: a package's folder once, not one rule per submodule.

    Paths are taken as written, links unresolved (Landlock's rules hold for what a path
    leads to): a module inside a root through a link is not added (the root's rule covers
    what lies inside it, and nothing else is read through the link), one outside through a
    link adds what it leads to only."""
    found: set[str] = set()
    inside = tuple(root + os.sep for root in roots | _library_folders())
    for module in list(sys.modules.values()):
        # read from the module's namespace: getattr would run lazy modules' __getattr__
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        # __path__ of a package is a list (or a namespace path); torch's ops modules fake one
        package = namespace.get("__path__")
        try:
            paths = [path for path in package if isinstance(path, str)] if package is not None else []
        except TypeError:
            paths = []
        file = namespace.get("__file__")
        for path in paths or ([file] if isinstance(file, str) else []):
            path = os.path.normpath(path)
            outside = not path.startswith(inside) and path not in roots
            if os.path.isabs(path) and path != os.sep and outside:
                found.add(path)
    # a package's folder covers its submodules' (rewardlab's packages map to several folders)
    return {path for path in found if not any(path.startswith(other + os.sep) for other in found)}


def gpu_devices() -> list[str]:
    """The NVIDIA device files a CUDA job opens (``/dev/nvidia*``, ``/dev/nvidia-caps``),
    those that exist here; CUDA also reads ``/sys/bus/pci`` and ``/sys/devices``, which
    :func:`readable_roots` adds when given them as ``extra``."""
    import glob

    return sorted(path for path in glob.glob("/dev/nvidia*") if not os.path.isdir(path))


def confine(
    run_dir: str | None, readable: Iterable[str], devices: Iterable[str] = (), companion: socket.socket | None = None
) -> None:
    """The last step before untrusted code runs: Landlock, no capabilities, seccomp.

    :param run_dir: the only directory the job may write; None: none at all.
    :param readable: what it may read (see :func:`readable_roots`).
    :param devices: device files it may open read-write with ``ioctl`` (see :func:`gpu_devices`).
    :param companion: given for a job's companion, its channel to the job: its seccomp
        filter is then the allowlist alone (:func:`allow_computation_only`), whose refusals
        are named to the job over the channel; otherwise a deny list, answered ``EPERM``.
        Not both: filters stack and the kernel takes the strictest answer, so a deny list's
        ``EPERM`` would come before the allowlist's notice, and a refused call would go unseen.
    """
    from rewardlab.llm_reward.sandbox.landlock import restrict

    if _opted_out():
        if companion is not None:
            companion.sendall(_NO_LISTENER)
        return
    restrict(writable=[run_dir] if run_dir else [], readable=list(readable), devices=list(devices))
    _drop_capabilities()
    _check(_libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    if companion is None:
        _load_seccomp()
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
    libc = _libc()
    for capability in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) < 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(_LINUX_CAPABILITY_VERSION_3, 0), (Data * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset(no capabilities)")


# Refused with EPERM: new programs and processes (threads stay allowed), other processes'
# memory, new sockets of any family, new namespaces and mounts, kernel keys, BPF, perf,
# modules, io_uring (which runs syscalls the filter never sees), handles to files by number.
_DENIED_SYSCALLS = (
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "setsid", "setpgid", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "init_module", "finit_module", "delete_module", "kexec_load", "reboot", "swapon", "swapoff",
    "iopl", "ioperm", "mknod", "mknodat", "name_to_handle_at", "open_by_handle_at",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "personality", "acct", "quotactl",
    # metadata, which Landlock does not cover: a worker could otherwise set the set-user-ID
    # bit on the user's programs, open their files to others, or forge their times
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
    "utime", "utimes", "futimesat", "utimensat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    # memory that RLIMIT_AS does not count: a memfd's pages (256 of them, RLIMIT_FSIZE each)
    # and SysV shared memory or message queues, which outlive their mapping until the
    # worker's IPC namespace ends (a worker held 1.5 GB under a 1 GB limit; red-team finding)
    "memfd_create", "shmget", "shmat", "msgget",
)
# Answered EOPNOTSUPP (as a file system without it), so glibc's posix_fallocate writes
# instead: allocating takes no time, and a worker allocated 8 GB in 21 ms, between two looks
# of the disk-quota watchdog (red-team finding).
_UNSUPPORTED_SYSCALLS = ("fallocate",)


def _add_rule(rules: Any, action: Any, name: str, *arguments: Any) -> None:
    """``rules.add_rule(action, name, *arguments)``, skipped for a syscall this architecture
    (or libseccomp) does not have."""
    try:
        rules.add_rule(action, name, *arguments)
    except (RuntimeError, ValueError, OSError):
        pass


def make_undumpable() -> None:
    """``PR_SET_DUMPABLE`` 0: a process of the same user (a job's companion) cannot open
    this one's memory through ``/proc``."""
    _check(_libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 0)")


def _load_seccomp() -> None:
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    deny = seccomp.ERRNO(errno.EPERM)
    for name in _DENIED_SYSCALLS:
        _add_rule(rules, deny, name)
    # clone: threads only (CLONE_THREAD set); clone3 answers ENOSYS, so that glibc falls
    # back to clone, whose flags the filter can read.
    rules.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, 0))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for name in _UNSUPPORTED_SYSCALLS:
        rules.add_rule(seccomp.ERRNO(errno.EOPNOTSUPP), name)
    rules.load()


# What a reward program's process may ask of the kernel at all: computation, memory,
# threads, time, its own signals, reading (Landlock says what) and I/O on the descriptors it
# holds. Everything else is refused and fails the candidate with kind "sandbox", named
# (or, where the kernel cannot name it, kills the process): a program cannot catch the
# refusal and go on as a good candidate. It acts on no other process: signals, affinity and
# limits for itself only (from the companion, prlimit on the job once set its file-size
# limit to 0 and its training failed, blamed on the trainer). Found by tracing the
# companion through torch, numpy and per-state programs (loading, calls, errors, lazy
# imports); every call outside the list is one no reward needs (inotify, timers, signal
# queues, message queues, new descriptors of any kind but files opened for reading).
ALLOWED_SYSCALLS = (
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore",
    "get_mempolicy", "set_mempolicy", "mbind",
    # threads (clone only with CLONE_THREAD, below) and waiting
    "futex", "futex_waitv", "set_robust_list", "rseq", "set_tid_address", "exit", "exit_group",
    "restart_syscall", "sched_yield", "getcpu", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "getpriority", "arch_prctl",
    # time, randomness, who and where it is
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times",
    "getrusage", "getrandom", "sysinfo", "uname", "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid",
    "getegid", "getresuid", "getresgid", "getgroups", "getpgrp", "getcwd",
    # its own signal handling (sending: kill and tgkill to itself, below)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigpending", "rt_sigsuspend",
    "rt_sigtimedwait",
    # I/O on the descriptors it holds (the channel, the log, files it opened for reading)
    "read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "recvfrom", "sendto", "shutdown",
    "poll", "ppoll", "select", "pselect6", "lseek", "close", "close_range", "dup", "dup2", "dup3",
    "fadvise64",
    # reading what Landlock lets it read (lazy imports, tracebacks' source lines)
    "fstat", "newfstatat", "stat", "lstat", "statx", "access", "faccessat", "faccessat2", "readlink",
    "readlinkat", "getdents64", "getdents", "fstatfs", "statfs",
)
#: file flags a program's process may not open with: writing, creating, truncating
_WRITING_FLAGS = 0o3 | 0o100 | 0o1000 | 0o2000 | 0o20000000  # O_ACCMODE O_CREAT O_TRUNC O_APPEND __O_TMPFILE
#: ioctl requests of Python's own I/O: TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO
_ALLOWED_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421)
#: fcntl commands: F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC (not
#: F_SETOWN or F_SETSIG, which would point a descriptor's signals at another process)
_ALLOWED_FCNTLS = (0, 1, 2, 3, 4, 1030)
#: prctl options: PR_GET_DUMPABLE, PR_SET_NAME, PR_GET_NAME (threads' names), PR_SET_VMA
_ALLOWED_PRCTLS = (3, 15, 16, 0x53564D41)


def allow_computation_only(report: socket.socket | None = None) -> None:
    """The seccomp allowlist of a process that runs untrusted code next to a job (a job's
    companion): :data:`ALLOWED_SYSCALLS`, with ``clone`` for threads only, files opened for
    reading only, ``ioctl``, ``fcntl`` and ``prctl`` for the few requests Python and its
    libraries make, signals and affinity for itself only, its limits read only; ``clone3``
    answers ``ENOSYS`` (glibc then uses ``clone``, whose flags the filter reads) and
    ``openat2`` too (its flags are out of the filter's sight).

    Any other call is refused and never runs. Given ``report`` (the process's channel to the
    job), the kernel stops the calling thread and tells the job which call it was: the
    filter's listener (seccomp user notification) goes to the job over ``report`` before any
    untrusted code runs (the job takes it with :meth:`RefusalWatch.receive`), one byte with
    it, and this process keeps no copy of it. Where the kernel or libseccomp has no user
    notification, or without ``report``, the call kills the process (``SIGSYS``, see
    :data:`REFUSED_SIGNAL`) and the failure cannot name it. A call of another architecture's
    table (``int 0x80`` on x86_64) kills the process in either case: by default libseccomp
    kills only the thread, and a program's thread could probe and vanish unseen.

    Called by :func:`confine` (``companion=``), after Landlock and ``PR_SET_NO_NEW_PRIVS``.

    :param report: the channel to send the listener over; one byte is sent on it in any case.
    """
    import pyseccomp as seccomp

    own = os.getpid()
    listening = report is not None and notification_supported()
    rules = seccomp.SyscallFilter(defaction=seccomp.NOTIFY if listening else seccomp.KILL_PROCESS)
    rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    allow = seccomp.ALLOW

    def add(name: str, *arguments: Any) -> None:
        _add_rule(rules, allow, name, *arguments)

    for name in ALLOWED_SYSCALLS:
        # the process's exit goes through the job, which lets it go on once it has read
        # every call refused before it: an exit cannot withdraw a refused call unseen
        if not (name == "exit_group" and listening and continue_supported()):
            add(name)
    add("clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, _CLONE_THREAD))
    add("openat", seccomp.Arg(2, seccomp.MASKED_EQ, _WRITING_FLAGS, 0))
    add("open", seccomp.Arg(1, seccomp.MASKED_EQ, _WRITING_FLAGS, 0))
    for request in _ALLOWED_IOCTLS:
        add("ioctl", seccomp.Arg(1, seccomp.EQ, request))
    for command in _ALLOWED_FCNTLS:
        add("fcntl", seccomp.Arg(1, seccomp.EQ, command))
    for option in _ALLOWED_PRCTLS:
        add("prctl", seccomp.Arg(0, seccomp.EQ, option))
    for name in ("kill", "tgkill"):
        add(name, seccomp.Arg(0, seccomp.EQ, own))
    for name in ("sched_setaffinity", "get_robust_list"):
        add(name, seccomp.Arg(0, seccomp.EQ, 0))
    # its own limits, read only: raising one is refused all the same, and no longer silently
    add("prlimit64", seccomp.Arg(0, seccomp.EQ, 0), seccomp.Arg(2, seccomp.EQ, 0))
    for name in ("clone3", "openat2"):
        _add_rule(rules, seccomp.ERRNO(errno.ENOSYS), name)
    if listening:
        # the listener's one way out; a program that sends on its channel gains nothing: the
        # job reads the channel with recv, which drops any descriptor sent with the data
        add("sendmsg", seccomp.Arg(0, seccomp.EQ, report.fileno()))
        listener = _load_with_listener(seccomp, rules)
    else:
        rules.load()
    if report is None:
        return
    if not listening:
        report.sendall(_NO_LISTENER)
        return
    try:
        socket.send_fds(report, [_LISTENER], [listener])
    finally:
        os.close(listener)


#: the signal the kernel kills a process with for a call its seccomp filter does not allow
REFUSED_SIGNAL = signal.SIGSYS
#: the byte a companion sends with its filter's listener, or without one
_LISTENER, _NO_LISTENER = b"L", b"-"
#: ``SECCOMP_IOCTL_NOTIF_RECV``, ``_IOWR('!', 0, struct seccomp_notif)``: the struct is 80
#: bytes, the call's number at byte 16 and its architecture (``AUDIT_ARCH_*``) at byte 20
_NOTIFICATION_BYTES = 80
_NOTIF_RECV = (3 << 30) | (_NOTIFICATION_BYTES << 16) | (ord("!") << 8)
_NOTIFICATION_CALL = struct.Struct("=iI")
_NOTIFICATION_ID = struct.Struct("=Q")
#: ``SECCOMP_IOCTL_NOTIF_SEND``, ``_IOWR('!', 1, struct seccomp_notif_resp)``: the call's id,
#: its return value, its error (negative) and flags (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``: run it)
_ANSWER = struct.Struct("=QqiI")
_NOTIF_SEND = (3 << 30) | (_ANSWER.size << 16) | (ord("!") << 8) | 1
_CONTINUE = 1
#: how long the watch holds an exit for the calls of other threads still to come, ms
EXIT_GRACE_MS = 20


@functools.cache
def continue_supported() -> bool:
    """Whether this kernel lets a listener run a notified call as it was made
    (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``, Linux 5.5+)."""
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 5)


def _answer(listener: int, call: int, error: int = 0, flags: int = 0) -> None:
    """Answer notified call ``call``: run it (``flags=_CONTINUE``) or fail it with ``error``.
    A call whose thread has ended meanwhile (``ENOENT``) needs no answer."""
    try:
        fcntl.ioctl(listener, _NOTIF_SEND, _ANSWER.pack(call, 0, -error, flags))
    except OSError as failure:
        if failure.errno != errno.ENOENT:
            raise


@functools.cache
def notification_supported() -> bool:
    """Whether this kernel and libseccomp hand a filter's refusals to another process
    (seccomp user notification: Linux 5.0+, libseccomp 2.5+ at API level 5 or more)."""
    try:
        import pyseccomp as seccomp

        return hasattr(seccomp, "NOTIFY") and seccomp.get_api() >= 5
    except (ImportError, OSError, NotImplementedError, AttributeError):
        return False


_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 1 << 3


def _load_with_listener(seccomp: Any, rules: Any) -> int:
    """Load ``rules`` with a listener and return it (``seccomp(SECCOMP_SET_MODE_FILTER,
    SECCOMP_FILTER_FLAG_NEW_LISTENER)`` on the program libseccomp compiles). Not libseccomp's
    own load: it asks for a listener only when a rule's action is to notify, and a default
    action is none (a rule may not repeat it), so its filter would notify no one and the
    kernel would answer every refused call ``ENOSYS``, unseen."""
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)  # a program larger than the pipe fails, never blocks

        class Sink:
            def fileno(self) -> int:
                return write_end

        rules.export_bpf(Sink())
        os.close(write_end)
        write_end = -1
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    code = b"".join(chunks)

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    instructions = ctypes.create_string_buffer(code, len(code))
    program = Program(len(code) // 8, ctypes.cast(instructions, ctypes.c_void_p))
    number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, "seccomp")
    return _check(_libc().syscall(ctypes.c_long(number), ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
                                  ctypes.c_long(_SECCOMP_FILTER_FLAG_NEW_LISTENER), ctypes.byref(program)),
                  "seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER)")


@functools.cache
def syscall_names() -> tuple[int, dict[int, str]]:
    """This machine's architecture (``AUDIT_ARCH_*``) and its system calls' names by number,
    from libseccomp; empty where libseccomp is not usable. Cached before a worker confines
    itself (:func:`run_isolated`), since a confined job may not call native code."""
    try:
        import pyseccomp as seccomp

        arch = int(seccomp.system_arch())
        names = {}
        for number in range(1024):
            try:
                names[number] = seccomp.resolve_syscall(seccomp.Arch.NATIVE, number).decode()
            except (ValueError, OSError):
                continue
        return arch, names
    except (ImportError, OSError, AttributeError):
        return 0, {}


def syscall_name(number: int, arch: int) -> str:
    """The name of system call ``number`` of architecture ``arch`` (``AUDIT_ARCH_*``), or
    its number where this machine's table does not have it."""
    native, names = syscall_names()
    if arch == native and number in names:
        return names[number]
    return f"system call {number} of architecture {arch:#x}"


class RefusalWatch:
    """The job's side of its companion's refused calls: the listener of the companion's
    filter (:func:`allow_computation_only`), watched by a thread of the job.

    The first refused call is recorded in :attr:`refused` (its name) and the channel to
    the companion is shut down, so that the job, waiting for an answer, stops waiting and
    fails the program (:attr:`refused` says why); every refused call, which never runs,
    returns ``ENOSYS``. The companion's exit (``exit_group``) is notified too, where the
    kernel can let it go on (:func:`continue_supported`): read after every call refused
    before it, it runs then, so an exit cannot withdraw a refused call unseen.
    The job waits for the watch (:meth:`wait`) before it accepts a result or blames an exit,
    so a call made after the last answer, or just before the companion exits, is seen too.

    Take it with :meth:`receive` before anything else reads the channel.
    """

    def __init__(self, listener: int | None, channel: socket.socket):
        self.refused: str | None = None
        self._listener = listener
        self._channel = channel
        self._thread: threading.Thread | None = None
        if listener is not None:
            self._thread = threading.Thread(target=self._watch, name="refused-calls", daemon=True)
            self._thread.start()

    def wait(self, timeout_s: float) -> str | None:
        """Wait until the watch has ended (the companion has ended, or a call was refused),
        at most ``timeout_s``, and return :attr:`refused`: a result is accepted only once
        the watch has seen the companion's last call.

        :param timeout_s: the longest wait, seconds.
        """
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self.refused

    @classmethod
    def receive(cls, channel: socket.socket) -> RefusalWatch:
        """The watch of the companion at the other end of ``channel``: reads the byte its
        :func:`allow_computation_only` sent, and the listener with it (none: a companion
        whose refused calls kill it, one that ended first, or one that sent no such byte
        and starts with its first frame, whose first byte is 0)."""
        if channel.recv(1, socket.MSG_PEEK) not in (_LISTENER, _NO_LISTENER):
            return cls(None, channel)
        _, listeners, _, _ = socket.recv_fds(channel, 1, 1)
        return cls(listeners[0] if listeners else None, channel)

    def _watch(self) -> None:
        listener = self._listener
        assert listener is not None
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        withdrawn, exiting = False, None
        try:
            while True:
                # an exit waits until no other call has come for a moment: a thread's call
                # made as the process exits is read before the exit can withdraw it
                ready = poller.poll(None if exiting is None else EXIT_GRACE_MS)
                if not ready and exiting is not None:
                    _answer(listener, exiting, flags=_CONTINUE)
                    exiting = None
                    continue
                events = next((event for fd, event in ready if fd == listener), 0)
                if events & select.POLLIN:
                    notification = bytearray(_NOTIFICATION_BYTES)
                    try:
                        fcntl.ioctl(listener, _NOTIF_RECV, notification, True)
                    except OSError as error:
                        if error.errno == errno.EINTR:
                            continue
                        if error.errno == errno.ENOENT:
                            # withdrawn before it could be read: its thread was killed, or a
                            # signal came first (the call is then made again and named)
                            withdrawn = True
                            continue
                        # a kernel whose notice this cannot read: refused all the same,
                        # unnamed; closing the listener answers every call ENOSYS
                        self._refuse(f"a call whose notice could not be read "
                                     f"({os.strerror(error.errno or 0)})")
                        return
                    (call,) = _NOTIFICATION_ID.unpack_from(notification, 0)
                    name = syscall_name(*_NOTIFICATION_CALL.unpack_from(notification, 16))
                    if name == "exit_group":
                        if exiting is not None:  # another thread's exit: one is enough
                            _answer(listener, exiting, flags=_CONTINUE)
                        exiting = call
                    else:
                        self._refuse(name)
                        _answer(listener, call, error=errno.ENOSYS)  # it never runs
                    continue
                if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    # no process uses the filter any more: the companion has ended
                    if withdrawn and self.refused is None:
                        self.refused = ("a call withdrawn as its thread ended, before it "
                                        "could be named")
                    return
        finally:
            os.close(listener)

    def _refuse(self, name: str) -> None:
        """Record the first refused call and shut the channel down, so that the job,
        waiting for an answer, stops waiting."""
        if self.refused is not None:
            return
        self.refused = name
        try:
            self._channel.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already


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
