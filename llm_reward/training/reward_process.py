"""The reward program's own process: the only process that ever loads a program.

A sandboxed job that trains on a program's reward (the search's evaluations, the
prescreen's scoring) asks :func:`~rewardlab.llm_reward.sandbox.runner.run_sandboxed` for a
companion. The worker forks it before it confines itself; the companion confines itself
further (no file it may write, no GPU, no connection but its end of one socket pair, an
address-space limit even where the job has none) and then loads the program and answers
reward requests (:func:`serve_rewards`). The job talks to it through :class:`RemoteReward`,
which has :class:`~rewardlab.llm_reward.programs.program.RewardFunction`'s call.

So a program that escapes Python's checks in its process holds no channel to the caller
and no part of the training: it cannot ship a policy, write the result or a log the
caller reads, or touch the networks it is scored on. What it controls is what it
answers, and :class:`RemoteReward` reads that strictly: a fixed number of finite float32
values per component, a few names, bounded text.

Protocol (one stream socket pair): each frame is two 4-byte lengths, a JSON header and a
block of raw bytes. The job sends ``{"arrays": [[name, dtype, shape], ...]}`` and the
inputs' bytes; the companion answers ``{"ok": true, "names": [...], "per_state": ...}``
and the reward and each component as float32, one row each, or ``{"ok": false, "kind",
"reason", "traceback"}``. An empty header means "as in the last one", so that a step's
frames are lengths and values only. The companion's first frame, before any request, says
whether the program loaded.
"""

from __future__ import annotations

import functools
import math
import os
import resource
import signal
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import torch

from rewardlab.llm_reward.programs.program import (
    COMPONENT_NAME,
    MAX_COMPONENTS,
    MAX_MAGNITUDE,
    MAX_MESSAGE_CHARS,
    ProgramError,
    RewardFunction,
    RewardProgram,
    program_traceback,
)
from rewardlab.llm_reward.sandbox.isolation import REFUSED_SIGNAL, RefusalWatch
from rewardlab.llm_reward.sandbox.protocol import Frames

__all__ = ["RemoteReward", "serve_rewards"]

_LENGTHS = struct.Struct(">II")
MAX_HEADER_BYTES = 64 * 1024
MAX_BLOCK_BYTES = 256 * 2**20
#: how long closing waits for the companion to exit (to count its CPU time and memory, and
#: to see its last calls); one that has not exited by then fails the program and is left to
#: the worker's teardown
CLOSE_WAIT_S = 5.0
#: how often (in calls) the companion compares torch, numpy and math with their snapshot
MODULE_CHECK_EVERY = 64
_KINDS = ("program", "limit", "sandbox")
_DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "int32": torch.int32,
           "bool": torch.bool, "uint8": torch.uint8}


