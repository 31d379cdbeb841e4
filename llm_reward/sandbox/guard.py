"""The run-time guard of a sandboxed worker: Python audit hooks, a thread guard and a watch
on the modules a reward program could monkeypatch.

Installed once in the worker process after its own imports and before the program is
loaded (:func:`rewardlab.llm_reward.sandbox.runner.run_sandboxed` does it). From then on, for every piece
of code in the process (the program, or library code the program may have redirected):

- no network (every ``socket.*`` event), no processes (``subprocess.Popen``, ``os.system``,
  ``os.fork``, ``os.exec*``, ``os.posix_spawn``, ``os.spawn*``), no signals to processes
  (``os.kill``, ``os.killpg``, ``signal.pthread_kill``), no ``ctypes``, no changes to the
  resource limits or the environment variables;
- files are written, created, renamed or deleted only inside the writable roots (the run
  directory).

While the reward program's own code is on the call stack (frames compiled from
``<reward_program>``), also:

- no files are opened at all, except reading Python source and extension files of the
  installed libraries (lazy imports and warnings read them); no directory listings
  outside them, no ``chdir``;
- no threads;
- the program itself may not call ``exec``/``compile``, import modules (other than through
  its restricted ``__import__``), introspect frames (``sys._getframe``, ``f_back``,
  ``gi_frame``), build code objects, or install trace/profile/audit hooks.

A violation raises :class:`SandboxViolation` where it happened and is also recorded in
:attr:`Guard.violation`, so a program that merely catches the exception still fails.

The guard is feedback, not a security layer. It runs in the program's own interpreter
and keeps its state there (per thread), so a program written to escape can switch it
off (reach it through the frames, mark its thread busy, replace its methods) or write
its record; it sees only what goes through Python, not I/O done in C++ (``torch.save``,
``torch.from_file``). What it gives is the clear message an honest program needs (what
it tried, on which line). The boundary is the kernel's
(:mod:`~rewardlab.llm_reward.sandbox.isolation`): namespaces, Landlock, seccomp and the
limits hold whether the guard is on or not, and a call the companion's seccomp allowlist
refuses fails the candidate by name without the guard. Its silence proves nothing.
"""

from __future__ import annotations

import _thread
import math
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from types import FrameType
from typing import Any

import numpy as np
import torch

from rewardlab.llm_reward.programs.checks import PROGRAM_FILENAME

__all__ = ["Guard", "SandboxViolation"]

CODE_SUFFIXES = (".py", ".pyc", ".so", ".pyi", ".pth")

# Event -> what the code tried to do, for every caller.
_ALWAYS_DENIED = {
    "os.system": "run a shell command (os.system)",
    "os.exec": "replace the process (os.exec*)",
    "os.posix_spawn": "start a process (os.posix_spawn)",
    "os.spawn": "start a process (os.spawn*)",
    "os.fork": "fork the process",
    "os.forkpty": "fork the process",
    "subprocess.Popen": "start a process (subprocess)",
    "pty.spawn": "start a process (pty.spawn)",
    "os.kill": "send a signal to a process (os.kill)",
    "os.killpg": "send a signal to a process group (os.killpg)",
    "signal.pthread_kill": "send a signal to a thread",
    "resource.setrlimit": "change the sandbox's resource limits",
    "resource.prlimit": "change the sandbox's resource limits",
    "webbrowser.open": "open a web browser",
}
_ALWAYS_DENIED_PREFIXES = {
    "socket.": "use the network (socket)",  # socket.gethostname is allowed, see _check
    "ctypes.": "call native code through ctypes",
}
# Events that change the file system, and which of their arguments are paths.
_FILE_CHANGES = {
    "os.remove": (0,), "os.rename": (0, 1), "os.rmdir": (0,), "os.mkdir": (0,),
    "os.chmod": (0,), "os.chown": (0,), "os.link": (0, 1), "os.symlink": (1,),
    "os.truncate": (0,), "os.utime": (0,), "os.chflags": (0,), "os.lchflags": (0,),
    "os.lchmod": (0,), "os.setxattr": (0,), "os.removexattr": (0,), "os.mkfifo": (0,),
    "os.mknod": (0,), "shutil.copyfile": (1,), "shutil.copymode": (1,),
    "shutil.copystat": (1,), "shutil.copytree": (1,), "shutil.move": (0, 1),
    "shutil.rmtree": (0,), "shutil.chown": (0,), "shutil.make_archive": (0,),
    "shutil.unpack_archive": (1,),
}
# Events denied when the reward program itself is the caller.
_DENIED_FOR_PROGRAM = {
    "exec": "execute code objects (exec/eval)",
    "compile": "compile code (compile/eval)",
    "import": "import modules outside its restricted __import__",
    "sys._getframe": "inspect interpreter frames (sys._getframe)",
    "sys._current_frames": "inspect interpreter frames",
    "object.__getattr__": "read interpreter internals (frames, code objects)",
    "object.__setattr__": "change interpreter internals",
    "object.__delattr__": "change interpreter internals",
    "code.__new__": "build code objects",
    "function.__new__": "build function objects",
    "sys.settrace": "install a trace function",
    "sys.setprofile": "install a profile function",
    "sys.addaudithook": "install an audit hook",
    "gc.get_objects": "walk the garbage collector's objects",
    "gc.get_referrers": "walk the garbage collector's objects",
    "gc.get_referents": "walk the garbage collector's objects",
    "builtins.input": "read from standard input",
    "builtins.breakpoint": "start a debugger",
    "marshal.loads": "load marshalled code",
    "marshal.load": "load marshalled code",
    "pickle.find_class": "unpickle objects",
    "os.chdir": "change the working directory",
    "os.putenv": "change environment variables",
    "os.unsetenv": "change environment variables",
    "os.listdir": "list directories",
    "os.scandir": "list directories",
    "glob.glob": "list directories",
}
# Of those, the ones denied whenever the program is anywhere on the stack; directory
# listings of the libraries stay allowed (lazy imports list them).
_LISTINGS = ("os.listdir", "os.scandir", "glob.glob")
_DENIED_WHILE_PROGRAM_RUNS = (*_LISTINGS, "os.chdir", "os.putenv", "os.unsetenv")
# Modules and classes whose attributes a program could replace to change the training
# code's behaviour. A new attribute on a class shadows an inherited method, so classes
# must not gain any; modules gain attributes legitimately (lazy submodule imports).
_WATCHED_MODULES: tuple[tuple[str, Any], ...] = (
    ("torch", torch),
    ("torch.nn.functional", torch.nn.functional),
    ("numpy", np),
    ("math", math),
)
_WATCHED_CLASSES: tuple[tuple[str, type], ...] = (
    ("torch.Tensor", torch.Tensor),
    ("torch.Tensor", torch._C.TensorBase),
    ("numpy.ndarray", np.ndarray),
)


