"""The sandbox's own fork server: imports torch once, then forks one worker per job.

Starting a fresh interpreter per job would cost seconds of imports each time, so
:func:`rewardlab.llm_reward.sandbox.runner.run_sandboxed` asks a long-lived server process to
fork its workers. The server is our own rather than ``multiprocessing``'s because

- it is started with a minimal environment, so no worker can find the caller's secrets
  in its inherited environment block (``/proc/self/environ``);
- it never re-imports the caller's ``__main__`` module, so scripts need no
  ``if __name__ == "__main__":`` guard;
- it is not shared with other users of ``multiprocessing`` (SB3's ``SubprocVecEnv`` starts
  a fork server of its own, without our preloaded modules).

Protocol, over a Unix socket in a private directory, each message a 4-byte length and
JSON: the client sends one request; the forked worker sends ``{"pid": ...}`` and later
its ``{"result": ...}`` envelope; after the worker has exited, the server sends
``{"exit": code}`` (negative: killed by that signal). The server answers only peers of its
own user (``SO_PEERCRED``); workers, which can create no socket, never reach it. It exits
when its standard input closes (the client process ended), killing any workers left.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from rewardlab.llm_reward.sandbox.protocol import (
    KEPT_ENVIRONMENT,
    MAX_MESSAGE_BYTES,
    MESSAGE_HEADER,
    WORKER_PROCESSES,
    Limits,
    resolve,
    send_message,
    strict_json,
)

__all__ = ["ForkServer", "fork_server", "kill_group"]

READY = b"ready\n"
STARTUP_TIMEOUT_S = 300.0
# Not ``python -m rewardlab.llm_reward.sandbox.forkserver``: importing the package imports this
# module first, and runpy would then run a second copy of it as __main__.
_SERVER_COMMAND = ("import sys, json; from rewardlab.llm_reward.sandbox.forkserver import serve; "
                   "serve(sys.argv[1], sys.argv[3:], json.loads(sys.argv[2]))")
#: the longest a server may take to start when it warms up (a first compile of PPO's graphs)
WARM_STARTUP_TIMEOUT_S = 1800.0


class ForkServer:
    """Client of one fork server process, started with ``preload`` imported.

    :param preload: modules the server imports before forking any worker.
    :param warm: ``(function, argument)`` pairs the server calls, after the imports and
        before forking any worker, as ``function(argument)``: the function's
        :func:`~rewardlab.llm_reward.sandbox.protocol.reference` and a
        JSON text. What they load (PPO's compiled graphs) every worker inherits. A failing
        one is reported on the server's standard error and skipped: each job must check
        for itself that what it needs is there.
    """

    def __init__(self, preload: Sequence[str], warm: Sequence[tuple[str, str]] = ()):
        self.preload = tuple(preload)
        self.warm = tuple((str(function), str(argument)) for function, argument in warm)
        self._directory = tempfile.mkdtemp(prefix="rewardlab-forkserver-")
        self.socket_path = os.path.join(self._directory, "socket")
        environment = {name: os.environ[name] for name in KEPT_ENVIRONMENT if name in os.environ}
        # The caller's import path, so the server finds the same modules (tests, checkouts);
        # workers read only the modules imported from it (readable_roots), not its folders.
        environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
        environment["HOME"] = self._directory
        #: the process that started the server, the only one it serves
        self.owner = os.getpid()
        started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER_COMMAND, self.socket_path, json.dumps(self.warm),
             *self.preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
            cwd=self._directory,
            start_new_session=True,
        )
        timeout = WARM_STARTUP_TIMEOUT_S if self.warm else STARTUP_TIMEOUT_S
        ready = _read_line(self.process.stdout, time.monotonic() + timeout)
        if ready != READY:
            self.close()
            raise RuntimeError(
                f"the sandbox's fork server did not start (exit code {self.process.poll()}); its "
                f"error, if any, is above. Preloaded modules: {', '.join(self.preload)}"
            )
        #: seconds from starting the server to its first fork (the imports it preloads)
        self.startup_s = time.monotonic() - started
        _STARTUPS.append(self.startup_s)

    def alive(self) -> bool:
        """Whether the server process is still running."""
        return self.process.poll() is None

    def connect(self, request: dict[str, Any]) -> socket.socket:
        """Ask for one worker; read its messages from the returned socket.

        :param request: the worker's instructions (JSON data).
        """
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if len(os.fsencode(self.socket_path)) < 100 or not hasattr(os, "O_PATH"):
            connection.connect(self.socket_path)
        else:  # a socket's path is limited to 107 bytes: through the folder's descriptor
            folder = os.open(self._directory, os.O_PATH)
            try:
                connection.connect(f"/proc/self/fd/{folder}/{os.path.basename(self.socket_path)}")
            finally:
                os.close(folder)
        send_message(connection.sendall, request)
        return connection

    def close(self) -> None:
        """Stop the server (closing its standard input) and remove its socket directory."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        for remove, path in ((os.unlink, self.socket_path), (os.rmdir, self._directory)):
            try:
                remove(path)
            except OSError:
                pass


_SERVERS: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], ForkServer] = {}
_SERVERS_LOCK = threading.Lock()
_STARTUPS: list[float] = []