# ------------------------------------------------------------------ the job's side
class RemoteReward:
    """:class:`~rewardlab.llm_reward.programs.program.RewardFunction`'s call, answered by the
    companion process that loaded the program.

    :param channel: the job's end of the socket pair.
    :param pid: the companion's process id (to tell how it ended).
    :param program: the program the companion loads.
    :param description: the env's description.
    :raises ProgramError: the program failed to load.
    """

    def __init__(self, channel: socket.socket, pid: int, program: RewardProgram, description: Any):
        self.program = program
        self.description = description
        self.calls = 0
        self.per_state = False
        self.per_state_mode = ""
        self.per_state_reason = ""
        self._refusals = RefusalWatch.receive(channel)  # the first thing the companion sends
        self._frames = Frames(channel)
        self._pid = pid
        self._layout: list[list[Any]] | None = None  # of the last request sent
        self._names: list[str] | None = None  # of the last answer with a header
        self._answer(0)  # the first frame: whether the program loaded

    def __call__(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
        env_reward: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The program's reward and components for one batched step (see
        :meth:`RewardFunction.__call__ <rewardlab.llm_reward.programs.program.RewardFunction.__call__>`).

        :raises ProgramError: the program failed, answered something malformed or its process ended.
        """
        self.calls += 1
        arrays = {"obs": obs, "action": action, "next_obs": next_obs, "terminated": terminated}
        if env_reward is not None:
            arrays["env_reward"] = env_reward
        plain = {name: _sendable(value) for name, value in arrays.items()}
        layout = [[name, str(value.dtype).removeprefix("torch."), list(value.shape)] for name, value in plain.items()]
        header = None if layout == self._layout else {"arrays": layout}
        self._layout = layout
        try:
            self._frames.send(header, b"".join(value.numpy().tobytes() for value in plain.values()))
        except OSError:
            raise self._ended() from None
        reward, components = self._answer(len(obs))
        return reward.to(obs.device), {name: value.to(obs.device) for name, value in components.items()}

    def close(self) -> ProgramError | None:
        """Close the channel, reap the companion (so that this process's children's usage,
        ``RUSAGE_CHILDREN``, holds its CPU time and memory) and wait for the watch of its
        refused calls. Never raises: a companion that does not exit at the closed channel is
        left to the worker's teardown (the kernel kills what is left in its PID namespace),
        since this process may not signal it.

        :return: the failure of a call the sandbox refused that no answer reported (one made
            after the last answer, as the companion ended), or of a companion that did not
            end, or ``None``.
        """
        self._frames.channel.close()
        _, running = self._reap()
        refused = self._refusals.wait(0.0 if running else CLOSE_WAIT_S)
        if refused is not None:
            return _refused_call(refused)
        if running:  # what it does from now on no one would see: its result is not accepted
            return ProgramError(f"the reward program's process did not end within "
                                f"{CLOSE_WAIT_S:g} s of the training's end (a reward program must "
                                "return its reward, not keep its process running)")
        return None

    def _reap(self) -> tuple[int | None, bool]:
        """Wait up to :data:`CLOSE_WAIT_S` for the companion, which exits at the closed channel.

        :return: its wait status (None if it was reaped already or is still running) and
            whether it is still running.
        """
        deadline = time.monotonic() + CLOSE_WAIT_S
        try:
            while True:
                pid, status = os.waitpid(self._pid, os.WNOHANG)
                if pid:
                    return status, False
                if time.monotonic() > deadline:
                    return None, True
                time.sleep(0.005)
        except ChildProcessError:
            return None, False

    def _answer(self, num_envs: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        try:
            frame = self._frames.receive()
        except ValueError as error:
            raise ProgramError(f"the reward program's process answered a malformed message ({error})") from None
        except OSError:
            frame = None
        if frame is None:
            raise self._ended()
        header, block = frame
        if header is None and self._names is not None and num_envs:
            return self._values(block, num_envs, self._names)  # as the last answer with a header
        if not isinstance(header, dict):
            raise ProgramError("the reward program's process answered a malformed message")
        if header.get("ok") is not True:
            kind = header.get("kind")
            raise ProgramError(_text(header.get("reason")) or "the reward program failed",
                               _text(header.get("traceback"), 4 * MAX_MESSAGE_CHARS),
                               kind=kind if kind in _KINDS else "program")
        if num_envs == 0:
            return torch.empty(0), {}
        names = header.get("names")
        if (not isinstance(names, list) or len(names) > MAX_COMPONENTS
                or not all(isinstance(name, str) and COMPONENT_NAME.fullmatch(name) for name in names)
                or len(set(names)) != len(names)):
            raise ProgramError("the reward program's process answered malformed component names")
        if header.get("per_state") is True and not self.per_state:
            self.per_state = True
            mode = header.get("per_state_mode")
            self.per_state_mode = mode if mode in ("vmap", "loop") else "loop"
            self.per_state_reason = _text(header.get("per_state_reason"))
        self._names = names
        return self._values(block, num_envs, names)

    def _values(self, block: bytes, num_envs: int, names: list[str]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The reward and components in an answer's block, checked."""
        if len(block) != 4 * num_envs * (1 + len(names)):
            raise ProgramError(f"the reward program's process answered {len(block)} bytes for "
                               f"{num_envs} envs and {len(names)} components")
        values = torch.frombuffer(bytearray(block), dtype=torch.float32).reshape(1 + len(names), num_envs)
        if not float(values.abs().max()) <= MAX_MAGNITUDE:  # NaN compares False too
            raise ProgramError(f"the reward program's process answered non-finite values or values past "
                               f"+-{MAX_MAGNITUDE:.0e}")
        return values[0], dict(zip(names, values[1:], strict=True))

    def _ended(self) -> ProgramError:
        """The error for a companion that stopped answering, saying how it ended."""
        self._frames.channel.close()
        if self._refusals.refused is not None:
            return _refused_call(self._refusals.refused)
        status, running = self._reap()
        # a call refused just before the end is read by the watch, maybe after the exit
        refused = self._refusals.wait(0.0 if running else CLOSE_WAIT_S)
        if refused is not None:
            return _refused_call(refused)
        if running:
            return ProgramError("the reward program's process stopped answering and did not exit (a reward "
                                "program must return its reward, not close its channel)")
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == REFUSED_SIGNAL:
            return ProgramError("the reward program made a system call the sandbox refuses (it may compute, "
                                "read its inputs and the installed libraries, nothing else: no files written "
                                "or watched, no processes, sockets, timers or signals) and the kernel killed "
                                "its process (SIGSYS)", kind="sandbox")
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
            # the companion has the job's CPU-time limit
            limit = resource.getrlimit(resource.RLIMIT_CPU)[0]
            return ProgramError(f"the reward program used up its CPU-time limit of {limit} s and was killed "
                                "(SIGXCPU)", kind="limit")
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            return ProgramError("the reward program's process was killed (SIGKILL): it hit its CPU-time "
                                "limit or ran out of memory", kind="limit")
        if status is not None and os.WIFSIGNALED(status):
            how = f"it was killed by signal {os.WTERMSIG(status)}"
        elif status is not None:
            how = f"it exited with code {os.WEXITSTATUS(status)}"
        else:
            how = "it is gone"
        return ProgramError(f"the reward program's process ended without answering: {how} (a reward "
                            "program must return its reward, not exit or end its process)")


