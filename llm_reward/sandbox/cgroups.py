"""A worker's own cgroups: a ``pids`` one that bounds its tasks and a ``cpu`` one whose quota
bounds its share of the CPUs, each where this process may make one (:func:`task_limit`,
:func:`cpu_limit` say which apply here)."""

from __future__ import annotations

import functools
import os
import time

from rewardlab.llm_reward.sandbox.support import report_failure

__all__ = ["CGROUP_PREFIX", "CPU_PERIOD_US", "cpu_limit", "remove_keeper_cgroup", "task_limit"]

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
    """A new cgroup of ``controller`` below this process's own, or ``None`` where none can be
    made."""
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
        controls = _CONTROLS[controller]
        return any(os.path.exists(os.path.join(folder, control)) for control in controls)

    if not controlled():  # v2: the parent does not hand the controller down
        try:
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as control:
                control.write(f"+{controller}")
        except OSError:
            pass
    if not controlled():
        remove_cgroup(folder, tries=1)
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


def remove_cgroup(folder: str, tries: int = 50) -> None:
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
            remove_cgroup(os.path.join(parent, f"{CGROUP_PREFIX}{keeper}"), tries=1)


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


def limit_worker(holder: int, max_tasks: int | None, cpus: float | None) -> list[str]:
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
            report_failure(error, f"sandbox keeper: no {controller} cgroup")
            remove_cgroup(folder, tries=1)
            continue
        made.append(folder)
    return made


def _can_make_cgroup(controller: str) -> bool:
    folder = _new_cgroup(controller, f"{CGROUP_PREFIX}{os.getpid()}")
    if folder is None:
        return False
    remove_cgroup(folder, tries=1)
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
