"""Run a job on untrusted code in a separate, limited process and get its JSON result back.

:func:`run_sandboxed` has one worker process forked for the job by the sandbox's fork
server (:mod:`rewardlab.llm_reward.sandbox.forkserver`, started once with torch and the job's modules
imported, and with a minimal environment). The worker

1. becomes the leader of a new process group (so the whole group can be killed) and asks
   the kernel to kill it if its parent dies (Linux);
2. moves into its run directory, points ``HOME`` and ``TMPDIR`` there, replaces the
   environment variables with a minimal set (nothing secret to read) and sends its
   standard output and error to ``<run_dir>/worker.log``;
3. sets OS limits: CPU time (``RLIMIT_CPU``), address space (``RLIMIT_AS``), open files
   (``RLIMIT_NOFILE``), file size (``RLIMIT_FSIZE``), no core dumps, and, for non-root
   users, the number of processes (``RLIMIT_NPROC``; root ignores it, so the audit hooks
   are what stop forks there);
4. where the kernel has Landlock (Linux 5.13+, :func:`landlock_abi`), restricts itself in
   the kernel, for C code too (torch's own file I/O never reaches Python's audit hooks):
   files and directories are created, written, truncated or removed only beneath the run
   directory (and ``/dev/null``); with ABI 4+ no TCP ``connect`` or ``bind``; with ABI 6+
   no signals to processes outside the sandbox and no abstract Unix sockets;
5. installs the :class:`~rewardlab.llm_reward.sandbox.guard.Guard` (audit hooks: no network, no processes,
   no writes outside the run directory, ...), then calls the job.

The caller waits for the result with a wall-clock timeout and kills the worker's process
group (SIGKILL) when time is up or once the result is in. The result travels as JSON
over a Unix socket; the caller never unpickles anything the worker sends. Linux is the
platform this is built for (``resource``, ``prctl`` and Landlock; other POSIX systems get
the rest).

A job is a function ``job(payload: dict, guard: Guard) -> dict`` named ``"module:function"``;
its payload and result are JSON data.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rewardlab.llm_reward.sandbox.forkserver import (
    KEPT_ENVIRONMENT,
    fork_server,
    kill_group,
    read_message,
    send_message,
)

__all__ = ["Limits", "SandboxRun", "landlock_abi", "run_sandboxed"]

LOG_NAME = "worker.log"
# A worker that sent its result gets this long to exit before it is killed.
EXIT_GRACE_S = 5.0


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed worker.

    :param timeout_s: wall-clock limit of the whole job, in seconds.
    :param memory_mb: address-space limit (``RLIMIT_AS``), ``None`` for none. torch maps
        address space it never touches (importing it takes about 0.65 GB; a CartPole PPO
        evaluation peaked at about 0.7 GB of address space, 0.27 GB resident), so 4096 leaves
        room for larger programs and networks. Use ``None`` with CUDA, whose driver reserves
        far more virtual address space than it uses.
    :param cpu_s: CPU-time limit (``RLIMIT_CPU``, all threads together); ``None``:
        ``timeout_s * (threads + 1)``, a backstop for when the parent is gone.
    :param max_open_files: ``RLIMIT_NOFILE``.
    :param max_file_mb: the largest file the worker may write (``RLIMIT_FSIZE``).
    :param threads: torch's intra-op threads in the worker.
    """

    timeout_s: float = 600.0
    memory_mb: int | None = 4096
    cpu_s: float | None = None
    max_open_files: int = 256
    max_file_mb: int = 1024
    threads: int = 1

    def __post_init__(self) -> None:
        for name in ("timeout_s", "memory_mb", "max_open_files", "max_file_mb", "threads"):
            value = getattr(self, name)
            if value is None and name == "memory_mb":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {name}={value!r}")
        if self.cpu_s is not None and not self.cpu_s > 0:
            raise ValueError(f"cpu_s must be None or a positive number, got cpu_s={self.cpu_s!r}")

    @property
    def cpu_limit_s(self) -> int:
        """The CPU-time limit in whole seconds."""
        cpu = self.cpu_s if self.cpu_s is not None else self.timeout_s * (self.threads + 1)
        return max(1, int(cpu + 0.999))


@dataclass
class SandboxRun:
    """What came back from a sandboxed job.

    :param result: the job's result (parsed JSON, untrusted data), or ``None``.
    :param violation: the first thing the guard refused, if any (even if the code caught it).
    :param error: why the job failed outside the job's own result (timeout, limit, crash,
        an exception escaping the job), or ``None``.
    :param error_kind: ``"timeout"``, ``"limit"``, ``"crash"`` or ``"error"``; ``None`` when
        ``error`` is.
    :param wall_s: wall time from start to result (or kill), in seconds.
    :param exit_code: the worker's exit code (negative: killed by that signal).
    :param log_tail: the end of ``worker.log`` when the job failed, for debugging.
    """

    result: dict[str, Any] | None
    violation: str | None
    error: str | None
    error_kind: str | None
    wall_s: float
    exit_code: int | None
    log_tail: str = ""


