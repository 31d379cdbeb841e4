"""What the sandbox's processes say to one another, and what a job is: the layer below them all.

- **Jobs.** A job is a module-level function ``job(payload: dict, guard: Guard, **extras) ->
  dict`` (its payload and result are JSON data), handed to
  :func:`~rewardlab.llm_reward.sandbox.runner.run_sandboxed` as the function object. It
  reaches the fork server, a fresh interpreter, as its :func:`reference` (``"module:name"``,
  as pickle names a function) and is found there again by :func:`resolve`; the sandbox
  never names a job of its own, so it imports nothing of the code that uses it. A job's
  *companion* (the process that runs the untrusted code for it) and the fork server's
  warm-ups travel the same way.
- **Messages** between the caller, the fork server and a worker: a 4-byte length and
  JSON (:func:`send_message`, :func:`read_message`), parsed strictly
  (:func:`strict_json`: no NaN, bounded depth and size), since a worker is untrusted.
- **Frames** between a job and its companion (:class:`Frames`): two 4-byte lengths, a JSON
  header and a block of raw bytes, for the arrays a job sends at every step.
- **Limits** of one worker (:class:`Limits`).
"""

from __future__ import annotations

import importlib
import json
import re
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Frames", "Limits", "read_message", "reference", "resolve", "send_message", "strict_json",
]

MAX_MESSAGE_BYTES = 16 * 2**20
MESSAGE_HEADER = struct.Struct(">I")
# The worker's processes that its task limits count besides the job's threads: the
# namespace holder and init (see rewardlab.llm_reward.sandbox.namespaces), and the job's
# companion where it has one.
WORKER_PROCESSES = 2
# Kept from the caller's environment for the fork server and its workers: where Python and
# the libraries are, the locale and the GPUs; everything else (tokens, keys) stays behind.
KEPT_ENVIRONMENT = ("PATH", "VIRTUAL_ENV", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES")


# ------------------------------------------------------------------------- jobs
def reference(function: Callable[..., Any]) -> str:
    """``"module:name"`` of a module-level function, by which another process finds it.

    :param function: a job, a companion or a warm-up.
    :raises ValueError: ``function`` is not found again under that name (a lambda, a nested
        function, a bound method), so a fresh interpreter could not find it either.
    """
    if not callable(function):
        raise ValueError(f"{function!r:.80} is not a function: hand the sandbox the job "
                         "(companion, warm-up) itself, a module-level function, not its name")
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    text = f"{module}:{name}"
    if not module or "." in name or "<" in name:
        raise ValueError(f"{function!r} is not a module-level function; a sandboxed job, companion "
                         "or warm-up must be one (its module is imported in the fork server)")
    try:
        found = resolve(text)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"{text} cannot be imported again ({error}); a sandboxed job must be a "
                         "function of an importable module") from None
    if found is not function:
        raise ValueError(f"{text} names another object than {function!r}")
    return text


def resolve(text: str) -> Callable[..., Any]:
    """The function :func:`reference` named ``text``, imported.

    :param text: ``"module:name"``.
    """
    module_name, _, name = text.partition(":")
    if not module_name or not name:
        raise ValueError(f"{text!r} is not 'module:function'")
    return getattr(importlib.import_module(module_name), name)


# --------------------------------------------------------------------- messages
def send_message(write: Callable[[bytes], Any], message: dict[str, Any]) -> None:
    """Frame ``message`` as a 4-byte length and JSON and hand it to ``write``.

    :param write: e.g. ``socket.sendall``.
    :param message: JSON data.
    """
    data = json.dumps(message).encode()
    write(MESSAGE_HEADER.pack(len(data)) + data)


def read_message(
    connection: socket.socket, deadline: float, sizes: list[int] | None = None
) -> dict[str, Any] | None:
    """The next framed message, or ``None`` when the peer closed or ``deadline`` passed.

    :param connection: a connected stream socket.
    :param deadline: a ``time.monotonic()`` value.
    :param sizes: gets the size in bytes of each message read.
    :raises ValueError: the bytes are not a framed JSON object (a malformed or oversized
        message from an untrusted worker).
    """
    header = _read_exactly(connection, MESSAGE_HEADER.size, deadline)
    if header is None:
        return None
    (size,) = MESSAGE_HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"a message of {size} bytes is larger than {MAX_MESSAGE_BYTES}")
    if sizes is not None:
        sizes.append(size)
    data = _read_exactly(connection, size, deadline)
    if data is None:
        return None
    message = strict_json(data)
    if not isinstance(message, dict):
        raise ValueError("a message is not a JSON object")
    return message


MAX_DEPTH = 32
MAX_ITEMS = 200_000


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')