def _refused_call(name: str) -> ProgramError:
    """The failure of a program that made a call the sandbox refuses, the call named."""
    return ProgramError(f"the reward program made a system call the sandbox refuses, {name} "
                        "(it may compute, read its inputs and the installed libraries, nothing "
                        "else: no files written or watched, no processes, sockets, timers or "
                        "signals); the call did not run and the program was stopped",
                        kind="sandbox")


def _sendable(value: torch.Tensor) -> torch.Tensor:
    """``value`` on the CPU, contiguous, in a dtype the companion reads (float32 otherwise)."""
    value = value.detach().cpu()
    if str(value.dtype).removeprefix("torch.") not in _DTYPES:
        value = value.to(torch.float32)
    return value.contiguous()


def _text(value: Any, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Untrusted text from the companion, bounded (the caller sanitises what it shows)."""
    return value[:limit] if isinstance(value, str) else ""


# ------------------------------------------------------------------ the companion's side
def serve_rewards(load: Callable[[], RewardFunction], channel: socket.socket, guard: Any) -> None:
    """Load the program with ``load()`` and answer reward requests until the job closes the channel.

    Runs in the companion, confined; returns when the channel closes or after the first
    failure, which it reports.

    :param load: builds the :class:`RewardFunction` (this executes the program).
    :param channel: the companion's end of the socket pair.
    :param guard: the companion's installed guard, its modules snapshot taken.
    """
    frames = Frames(channel)

    def loaded() -> RewardFunction:
        function = load()
        _raise_if_changed(guard)
        return function

    function = _reported(frames, "loading the program", loaded)
    if function is None:
        return
    frames.send({"ok": True})

    def answer(layout: Any, block: bytes) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        result = function(*_inputs(layout, block))
        if function.calls == 1 or function.calls % MODULE_CHECK_EVERY == 0:
            _raise_if_changed(guard)
        return result

    layout, answered = None, None
    while True:
        frame = frames.receive()
        if frame is None:
            return
        header, block = frame
        layout = header["arrays"] if header is not None else layout
        result = _reported(frames, "the reward program", functools.partial(answer, layout, block))
        if result is None:
            return
        reward, components = result
        rows = torch.stack([reward, *components.values()]).to(torch.float32).contiguous()
        described = {"ok": True, "names": list(components), "per_state": function.per_state,
                     "per_state_mode": function.per_state_mode, "per_state_reason": function.per_state_reason}
        frames.send(described if described != answered else None, rows.numpy().tobytes())
        answered = described


def _reported(frames: Frames, doing: str, call: Callable[[], Any]) -> Any:
    """``call()``'s result, or None once its failure is sent to the job as the answer."""
    try:
        return call()
    except ProgramError as error:
        frames.send(_failure(error))
    except Exception as error:
        frames.send({"ok": False, "kind": "program", "reason": f"{doing} raised {type(error).__name__}: "
                     f"{error}"[:MAX_MESSAGE_CHARS], "traceback": program_traceback(error)})
    return None


def _inputs(layout: Any, block: bytes) -> list[torch.Tensor | None]:
    """The request's tensors, in :meth:`RewardFunction.__call__`'s order (``env_reward`` may
    be None): views of one copy of the block."""
    data = bytearray(block)
    tensors: dict[str, torch.Tensor] = {}
    offset = 0
    for name, dtype, shape in layout:
        kind = _DTYPES[dtype]
        count = math.prod(shape)
        size = count * kind.itemsize
        tensors[name] = (torch.frombuffer(data, dtype=kind, count=count, offset=offset).reshape(shape)
                         if count else torch.empty(shape, dtype=kind))
        offset += size
    return [tensors["obs"], tensors["action"], tensors["next_obs"], tensors["terminated"], tensors.get("env_reward")]


def _failure(error: ProgramError) -> dict[str, Any]:
    return {"ok": False, "kind": error.kind, "reason": error.reason, "traceback": error.traceback}


def _raise_if_changed(guard: Any) -> None:
    changed = guard.changed_modules()
    if changed:
        raise ProgramError(changed, kind="sandbox")