def run_sandboxed(
    job: str,
    payload: Mapping[str, Any],
    run_dir: str | os.PathLike[str],
    limits: Limits | None = None,
    preload: Sequence[str] = (),
) -> SandboxRun:
    """Run ``job(payload, guard)`` in a sandboxed worker and return what came back.

    Never raises for anything the job does; raises only for bad arguments, or when the
    fork server cannot start.

    :param job: ``"module:function"``; the function takes ``(payload, guard)`` and returns
        a JSON-serialisable dict.
    :param payload: JSON-serialisable input of the job.
    :param run_dir: an existing directory, the only place the worker may write.
    :param limits: resource limits (defaults of :class:`Limits` when ``None``).
    :param preload: modules imported before the guard is installed, by the fork server once
        for all workers: those the job needs that would otherwise be imported under the
        guard, which refuses what some imports do (``ctypes`` calls), or in every worker.
        Each distinct list gets its own fork server.
    """
    limits = limits or Limits()
    module_name, _, function_name = job.partition(":")
    if not module_name or not function_name:
        raise ValueError(f"job={job!r} must be 'module:function'")
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise ValueError(f"run_dir={os.fspath(run_dir)!r} is not an existing directory")
    request = {
        "job": job,
        "payload": json.dumps(payload),
        "run_dir": os.fspath(run_dir),
        "limits": asdict(limits),
        "preload": ["rewardlab.llm_reward.sandbox.runner", module_name, *preload],
    }
    server = fork_server(request["preload"])
    start = time.monotonic()
    connection = server.connect(request)
    try:
        envelope, exit_code, timed_out = _follow_worker(connection, start + limits.timeout_s)
    finally:
        connection.close()
    return _outcome(envelope, timed_out, time.monotonic() - start, exit_code, run_dir, limits)


def _follow_worker(connection: Any, deadline: float) -> tuple[Any, int | None, bool]:
    """Read the worker's messages until the server reports its exit; kill it on timeout.

    :return: ``(envelope or None, exit code or None, timed out)``.
    """
    pid = envelope = exit_code = None
    timed_out = killed = False
    while exit_code is None:
        now = time.monotonic()
        if now >= deadline:
            if killed:
                break  # the server never reported the exit
            timed_out = envelope is None
            if pid is not None:
                kill_group(pid)
            killed, deadline = True, now + EXIT_GRACE_S
        try:
            message = read_message(connection, deadline)
        except ValueError:
            message = {"malformed": True}
        if message is None:
            if time.monotonic() < deadline:
                break  # the connection closed: the server is gone
            continue
        if "pid" in message and pid is None and isinstance(message["pid"], int):
            pid = message["pid"]
        elif "exit" in message and isinstance(message["exit"], int):
            exit_code = message["exit"]
        elif envelope is None:
            envelope = message
            deadline = min(deadline, time.monotonic() + EXIT_GRACE_S)
    # Always: a worker may have sent a forged exit message, and a finished one is gone anyway.
    if pid is not None:
        kill_group(pid)
    return envelope, exit_code, timed_out


def _outcome(
    envelope: Any,
    timed_out: bool,
    wall_s: float,
    exit_code: int | None,
    run_dir: Path,
    limits: Limits,
) -> SandboxRun:
    if envelope is not None:
        if isinstance(envelope, dict) and "result" in envelope and isinstance(envelope["result"], dict | None):
            error = envelope.get("error")
            violation = envelope.get("violation")
            return SandboxRun(
                result=envelope.get("result"),
                violation=violation if isinstance(violation, str) else None,
                error=error if isinstance(error, str) else None,
                error_kind="error" if isinstance(error, str) else None,
                wall_s=wall_s,
                exit_code=exit_code,
                log_tail="" if envelope.get("result") is not None else _log_tail(run_dir),
            )
        return SandboxRun(None, None, "the worker sent a malformed result", "crash", wall_s,
                          exit_code, _log_tail(run_dir))
    if timed_out:
        error, kind = (f"timed out: the job ran past its wall-clock limit of {limits.timeout_s:g} s "
                       "and was killed"), "timeout"
    else:
        error, kind = _describe_exit(exit_code, limits)
    return SandboxRun(None, None, error, kind, wall_s, exit_code, _log_tail(run_dir))


def _describe_exit(exit_code: int | None, limits: Limits) -> tuple[str, str]:
    if exit_code is not None and exit_code < 0:
        number = -exit_code
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
        if number == signal.SIGXCPU:
            return (f"the job used up its CPU-time limit of {limits.cpu_limit_s} s and was killed "
                    "(SIGXCPU)"), "limit"
        if number == signal.SIGKILL:
            return ("the worker was killed (SIGKILL): it hit its CPU-time limit, ran out of "
                    f"memory (address-space limit {limits.memory_mb} MB) or the system killed it"), "limit"
        if number == signal.SIGXFSZ:
            return (f"the job wrote a file larger than {limits.max_file_mb} MB and was killed "
                    "(SIGXFSZ)"), "limit"
        return f"the worker died from signal {name}", "crash"
    return f"the worker exited (code {exit_code}) without sending a result", "crash"


