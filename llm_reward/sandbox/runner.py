"""Run a job on untrusted code in a process isolated by the kernel and get its JSON result back.

:func:`run_sandboxed` has one worker forked for the job by the sandbox's fork server
(:mod:`~rewardlab.llm_reward.sandbox.forkserver`, started once with torch and the job's
modules imported, and with a minimal environment). The worker

1. is made by :func:`~rewardlab.llm_reward.sandbox.isolation.run_isolated`: its own user,
   PID, network, mount, IPC and UTS namespaces and a fresh ``/proc`` (no other process
   of the machine visible; no network at all), its run directory watched for a disk
   quota, the whole tree killed with its keeper;
2. moves into its run directory, points ``HOME`` and ``TMPDIR`` there, replaces the
   environment variables with a minimal set (nothing secret to read) and sends its
   standard output and error to ``<run_dir>/worker.log``;
3. sets OS limits: CPU time (``RLIMIT_CPU``), address space (``RLIMIT_AS``), open files
   (``RLIMIT_NOFILE``), file size (``RLIMIT_FSIZE``), threads (``RLIMIT_NPROC``, and a
   ``pids`` cgroup of the worker's own where the caller may make one), a CPU quota of its
   ``threads`` CPUs (a ``cpu`` cgroup, likewise), queued signals (``RLIMIT_SIGPENDING``), no
   POSIX message queues, no core dumps;
4. imports what the job needs, then :func:`~rewardlab.llm_reward.sandbox.isolation.confine`:
   Landlock (reads only of Python, its libraries, rewardlab and system libraries; writes
   only beneath the run directory; no TCP, no signals out), no capabilities,
   ``PR_SET_NO_NEW_PRIVS`` and a seccomp filter (no ``execve``, no processes but threads,
   no new sockets, no namespaces or mounts);
5. installs the :class:`~rewardlab.llm_reward.sandbox.guard.Guard`, whose audit hooks give
   the LLM clear messages (they are not what keeps the program in), then calls the job.

A job that must not run the untrusted code itself (training on a reward program: the job
ships the policy the caller scores) names a companion: the worker forks it before step 4,
and the companion alone runs the code, confined further (a seccomp allowlist: any call
outside it kills the companion, see
:func:`~rewardlab.llm_reward.sandbox.isolation.allow_computation_only`), talking to the job
over one socket pair (:func:`_start_companion`, :mod:`~rewardlab.llm_reward.sandbox.reward_process`).

The caller waits for the result with a wall-clock timeout and kills the worker's tree
(SIGKILL) when time is up or once the result is in. The result travels as JSON over the
worker's own socket, read with limits on size and nesting; the caller never unpickles
anything the worker sends. Linux only: where the kernel lacks namespaces, Landlock or
seccomp, workers refuse to run (see :func:`~rewardlab.llm_reward.sandbox.isolation.kernel_support`).

A job is a function ``job(payload: dict, guard: Guard) -> dict`` named ``"module:function"``;
its payload and result are JSON data. A job that takes a ``progress`` argument is given a
function that sends JSON data to the caller at once (a training run's checkpoints, as they
are made): the caller keeps it in :attr:`SandboxRun.progress`, so what the job reported
survives a timeout or a crash that loses its result.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import logging
import os
import resource
import signal
import socket
import stat
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.llm_reward.sandbox.forkserver import (
    KEPT_ENVIRONMENT,
    WORKER_PROCESSES,
    fork_server,
    kill_group,
    read_message,
    send_message,
)
from rewardlab.llm_reward.sandbox.isolation import (
    MAX_ENTRIES,
    QUOTA_EXIT,
    allow_computation_only,
    confine,
    confine_to_itself,
    cpu_limit,
    gpu_devices,
    make_undumpable,
    readable_roots,
)
from rewardlab.llm_reward.sandbox.landlock import landlock_abi

__all__ = ["Limits", "SandboxRun", "landlock_abi", "read_private_tail", "remove_tree", "run_sandboxed",
           "write_private"]

LOG_NAME = "worker.log"
#: the most bytes of progress messages the caller keeps of one job
MAX_PROGRESS_BYTES = 256 * 2**20
_log = logging.getLogger(__name__)
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
    :param max_disk_mb: the most its run directory may hold, all files together; a
        watchdog outside the sandbox kills the worker past it (checked every 0.05 s, so a
        program can overshoot it by what it writes in that time).
    :param threads: torch's intra-op threads in the worker.
    :param max_threads: the most threads the job may run (its main thread counted; forks are
        refused anyway); ``None``: ``128 + 4 * threads``. A compiled PPO job on Ant with
        ``threads=1`` runs 2 threads; torch training with 8 threads runs 16. A worker that
        had switched the guard off started 3,000 threads when only the address space
        bounded them (red-team finding). Enforced by a ``pids`` cgroup per worker where
        the caller may make one, and by ``RLIMIT_NPROC``, which counts the tasks of the
        worker's own user namespace but does not bind a caller that is root: see
        :func:`~rewardlab.llm_reward.sandbox.isolation.task_limit`.
    """

    timeout_s: float = 600.0
    memory_mb: int | None = 4096
    cpu_s: float | None = None
    max_open_files: int = 256
    max_file_mb: int = 256
    max_disk_mb: int = 1024
    threads: int = 1
    gpu: bool = False
    max_threads: int | None = None

    def __post_init__(self) -> None:
        for name in ("timeout_s", "memory_mb", "max_open_files", "max_file_mb", "max_disk_mb", "threads",
                     "max_threads"):
            value = getattr(self, name)
            if value is None and name in ("memory_mb", "max_threads"):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {name}={value!r}")
        if self.cpu_s is not None and not self.cpu_s > 0:
            raise ValueError(f"cpu_s must be None or a positive number, got cpu_s={self.cpu_s!r}")

    @property
    def thread_limit(self) -> int:
        """The most threads of the job: ``max_threads``, or ``128 + 4 * threads``."""
        return int(self.max_threads) if self.max_threads is not None else 128 + 4 * int(self.threads)

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
    :param progress: what the job sent through its ``progress`` function, in order (untrusted
        data), kept also when the job sent no result.
    :param stopped: the caller's ``on_progress`` stopped the job (``error_kind`` ``"stopped"``).
    """

    result: dict[str, Any] | None
    violation: str | None
    error: str | None
    error_kind: str | None
    wall_s: float
    exit_code: int | None
    log_tail: str = ""
    progress: list[Any] = field(default_factory=list)
    stopped: bool = False


def run_sandboxed(
    job: str,
    payload: Mapping[str, Any],
    run_dir: str | os.PathLike[str],
    limits: Limits | None = None,
    preload: Sequence[str] = (),
    warm: Sequence[tuple[str, str]] = (),
    temporary: bool = False,
    companion: str | None = None,
    on_progress: Callable[[Any], bool] | None = None,
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
    :param warm: ``("module:function", json_text)`` pairs the fork server calls once before
        forking (:class:`~rewardlab.llm_reward.sandbox.forkserver.ForkServer`): what they
        load, every worker inherits. Each distinct list gets its own fork server too.
    :param temporary: ``run_dir`` is a temporary folder that the caller removes after the
        run; should the caller die first (SIGKILL runs no ``finally``), the fork server
        removes it once it has killed the worker.
    :param companion: ``"module:function"`` of the process that runs the untrusted code
        for the job (a reward program), called as ``function(payload, channel, guard)``
        in a process the worker forks before it confines itself, and confined further
        (:func:`_start_companion`); the job is then called as ``job(payload, guard,
        companion=(channel, pid))``, its end of the socket pair and the companion's pid.
    :param on_progress: called with each progress message (untrusted data) as it arrives; when
        it returns True the worker is killed then, and the run comes back with ``stopped``
        (what it sent so far in ``progress``): a caller stops a job that is not worth finishing.
    """
    limits = limits or Limits()
    module_name, _, function_name = job.partition(":")
    if not module_name or not function_name:
        raise ValueError(f"job={job!r} must be 'module:function'")
    if companion is not None and ":" not in companion:
        raise ValueError(f"companion={companion!r} must be 'module:function'")
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise ValueError(f"run_dir={os.fspath(run_dir)!r} is not an existing directory")
    request = {
        "job": job,
        "payload": json.dumps(payload),
        "run_dir": os.fspath(run_dir),
        "limits": asdict(limits),
        "preload": ["rewardlab.llm_reward.sandbox.runner", module_name, *preload,
                    *([companion.partition(":")[0]] if companion else [])],
        "temporary": bool(temporary),
        "companion": companion,
    }
    _say_once_what_is_unbounded()
    server = fork_server(request["preload"], warm)
    start = time.monotonic()
    connection = server.connect(request)
    progress: list[Any] = []
    try:
        envelope, exit_code, timed_out, stopped = _follow_worker(connection, start + limits.timeout_s, progress,
                                                                 on_progress)
    finally:
        connection.close()
    run = _outcome(envelope, timed_out, time.monotonic() - start, exit_code, run_dir, limits)
    run.progress = progress
    if stopped and envelope is None:  # killed on the caller's word: not a crash or a limit
        run.stopped, run.error, run.error_kind = True, "stopped by the caller", "stopped"
    return run