def server_startups() -> list[float]:
    """The start-up seconds of every fork server this process started, in order."""
    return list(_STARTUPS)


def fork_server(preload: Sequence[str], warm: Sequence[tuple[str, str]] = ()) -> ForkServer:
    """The running fork server with ``preload`` imported and ``warm`` called, started on first use.

    :param preload: the modules to import once in the server.
    :param warm: what the server calls before forking (see :class:`ForkServer`).
    """
    key = (tuple(preload), tuple((str(function), str(argument)) for function, argument in warm))
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        # a forked child of the process that started it is not served: it starts its own
        if server is None or not server.alive() or server.owner != os.getpid():
            server = _SERVERS[key] = ForkServer(*key)
        return server


@atexit.register
def _close_servers() -> None:
    with _SERVERS_LOCK:
        for server in _SERVERS.values():
            # a forked child's copy of its parent's server is not its own
            if server.owner == os.getpid():
                server.close()
        _SERVERS.clear()


def _read_line(stream: Any, deadline: float) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([stream], [], [], remaining)[0]:
            return line
        byte = os.read(stream.fileno(), 1)
        if not byte:
            return line
        line += byte
    return line


# ------------------------------------------------------------------- the server
def serve(socket_path: str, preload: Sequence[str], warm: Sequence[Sequence[str]] = ()) -> None:
    """The server loop: fork a worker per request, report each worker's exit, stop on EOF.

    :param socket_path: where to listen.
    :param preload: modules to import first.
    :param warm: ``(function, argument)`` pairs to call next (see :class:`ForkServer`).
    """
    for module in preload:
        importlib.import_module(module)
    if warm:
        _warm_up(warm)
    # Imported here, in the server only: the caller imports this module for the client side.
    from rewardlab.llm_reward.sandbox.namespaces import run_isolated
    from rewardlab.llm_reward.sandbox.quota import process_handle
    from rewardlab.llm_reward.sandbox.worker import worker_main

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # relative to the server's working folder, the socket's own: a socket's path is limited
    # to 107 bytes, which a deep temporary folder exceeds
    listener.bind(os.path.relpath(socket_path))
    listener.listen(64)
    os.write(sys.stdout.fileno(), READY)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    stdin = sys.stdin.fileno()
    owner = os.getppid()  # the client that started this server
    requests: dict[socket.socket, _Request] = {}  # connections whose request is still coming
    workers: dict[int, socket.socket] = {}
    temporary: dict[int, str] = {}  # the run directories the caller will remove, by worker
    # a descriptor per worker that turns readable when its keeper exits, so that the exit
    # is reported at once rather than at the next look (where the kernel has pidfds)
    exits: dict[int, int] = {}
    try:
        while True:
            waited = [listener, stdin, *exits.values(), *requests]
            readable, _, _ = select.select(waited, [], [], 0.1)
            if stdin in readable and not os.read(stdin, 1):
                return
            if listener in readable:
                _accept(listener, owner, requests)
            for connection in list(requests):
                reading = requests[connection]
                if connection in readable:
                    reading.receive(connection)
                if reading.done or time.monotonic() > reading.deadline:
                    del requests[connection]
                    request = reading.request()
                    if request is None:
                        connection.close()
                        continue
                    pid = os.fork()
                    if pid == 0:
                        for handle in exits.values():
                            os.close(handle)
                        others = [listener, *workers.values(), *requests]
                        _run_worker(others, stdin, connection, request, worker_main, run_isolated)
                    workers[pid] = connection
                    handle = process_handle(pid)
                    if handle is not None:
                        exits[pid] = handle
                    if request.get("temporary") is True and isinstance(request.get("run_dir"), str):
                        temporary[pid] = request["run_dir"]
            _report_exits(workers)
            _forget_reported(workers, exits, temporary)
    finally:
        _shut_down(socket_path, requests, workers, temporary)