def _log_tail(run_dir: Path, limit: int = 2000) -> str:
    try:
        with open(run_dir / LOG_NAME, "rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - limit))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------- in the worker
def worker_main(
    job: str,
    payload_json: str,
    run_dir: str,
    limits: dict[str, Any],
    preload: tuple[str, ...],
    write: Callable[[bytes], None],
) -> None:
    """Entry point of a worker process, forked by the fork server (steps in the module docstring).

    :param job: ``"module:function"``.
    :param payload_json: the job's payload as JSON text.
    :param run_dir: the run directory.
    :param limits: :class:`Limits` as a dict.
    :param preload: modules to import before the guard (already imported by the server).
    :param write: sends bytes to the caller (the worker's connection).
    """
    envelope: dict[str, Any] = {"result": None}
    guard = None
    try:
        _isolate(run_dir, Limits(**limits))
        for module in preload:
            importlib.import_module(module)
        module_name, _, function_name = job.partition(":")
        function = getattr(importlib.import_module(module_name), function_name)
        payload = json.loads(payload_json)
        from rewardlab.llm_reward.sandbox.guard import Guard

        guard = Guard(writable=[run_dir])
        guard.install()
        envelope["result"] = function(payload, guard)
    except BaseException as error:  # noqa: B036 - report anything, the worker exits next
        envelope["error"] = _describe_error(error)
    if guard is not None and guard.violation:
        envelope["violation"] = guard.violation
    try:
        json.dumps(envelope)
    except (TypeError, ValueError) as error:
        envelope = {"result": None, "error": f"the job's result is not JSON: {error}"}
    try:
        send_message(write, envelope)
    finally:
        os._exit(0)


def _describe_error(error: BaseException) -> str:
    try:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except Exception:
        text = type(error).__name__
    return text[-4000:]


def _isolate(run_dir: str, limits: Limits) -> None:
    os.setsid()
    _die_with_parent()
    os.chdir(run_dir)
    # The working directory is no import location: nothing written in the run dir is imported.
    sys.path[:] = [path for path in sys.path if path not in ("", ".")]
    temporary = os.path.join(run_dir, "tmp")
    os.makedirs(temporary, exist_ok=True)
    kept = {name: os.environ[name] for name in (*KEPT_ENVIRONMENT, "PYTHONPATH") if name in os.environ}
    os.environ.clear()
    os.environ.update(kept, HOME=run_dir, TMPDIR=temporary, OMP_NUM_THREADS=str(limits.threads),
                      MKL_NUM_THREADS=str(limits.threads), PYTHONDONTWRITEBYTECODE="1")
    tempfile.tempdir = temporary
    log = os.open(os.path.join(run_dir, LOG_NAME), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_CPU, limits.cpu_limit_s, limits.cpu_limit_s + 5)
    if limits.memory_mb is not None:
        _set_limit(resource.RLIMIT_AS, int(limits.memory_mb * 2**20))
    _set_limit(resource.RLIMIT_NOFILE, int(limits.max_open_files))
    _set_limit(resource.RLIMIT_FSIZE, int(limits.max_file_mb * 2**20))
    if os.getuid() != 0:
        # Counts every task (thread) of this user on the machine, hence the margin.
        _set_limit(resource.RLIMIT_NPROC, _user_task_count() + 64)
    if landlock_abi() > 0:
        _restrict_with_landlock(run_dir)
    import torch

    torch.set_num_threads(int(limits.threads))


def _set_limit(which: int, soft: int, hard: int | None = None) -> None:
    hard = soft if hard is None else hard
    current_soft, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)


def _user_task_count() -> int:
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return count


# Landlock (see landlock(7)): the same syscall numbers on x86_64 and the generic table (arm64).
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
# Filesystem rights that change something, with the ABI that introduced each.
_FS_WRITE_FILE, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 1, 1 << 14, 1 << 15
_FS_CHANGES = (
    (1, _FS_WRITE_FILE | (1 << 4) | (1 << 5) | sum(1 << bit for bit in range(6, 13))),
    (2, 1 << 13),  # REFER (links and renames across directories)
    (3, _FS_TRUNCATE),
    (5, _FS_IOCTL_DEV),
)
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers, 0 if none (not Linux, too old, disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def _restrict_with_landlock(run_dir: str) -> None:
    """Restrict this process (and anything it starts) as step 4 of the module docstring says."""
    import ctypes

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                    ("scoped", ctypes.c_uint64)]

    class PathBeneathAttr(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    abi = landlock_abi()
    libc = ctypes.CDLL(None, use_errno=True)
    handled = sum(rights for version, rights in _FS_CHANGES if abi >= version)
    attr = RulesetAttr(
        handled_access_fs=handled,
        handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
        scoped=(_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    size = ctypes.sizeof(RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        file_rights = handled & (_FS_WRITE_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV)
        for path, rights in ((run_dir, handled), ("/dev/null", file_rights)):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneathAttr(allowed_access=rights, parent_fd=fd)
                if libc.syscall(_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH,
                                ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule({path!r})")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
