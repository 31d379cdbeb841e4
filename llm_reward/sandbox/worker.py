"""A sandboxed worker from the inside: the steps :mod:`~rewardlab.llm_reward.sandbox.runner`
lists, run in the process the fork server forked for one job.

:func:`worker_main` isolates the process, starts the job's companion where it has one,
confines itself, installs the guard and calls the job; it sends the job's result (or why
there is none) over its connection and exits.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import resource
import socket
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

from rewardlab.llm_reward.sandbox.guard import Guard
from rewardlab.llm_reward.sandbox.isolation import confine, make_undumpable
from rewardlab.llm_reward.sandbox.protocol import (
    KEPT_ENVIRONMENT,
    WORKER_PROCESSES,
    Limits,
    resolve,
    send_message,
)
from rewardlab.llm_reward.sandbox.readable import gpu_devices, readable_roots

__all__ = ["LOG_NAME", "worker_main"]

LOG_NAME = "worker.log"


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

    :param job: the job's :func:`~rewardlab.llm_reward.sandbox.protocol.reference`.
    :param payload_json: the job's payload as JSON text.
    :param run_dir: the run directory.
    :param limits: :class:`Limits` as a dict.
    :param preload: modules to import before the guard (already imported by the server).
    :param write: sends bytes to the caller (the worker's connection).
    :param companion: the reference of the job's companion (see
        :func:`~rewardlab.llm_reward.sandbox.runner.run_sandboxed`).
    """
    envelope: dict[str, Any] = {"result": None}
    guard = None
    try:
        _isolate(run_dir, Limits(**limits), companion is not None)
        for module in preload:
            importlib.import_module(module)
        function = resolve(job)
        payload = json.loads(payload_json)
        extras: dict[str, Any] = {}
        if companion is not None:
            extras["companion"] = _start_companion(companion, payload, Limits(**limits))
        if "progress" in inspect.signature(function).parameters:
            extras["progress"] = functools.partial(_send_progress, write)
        guard = Guard(writable=[run_dir])
        gpu = bool(limits.get("gpu"))
        devices = gpu_devices() if gpu else []
        extra = ["/sys/bus/pci", "/sys/devices", "/dev/shm"] if gpu else []
        # the kernel's rules; the guard only explains
        confine(run_dir, readable_roots(extra), devices)
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
    function = resolve(companion)
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
            guard = Guard(writable=[])
            readable = readable_roots(kernel_views=False)
            _forget_the_callers_settings(readable)
            # the allowlist, whose refused calls are named to the job over the pair; no /proc
            confine(None, readable, (), companion=theirs)
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


#: the environment a companion keeps: its threads and locale
_COMPANION_ENVIRONMENT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LANG", "LC_ALL")


def _forget_the_callers_settings(readable: list[str]) -> None:
    """Drop from the companion's process what it holds of its callers' settings and no
    program needs: the environment but for :data:`_COMPANION_ENVIRONMENT` (the caller's
    ``PATH`` and import path among the rest), the fork server's command line (``sys.argv``,
    ``sys.orig_argv``), the import path's folders it may not read, and the strings of the
    command line and environment the process started with (what ``/proc/self/cmdline``
    and ``/proc/self/environ`` show), which ``ctypes`` reads from the top of the stack.

    Their copies freed on the heap stay until reused: a program that scans its memory may
    still find pieces of them.

    :param readable: what the companion may read (:func:`readable_roots`).
    """
    kept = {name: os.environ[name] for name in _COMPANION_ENVIRONMENT if name in os.environ}
    os.environ.clear()  # unsetenv each: the C library's environment holds none of the block
    os.environ.update(kept)
    sys.argv[:] = [""]
    sys.orig_argv[:] = []
    sys.path[:] = [path for path in sys.path if any(
        path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in readable)]
    for path in [path for path in sys.path_importer_cache if path not in sys.path]:
        del sys.path_importer_cache[path]
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        # glibc's program_invocation_name is argv[0], the first of the strings the kernel put
        # at the top of the stack; AT_EXECFN, the program's file name, follows the last
        start = ctypes.c_void_p.in_dll(libc, "program_invocation_name").value
        libc.getauxval.restype = ctypes.c_ulong
        libc.getauxval.argtypes = [ctypes.c_ulong]
        end = libc.getauxval(31)
    except (OSError, AttributeError, ValueError):
        return  # not glibc: the block stays
    if start and end and 0 < end - start < 2**21:
        ctypes.memset(start, 0, end - start)


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
    kept = {name: os.environ[name] for name in (*KEPT_ENVIRONMENT, "PYTHONPATH")
            if name in os.environ}
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