@functools.cache
def _say_once_what_is_unbounded() -> None:
    """Log once per process where this machine leaves a worker's CPU share unbounded."""
    if cpu_limit() is None:
        _log.warning("rewardlab: no cpu cgroup can be made here (cgroup v1, or v2 with the cpu controller "
                     "delegated to this user): a sandboxed candidate's CPU share is not bounded, and a "
                     "program's busy threads can slow the candidates beside it")


def _follow_worker(
    connection: Any, deadline: float, progress: list[Any], on_progress: Callable[[Any], bool] | None = None
) -> tuple[Any, int | None, bool, bool]:
    """Read the worker's messages until the server reports its exit; kill it on timeout, or
    when ``on_progress`` says so.

    :param progress: gets the job's progress messages, up to :data:`MAX_PROGRESS_BYTES`.
    :param on_progress: see :func:`run_sandboxed`.
    :return: ``(envelope or None, exit code or None, timed out, stopped)``.
    """
    pid = envelope = exit_code = None
    timed_out = killed = stopped = False
    sizes: list[int] = []
    try:
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
                message = read_message(connection, deadline, sizes)
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
            elif set(message) == {"progress"}:
                if envelope is None and sum(sizes) <= MAX_PROGRESS_BYTES and not stopped:
                    progress.append(message["progress"])
                    if on_progress is not None and on_progress(message["progress"]):
                        stopped = True
                        if pid is not None:
                            kill_group(pid)
                        killed, deadline = True, min(deadline, time.monotonic() + EXIT_GRACE_S)
            elif envelope is None:
                envelope = message
                deadline = min(deadline, time.monotonic() + EXIT_GRACE_S)
    finally:
        # Always, also when reading failed: a worker may have sent a forged exit message, and
        # a finished one is gone anyway; the caller removes the run directory next.
        if pid is not None:
            kill_group(pid)
    return envelope, exit_code, timed_out, stopped