def _forget_reported(
    workers: dict[int, socket.socket], exits: dict[int, int], temporary: dict[int, str]
) -> None:
    """Close the exit handles of the workers whose exit was reported, and forget their run
    directories: the caller removes those."""
    for pid in [pid for pid in exits if pid not in workers]:
        os.close(exits.pop(pid))
    for pid in [pid for pid in temporary if pid not in workers]:
        del temporary[pid]


def _accept(listener: socket.socket, owner: int, requests: dict[socket.socket, _Request]) -> None:
    """Take the next connection as a request still coming, from the process that started the
    server only, never another of its user (a process a candidate left behind held
    connections open, and each one held the next candidate's start for seconds)."""
    connection, _ = listener.accept()
    if _peer(connection) == (owner, os.getuid()) and len(requests) < MAX_PENDING_REQUESTS:
        connection.setblocking(False)
        requests[connection] = _Request(time.monotonic() + REQUEST_TIMEOUT_S)
    else:
        connection.close()


def _warm_up(warm: Sequence[Sequence[str]]) -> None:
    """Call each ``(function, argument)`` of ``warm``; what they print goes to stderr, since the
    first line on standard output must be READY."""
    stdout = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        for function, argument in warm:
            try:
                resolve(function)(argument)
            except Exception as error:  # the jobs find out for themselves; the server serves
                print(f"rewardlab: the sandbox's fork server could not warm up with "
                      f"{function}: {type(error).__name__}: {error}", file=sys.stderr,
                      flush=True)
    finally:
        sys.stdout.flush()
        os.dup2(stdout, sys.stdout.fileno())
        os.close(stdout)


def _shut_down(
    socket_path: str,
    requests: dict[socket.socket, _Request],
    workers: dict[int, socket.socket],
    temporary: dict[int, str],
) -> None:
    """The server's end: close the requests still coming and kill the workers. The caller is
    gone (it closed our standard input, or died: SIGKILL runs no `finally`): remove what it
    would have removed, the temporary run directories of the workers it was waiting for and
    this server's own folder."""
    for connection in requests:
        connection.close()
    for pid in workers:
        kill_group(pid)
    _remove_orphaned({pid: temporary[pid] for pid in workers if pid in temporary})
    for remove, path in ((os.unlink, socket_path), (os.rmdir, os.path.dirname(socket_path))):
        try:
            remove(path)
        except OSError:
            pass


def _remove_orphaned(run_dirs: dict[int, str]) -> None:
    """Reap the killed workers ``run_dirs`` names, then remove their run directories."""
    from rewardlab.llm_reward.sandbox.cgroups import remove_keeper_cgroup
    from rewardlab.llm_reward.sandbox.files import remove_tree

    for pid, run_dir in run_dirs.items():
        try:
            os.waitpid(pid, 0)  # the keeper; its namespaces' processes were killed with it
        except ChildProcessError:
            pass
        remove_keeper_cgroup(pid)
        for _ in range(50):  # a killed job may finish the system call it was in
            remove_tree(run_dir)
            if not os.path.lexists(run_dir):
                break
            time.sleep(0.02)


