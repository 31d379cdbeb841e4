"""Run a job on untrusted code in a process isolated by the kernel and get its JSON result back.

:func:`run_sandboxed` has one worker forked for the job by the sandbox's fork server
(:mod:`~rewardlab.llm_reward.sandbox.forkserver`, started once with torch and the job's
modules imported, and with a minimal environment). The worker

1. is made by :func:`~rewardlab.llm_reward.sandbox.namespaces.run_isolated`: its own user,
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
and the companion alone runs the code, confined further (a seccomp allowlist: a call
outside it never runs and is named to the job, which fails the program, see
:func:`~rewardlab.llm_reward.sandbox.seccomp.allow_computation_only`), talking to the job
over one socket pair (its frames: :class:`~rewardlab.llm_reward.sandbox.protocol.Frames`).

The caller waits for the result with a wall-clock timeout and kills the worker's tree
(SIGKILL) when time is up or once the result is in. The result travels as JSON over the
worker's own socket, read with limits on size and nesting; the caller never unpickles
anything the worker sends. Linux only: where the kernel lacks namespaces, Landlock or
seccomp, workers refuse to run (see
:func:`~rewardlab.llm_reward.sandbox.support.kernel_support`).

A job is a module-level function ``job(payload: dict, guard: Guard) -> dict``, handed in by the
caller (:mod:`~rewardlab.llm_reward.sandbox.protocol`); its payload and result are JSON data. The
steps above run in :mod:`~rewardlab.llm_reward.sandbox.worker`. A job that takes a ``progress``
argument is given a function that sends JSON data to the caller at once (a training run's
checkpoints, as they are made): the caller keeps it in :attr:`SandboxRun.progress`, so what the job
reported survives a timeout or a crash that loses its result.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.llm_reward.sandbox.cgroups import cpu_limit
from rewardlab.llm_reward.sandbox.files import read_private_tail, remove_tree, write_private
from rewardlab.llm_reward.sandbox.forkserver import fork_server, kill_group
from rewardlab.llm_reward.sandbox.landlock import landlock_abi
from rewardlab.llm_reward.sandbox.protocol import Limits, read_message, reference
from rewardlab.llm_reward.sandbox.quota import MAX_ENTRIES, QUOTA_EXIT
from rewardlab.llm_reward.sandbox.worker import LOG_NAME

__all__ = ["Limits", "SandboxRun", "landlock_abi", "read_private_tail", "remove_tree",
           "run_sandboxed", "write_private"]

#: the most bytes of progress messages the caller keeps of one job
MAX_PROGRESS_BYTES = 256 * 2**20
_log = logging.getLogger(__name__)
#: what every fork server imports first: the worker's side
WORKER_MODULE = "rewardlab.llm_reward.sandbox.worker"
# A worker that sent its result gets this long to exit before it is killed.
EXIT_GRACE_S = 5.0


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
    job: Callable[..., dict[str, Any]],
    payload: Mapping[str, Any],
    run_dir: str | os.PathLike[str],
    limits: Limits | None = None,
    preload: Sequence[str] = (),
    warm: Sequence[tuple[Callable[[str], None], str]] = (),
    temporary: bool = False,
    companion: Callable[..., None] | None = None,
    on_progress: Callable[[Any], bool] | None = None,
) -> SandboxRun:
    """Run ``job(payload, guard)`` in a sandboxed worker and return what came back.

    Never raises for anything the job does; raises only for bad arguments, or when the
    fork server cannot start.

    :param job: a module-level function ``job(payload, guard)`` that returns a
        JSON-serialisable dict (the caller's: the sandbox names none of its own; it reaches
        the worker as its :func:`~rewardlab.llm_reward.sandbox.protocol.reference`).
    :param payload: JSON-serialisable input of the job.
    :param run_dir: an existing directory, the only place the worker may write.
    :param limits: resource limits (defaults of :class:`Limits` when ``None``).
    :param preload: modules imported before the guard is installed, by the fork server once
        for all workers: those the job needs that would otherwise be imported under the
        guard, which refuses what some imports do (``ctypes`` calls), or in every worker.
        Each distinct list gets its own fork server.
    :param warm: ``(function, json_text)`` pairs (module-level functions) the fork server calls once
        before forking (:class:`~rewardlab.llm_reward.sandbox.forkserver.ForkServer`): what they
        load, every worker inherits. Each distinct list gets its own fork server too.
    :param temporary: ``run_dir`` is a temporary folder that the caller removes after the
        run; should the caller die first (SIGKILL runs no ``finally``), the fork server
        removes it once it has killed the worker.
    :param companion: the module-level function of the process that runs the untrusted code
        for the job (a reward program), called as ``function(payload, channel, guard)`` in a process
        the worker forks before it confines itself, and confined further
        (:mod:`~rewardlab.llm_reward.sandbox.worker`); the job is then called as ``job(payload,
        guard, companion=(channel, pid))``, its end of the socket pair and the companion's pid.
    :param on_progress: called with each progress message (untrusted data) as it arrives; when
        it returns True the worker is killed then, and the run comes back with ``stopped``
        (what it sent so far in ``progress``): a caller stops a job that is not worth finishing.
    """
    limits = limits or Limits()
    job_name = reference(job)
    companion_name = reference(companion) if companion is not None else None
    warm_names = [(reference(function), argument) for function, argument in warm]
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise ValueError(f"run_dir={os.fspath(run_dir)!r} is not an existing directory")
    request = {
        "job": job_name,
        "payload": json.dumps(payload),
        "run_dir": os.fspath(run_dir),
        "limits": asdict(limits),
        "preload": [WORKER_MODULE, job.__module__, *preload,
                    *([companion.__module__] if companion else [])],
        "temporary": bool(temporary),
        "companion": companion_name,
    }
    _say_once_what_is_unbounded()
    server = fork_server(request["preload"], warm_names)
    start = time.monotonic()
    connection = server.connect(request)
    progress: list[Any] = []
    try:
        envelope, exit_code, timed_out, stopped = _follow_worker(
            connection, start + limits.timeout_s, progress, on_progress
        )
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
        _log.warning("rewardlab: no cpu cgroup can be made here (cgroup v1, or v2 with the cpu "
                     "controller delegated to this user): a sandboxed candidate's CPU share is not "
                     "bounded, and a program's busy threads can slow the candidates beside it")


def _follow_worker(
    connection: Any,
    deadline: float,
    progress: list[Any],
    on_progress: Callable[[Any], bool] | None = None,
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
        # a result sent by a worker whose run directory outgrew its quota is no result
        envelope = None
    if envelope is not None:
        if (isinstance(envelope, dict) and "result" in envelope
                and isinstance(envelope["result"], dict | None)):
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
        error, kind = (f"timed out: the job ran past its wall-clock limit of "
                       f"{limits.timeout_s:g} s and was killed"), "timeout"
    else:
        error, kind = _describe_exit(exit_code, limits)
    return SandboxRun(None, None, error, kind, wall_s, exit_code, _log_tail(run_dir))


def _describe_exit(exit_code: int | None, limits: Limits) -> tuple[str, str]:
    if exit_code is not None and exit_code < 0:
        number = -exit_code
        known = number in signal.Signals._value2member_map_
        name = signal.Signals(number).name if known else str(number)
        if number == signal.SIGXCPU:
            return (f"the job used up its CPU-time limit of {limits.cpu_limit_s} s and was killed "
                    "(SIGXCPU)"), "limit"
        if number == signal.SIGKILL:
            return ("the worker was killed (SIGKILL): it hit its CPU-time limit, ran out of "
                    f"memory (address-space limit {limits.memory_mb} MB) or the system killed "
                    "it"), "limit"
        if number == signal.SIGXFSZ:
            return (f"the job wrote a file larger than {limits.max_file_mb} MB and was killed "
                    "(SIGXFSZ)"), "limit"
        return f"the worker died from signal {name}", "crash"
    if exit_code == QUOTA_EXIT:
        return (f"the job filled its run directory past its disk quota of "
                f"{limits.max_disk_mb:g} MB (or past {MAX_ENTRIES:,} files and folders, or into "
                "folders too deep to measure) and was killed"), "limit"
    return f"the worker exited (code {exit_code}) without sending a result", "crash"


def _log_tail(run_dir: Path, limit: int = 2000) -> str:
    return read_private_tail(run_dir / LOG_NAME, limit)