def _outcome(
    envelope: Any,
    timed_out: bool,
    wall_s: float,
    exit_code: int | None,
    run_dir: Path,
    limits: Limits,
) -> SandboxRun:
    if exit_code == QUOTA_EXIT:
        envelope = None  # a result sent by a worker whose run directory outgrew its quota is no result
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
    if exit_code == QUOTA_EXIT:
        return (f"the job filled its run directory past its disk quota of {limits.max_disk_mb:g} MB "
                f"(or past {MAX_ENTRIES:,} files and folders, or into folders too deep to measure) "
                "and was killed"), "limit"
    return f"the worker exited (code {exit_code}) without sending a result", "crash"


def _log_tail(run_dir: Path, limit: int = 2000) -> str:
    return read_private_tail(run_dir / LOG_NAME, limit)


def read_private_tail(path: str | os.PathLike[str], limit: int = 2000) -> str:
    """The last ``limit`` bytes of a regular file in a folder a worker could write, as text.

    Follows no link (``O_NOFOLLOW``) and reads nothing but a regular file, so a program
    cannot make the caller read another file through a link it planted; ``""`` otherwise.

    :param path: the file.
    :param limit: bytes from the end.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def write_private(directory: str | os.PathLike[str], name: str, text: str) -> Path:
    """Write ``text`` as ``directory/name``, where a worker may have left a link or a file.

    Whatever is at that name is removed first (a link is removed, never followed), and the
    file is created anew with ``O_EXCL | O_NOFOLLOW``. Call it once the worker is gone.

    :param directory: a folder the caller made (a run directory).
    :param name: a plain file name.
    :raises OSError: the name could not be cleared (e.g. a folder is there).
    """
    if os.sep in name or name in ("", ".", ".."):
        raise ValueError(f"name={name!r} must be a plain file name")
    path = Path(directory) / name
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    return path


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` and everything beneath it, a folder a worker wrote; nothing if it is missing.

    A worker can nest folders deeper than Python's recursion limit (``shutil.rmtree``
    raises ``RecursionError``, even with ``ignore_errors``) and paths longer than the
    kernel's limit, so every folder found is first moved up to ``path`` itself, and emptied
    there: no recursion, no long paths. Links are removed, never followed. Call it once
    the worker is gone; errors of single entries are ignored.

    :param path: the folder.
    """
    root = os.fspath(path)
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            os.unlink(root)
            return
    except OSError:
        return
    pending, moved, token = [root], 0, os.urandom(6).hex()  # names the worker cannot have taken
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            entries = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    moved += 1
                    flat = os.path.join(root, f".removing-{token}-{moved}")
                    os.rename(entry.path, flat)
                    pending.append(flat)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue
        if folder != root:
            try:
                os.rmdir(folder)
            except OSError:
                pass
    try:
        os.rmdir(root)
    except OSError:
        pass