_RULED_EVENTS = frozenset(
    {*_ALWAYS_DENIED, *_FILE_CHANGES, *_DENIED_FOR_PROGRAM, "open", "socket.gethostname"}
)
_DENIED_PREFIXES = tuple(_ALWAYS_DENIED_PREFIXES)
_MISSING = object()


class SandboxViolation(PermissionError):
    """Raised where sandboxed code tried something the guard forbids."""


def _real_directory(path: str) -> str:
    return os.path.realpath(path) + os.sep


class Guard:
    """Audit-hook policy of one sandboxed worker; see the module docstring.

    :param writable: directories inside which trusted code may create, change and delete
        files (the run directory).
    :param library_roots: directories whose Python files the reward program may read
        indirectly (lazy imports, warnings); default: the directories on ``sys.path``.
    """

    def __init__(self, writable: Sequence[str], library_roots: Iterable[str] | None = None):
        self.writable = tuple(_real_directory(path) for path in writable)
        roots = sys.path if library_roots is None else library_roots
        self.library_roots = tuple(
            _real_directory(path) for path in roots if path and os.path.isdir(path)
        )
        self.violation: str | None = None
        self._state = threading.local()
        self._installed = False
        self._snapshot: dict[str, dict[str, Any]] = {}
        self._settings: tuple[Any, ...] = ()
        self._start_new_thread = _thread.start_new_thread

    def install(self) -> None:
        """Install the audit hook (for the rest of the process's life) and the thread guard."""
        if self._installed:
            raise RuntimeError("this guard is already installed")
        self._installed = True
        guarded = self._guarded_start_new_thread
        _thread.start_new_thread = guarded  # type: ignore[assignment]
        threading._start_new_thread = guarded  # type: ignore[attr-defined]
        sys.addaudithook(self._hook)

    def snapshot_modules(self) -> None:
        """Remember the attributes of torch, numpy, math and the tensor classes, and the
        global torch settings."""
        self._snapshot = {
            f"{name}:{id(owner)}": dict(vars(owner))
            for name, owner in (*_WATCHED_MODULES, *_WATCHED_CLASSES)
        }
        self._settings = _global_settings()

    def changed_modules(self) -> str | None:
        """What changed since :meth:`snapshot_modules` (a replaced or deleted module
        attribute, any change to a tensor class, a changed global setting), or ``None``.

        Compares identities with ``is`` (``id()`` would raise an audit event per attribute).
        """
        for name, owner in (*_WATCHED_MODULES, *_WATCHED_CLASSES):
            before, now = self._snapshot.get(f"{name}:{id(owner)}", {}), vars(owner)
            changed = sorted(attr for attr, value in before.items() if now.get(attr, _MISSING) is not value)
            if isinstance(owner, type):
                changed += sorted(set(now) - set(before))
            if changed:
                listed = ", ".join(f"{name}.{attr}" for attr in changed[:5])
                return (
                    f"the program replaced, added or deleted {listed}; reward programs may not "
                    "change torch, numpy or math"
                )
        if self._settings and _global_settings() != self._settings:
            return (
                "the program changed global torch/numpy settings (default dtype, threads "
                "or numpy error handling); reward programs may not"
            )
        return None

    # ------------------------------------------------------------------ policy
    def _deny(self, what: str, frame: FrameType | None) -> None:
        program = _program_frame(frame)
        if program is not None:
            reason = (
                f"the reward program tried to {what} (line {program.f_lineno}); the sandbox "
                "does not allow it"
            )
        else:
            reason = (
                f"code in the sandbox tried to {what}, outside the program's own lines (a "
                "library function the program may have replaced or redirected); the sandbox "
                "does not allow it"
            )
        if self.violation is None:
            self.violation = reason
        raise SandboxViolation(reason)

    def _guarded_start_new_thread(self, function: Any, args: Any, kwargs: Any = None) -> int:
        frame = sys._getframe(1)
        if _program_frame(frame) is not None:
            self._deny("start a thread", frame)
        if kwargs is None:
            return self._start_new_thread(function, args)
        return self._start_new_thread(function, args, kwargs)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        # Most events (``builtins.id``, ``object.__getattr__``, ...) concern no rule.
        if event not in _RULED_EVENTS and not event.startswith(_DENIED_PREFIXES):
            return
        state = self._state
        if getattr(state, "busy", False):
            return
        state.busy = True
        try:
            try:
                caller = sys._getframe(1)
            except ValueError:  # raised from C with no Python frame (thread start, shutdown)
                caller = None
            self._check(event, args, caller)
        finally:
            state.busy = False

    def _check(self, event: str, args: tuple[Any, ...], caller: FrameType | None) -> None:
        """Deny ``event`` if the policy says so; ``caller`` is the frame that raised it."""
        what = _ALWAYS_DENIED.get(event)
        if event == "socket.gethostname":  # TensorBoard names its event files after the host
            what = None if _program_frame(caller) is None else "read the host name"
        elif what is None:
            for prefix, reason in _ALWAYS_DENIED_PREFIXES.items():
                if event.startswith(prefix):
                    what = reason
                    break
        if what is not None:
            self._deny(what, caller)
        elif event == "open":
            self._check_open(args, caller)
        elif event in _FILE_CHANGES:
            if _program_frame(caller) is not None:
                self._deny(f"change files ({event})", caller)
            for index in _FILE_CHANGES[event]:
                if index < len(args) and not self._is_writable(args[index]):
                    self._deny(f"change {args[index]!r:.200} outside its run directory ({event})", caller)
        elif event in _DENIED_FOR_PROGRAM:
            if event in _DENIED_WHILE_PROGRAM_RUNS:
                if _program_frame(caller) is not None and not (
                    event in _LISTINGS and self._is_library_path(args[0] if args else ".")
                ):
                    self._deny(f"{_DENIED_FOR_PROGRAM[event]} ({args[0] if args else '.'!r:.200})", caller)
            elif caller is not None and caller.f_code.co_filename == PROGRAM_FILENAME:
                self._deny(_DENIED_FOR_PROGRAM[event], caller)

    def _check_open(self, args: tuple[Any, ...], caller: FrameType | None) -> None:
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        writes = _opens_for_writing(mode, flags)
        if _program_frame(caller) is not None:
            if writes or not self._is_library_file(path):
                self._deny(f"open the file {path!r:.200}", caller)
        elif writes and not isinstance(path, int) and not self._is_writable(path):
            self._deny(f"write the file {path!r:.200} outside its run directory", caller)

    def _is_writable(self, path: Any) -> bool:
        real = _real_path(path)
        return real is not None and any((real + os.sep).startswith(root) for root in self.writable)

    def _is_library_path(self, path: Any) -> bool:
        real = _real_path(path)
        return real is not None and any((real + os.sep).startswith(root) for root in self.library_roots)

    def _is_library_file(self, path: Any) -> bool:
        return (
            isinstance(path, str | bytes)
            and os.fsdecode(path).endswith(CODE_SUFFIXES)
            and self._is_library_path(path)
        )


def _real_path(path: Any) -> str | None:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str | bytes):
        return None
    return os.path.realpath(os.fsdecode(path))


def _opens_for_writing(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str) and any(char in mode for char in "wax+"):
        return True
    if isinstance(flags, int):
        write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        return bool(flags & write_flags)
    return False


def _program_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame of reward-program code on the stack from ``frame`` up, if any."""
    while frame is not None:
        if frame.f_code.co_filename == PROGRAM_FILENAME:
            return frame
        frame = frame.f_back
    return None


def _global_settings() -> tuple[Any, ...]:
    return (
        torch.get_default_dtype(),
        torch.get_num_threads(),
        tuple(sorted(np.geterr().items())),
    )