def _values_bound(raw: bytes) -> int:
    """At least the number of values in the JSON text ``raw``: its commas and opened arrays
    and objects, plus one; those inside strings are dropped when they would matter."""

    def bound(text: bytes) -> int:
        return text.count(b",") + text.count(b"[") + text.count(b"{") + 1

    found = bound(raw)
    # a string is a value or a key: with more quotes than twice that, there are too many
    if found <= MAX_ITEMS or raw.count(b'"') > 4 * MAX_ITEMS:
        return found
    return bound(_JSON_STRING.sub(b'""', raw))


def strict_json(data: bytes | str) -> Any:
    """Parse JSON from an untrusted peer: no ``NaN``/``Infinity``, at most ``MAX_DEPTH``
    levels of nesting and ``MAX_ITEMS`` values in all.

    :raises ValueError: for anything else, deep nesting included (never ``RecursionError``).
    """
    # counted before parsing: a 16 MB frame of empty lists cost the caller many times its size
    # in memory, and seconds, to build before it was refused (red-team finding)
    if _values_bound(data.encode() if isinstance(data, str) else data) > MAX_ITEMS:
        raise ValueError(f"the JSON holds more than {MAX_ITEMS} values")
    try:
        value = json.loads(data, parse_constant=_refuse_constant)
    except RecursionError as error:
        raise ValueError("the JSON is nested too deeply") from error
    pending, items = [(value, 1)], 0
    while pending:
        node, depth = pending.pop()
        items += 1
        if depth > MAX_DEPTH or items > MAX_ITEMS:
            raise ValueError(f"the JSON is nested deeper than {MAX_DEPTH} or holds more than "
                             f"{MAX_ITEMS} values")
        if isinstance(node, dict):
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)
    return value


def _read_exactly(connection: socket.socket, size: int, deadline: float) -> bytes | None:
    chunks, received = [], 0
    while received < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        connection.settimeout(remaining)
        try:
            chunk = connection.recv(min(size - received, 2**20))
        except (TimeoutError, OSError):
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)


# ----------------------------------------------------------------------- limits
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
        :func:`~rewardlab.llm_reward.sandbox.cgroups.task_limit`.
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
        for name in ("timeout_s", "memory_mb", "max_open_files", "max_file_mb", "max_disk_mb",
                     "threads", "max_threads"):
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
        if self.max_threads is not None:
            return int(self.max_threads)
        return 128 + 4 * int(self.threads)

    @property
    def cpu_limit_s(self) -> int:
        """The CPU-time limit in whole seconds."""
        cpu = self.cpu_s if self.cpu_s is not None else self.timeout_s * (self.threads + 1)
        return max(1, int(cpu + 0.999))


# ----------------------------------------------------------------------- frames
_LENGTHS = struct.Struct(">II")
MAX_HEADER_BYTES = 64 * 1024
MAX_BLOCK_BYTES = 256 * 2**20


class Frames:
    """Frames over one stream socket: sent in one system call, read with as few as the
    data allows (a frame that fits the socket's buffer arrives whole). A frame with an
    empty header means "as in the last header": a step's request and answer are then only
    lengths and raw values.

    :param channel: a connected stream socket.
    """

    def __init__(self, channel: socket.socket):
        self.channel = channel
        self._pending = bytearray()

    def send(self, header: Mapping[str, Any] | None, block: bytes = b"") -> None:
        data = json.dumps(header).encode() if header is not None else b""
        self.channel.sendall(_LENGTHS.pack(len(data), len(block)) + data + block)

    def receive(self) -> tuple[Any, bytes] | None:
        """The next frame's parsed header (None when empty) and block; None when the peer closed.

        :raises ValueError: a malformed or oversized frame.
        """
        if not self._fill(_LENGTHS.size):
            return None
        header_size, block_size = _LENGTHS.unpack_from(self._pending)
        if header_size > MAX_HEADER_BYTES or block_size > MAX_BLOCK_BYTES:
            raise ValueError(f"a frame of {header_size} + {block_size} bytes is larger than "
                             "allowed")
        end = _LENGTHS.size + header_size + block_size
        if not self._fill(end):
            return None
        header_bytes = bytes(self._pending[_LENGTHS.size:_LENGTHS.size + header_size])
        header = strict_json(header_bytes) if header_size else None
        block = bytes(self._pending[_LENGTHS.size + header_size:end])
        del self._pending[:end]
        return header, block

    def _fill(self, size: int) -> bool:
        while len(self._pending) < size:
            chunk = self.channel.recv(max(1 << 12, size - len(self._pending)))
            if not chunk:
                return False
            self._pending += chunk
        return True