# ---------------------------------------------------------------- in the worker
def worker_main(
    job: str,
    payload_json: str,
    run_dir: str,
    limits: dict[str, Any],
    preload: tuple[str, ...],
    write: Callable[[bytes], None],
    companion: str | None = None,
) -> None:
    """Entry point of a worker process, forked by the fork server (steps in the module docstring).

    :param job: ``"module:function"``.
    :param payload_json: the job's payload as JSON text.
    :param run_dir: the run directory.
    :param limits: :class:`Limits` as a dict.
    :param preload: modules to import before the guard (already imported by the server).
    :param write: sends bytes to the caller (the worker's connection).
    :param companion: ``"module:function"`` of the job's companion (see :func:`run_sandboxed`).
    """
    envelope: dict[str, Any] = {"result": None}
    guard = None
    try:
        _isolate(run_dir, Limits(**limits), companion is not None)
        for module in preload:
            importlib.import_module(module)
        module_name, _, function_name = job.partition(":")
        function = getattr(importlib.import_module(module_name), function_name)
        payload = json.loads(payload_json)
        from rewardlab.llm_reward.sandbox.guard import Guard

        extras: dict[str, Any] = {}
        if companion is not None:
            extras["companion"] = _start_companion(companion, payload, Limits(**limits))
        if "progress" in inspect.signature(function).parameters:
            extras["progress"] = functools.partial(_send_progress, write)
        guard = Guard(writable=[run_dir])
        gpu = bool(limits.get("gpu"))
        devices = gpu_devices() if gpu else []
        extra = ["/sys/bus/pci", "/sys/devices", "/dev/shm"] if gpu else []
        confine(run_dir, readable_roots(extra), devices)  # the kernel's rules; the guard only explains
        guard.install()
        envelope["result"] = function(payload, guard, **extras)
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


def _send_progress(write: Callable[[bytes], None], data: Any) -> None:
    """Send ``data`` (JSON data) to the caller now, as the job's progress."""
    send_message(write, {"progress": data})


#: the companion's address-space limit where the job has none (a CUDA job: the companion
#: never touches the GPU, so it is bounded all the same)
COMPANION_MEMORY_MB = 4096


def _start_companion(companion: str, payload: Any, limits: Limits) -> tuple[socket.socket, int]:
    """Fork the job's companion; return the job's end of their socket pair and its pid.

    The companion keeps no file descriptor but its end of the pair and the log (standard
    output and error), so it holds no way to the caller; it confines itself with no
    directory to write, no GPU and an address-space limit, and the job's process is made
    non-dumpable, so that the companion cannot open its memory through ``/proc``.
    """
    module_name, _, function_name = companion.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            keep = theirs.fileno()
            ours.detach()
            # every descriptor but the log (1, 2) and the pair's end; closerange skips closed ones
            bounds = [-1, *sorted({1, 2, keep}), resource.getrlimit(resource.RLIMIT_NOFILE)[0]]
            for low, high in zip(bounds, bounds[1:]):
                os.closerange(low + 1, high)
            _set_limit(resource.RLIMIT_AS, int((limits.memory_mb or COMPANION_MEMORY_MB) * 2**20))
            import torch

            torch.set_num_threads(1)
            from rewardlab.llm_reward.sandbox.guard import Guard

            guard = Guard(writable=[])
            confine(None, readable_roots(), ())
            confine_to_itself()
            allow_computation_only()
            guard.install()
            guard.snapshot_modules()
            function(payload, theirs, guard)
            status = 0
        except BaseException as error:  # noqa: B036 - report anything, the companion exits next
            try:
                sys.stderr.write(f"the companion failed: {_describe_error(error)}\n")
                sys.stderr.flush()
            except BaseException:  # noqa: B036
                pass
        finally:
            os._exit(status)
    theirs.close()
    make_undumpable()
    return ours, pid


def _describe_error(error: BaseException) -> str:
    try:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except Exception:
        text = type(error).__name__
    return text[-4000:]


def _isolate(run_dir: str, limits: Limits, companion: bool) -> None:
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
    sys.dont_write_bytecode = True  # a lazy import writes no .pyc next to a library
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
    # counted per user and user namespace: the worker's holder, init, the job's threads and
    # its companion
    _set_limit(resource.RLIMIT_NPROC, limits.thread_limit + WORKER_PROCESSES + int(companion))
    # Counted per user as well as per user namespace: queued signals and POSIX message queues
    # are charged to the caller's user outside too (a program that filled the real-time signal
    # queue made the caller's sigqueue fail; red-team finding)
    _set_limit(resource.RLIMIT_SIGPENDING, MAX_PENDING_SIGNALS)
    _set_limit(resource.RLIMIT_MSGQUEUE, 0)
    import torch

    torch.set_num_threads(int(limits.threads))


#: queued signals a worker's processes may hold together (``RLIMIT_SIGPENDING``): none of
#: them queues any, but Python and the C libraries may signal themselves
MAX_PENDING_SIGNALS = 64


def _set_limit(which: int, soft: int, hard: int | None = None) -> None:
    hard = soft if hard is None else hard
    current_soft, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))