def _peer(connection: socket.socket) -> tuple[int, int] | None:
    """The process id and user id at the other end of a Unix socket (``SO_PEERCRED``)."""
    try:
        credentials = connection.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
        )
    except OSError:
        return None
    pid, uid, _ = struct.unpack("3i", credentials)
    return pid, uid


#: the longest a client may take to send its request once connected
REQUEST_TIMEOUT_S = 2.0
#: connections whose request is still coming that the server holds at once
MAX_PENDING_REQUESTS = 64


class _Request:
    """One request being read without blocking the server: a 4-byte length and JSON, by
    ``deadline``, at most :data:`MAX_MESSAGE_BYTES`."""

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.data = bytearray()
        self.done = False

    def receive(self, connection: socket.socket) -> None:
        """Take what the connection holds now; done once the request is whole, closed or too
        long."""
        header = MESSAGE_HEADER.size
        body = MESSAGE_HEADER.unpack_from(self.data)[0] if len(self.data) >= header else 0
        needed = header + body
        try:
            chunk = connection.recv(min(max(needed - len(self.data), 1), 2**20))
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.done = True
            return
        self.data += chunk
        if len(self.data) >= MESSAGE_HEADER.size:
            size = MESSAGE_HEADER.unpack_from(self.data)[0]
            self.done = size > MAX_MESSAGE_BYTES or len(self.data) >= MESSAGE_HEADER.size + size

    def request(self) -> dict[str, Any] | None:
        """The request, or None when it is incomplete, too long or not a JSON object."""
        if len(self.data) < MESSAGE_HEADER.size:
            return None
        size = MESSAGE_HEADER.unpack_from(self.data)[0]
        if size > MAX_MESSAGE_BYTES or len(self.data) != MESSAGE_HEADER.size + size:
            return None
        try:
            request = strict_json(bytes(self.data[MESSAGE_HEADER.size:]))
        except ValueError:
            return None
        return request if isinstance(request, dict) else None


def _run_worker(
    others: list[socket.socket],
    stdin: int,
    connection: socket.socket,
    request: dict[str, Any],
    worker_main: Callable[..., None],
    run_isolated: Callable[..., None],
) -> None:
    """In the forked child: run the job and exit, never returning to the server loop.

    Closes the listener and the connections of the other running workers first, so a
    worker cannot write into another worker's result.
    """
    try:
        for other in others:
            other.close()
        os.close(stdin)
        fd = connection.detach()
        # Reading the request with a timeout made the socket non-blocking; a large result
        # must block until the caller has read it, not fail half-written.
        os.set_blocking(fd, True)

        def write(data: bytes) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]

        os.setsid()  # the keeper leads the worker's process group
        send_message(write, {"pid": os.getpid()})

        def job() -> None:
            worker_main(request["job"], request["payload"], request["run_dir"], request["limits"],
                        tuple(request["preload"]), write, request.get("companion"))

        limits = Limits(**request["limits"])
        tasks = limits.thread_limit + WORKER_PROCESSES + (1 if request.get("companion") else 0)
        quota_mb, cpus = float(limits.max_disk_mb), float(limits.threads)
        run_isolated(job, request["run_dir"], quota_mb, tasks, cpus)
    finally:
        os._exit(1)


def _report_exits(workers: dict[int, socket.socket]) -> None:
    while workers:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = workers.pop(pid, None)
        if connection is None:
            continue
        if os.WIFSIGNALED(status):  # a keeper killed on a timeout left its pids cgroup behind
            from rewardlab.llm_reward.sandbox.cgroups import remove_keeper_cgroup

            remove_keeper_cgroup(pid)
        try:
            send_message(connection.sendall, {"exit": os.waitstatus_to_exitcode(status)})
        except OSError:
            pass
        connection.close()


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (a worker calls ``setsid`` first) and ``pid``.

    :param pid: the worker's process id.
    """
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass

