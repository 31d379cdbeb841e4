"""An LLM's answer read into a checked reward program in a child process, under limits.

Finding the code in an answer, normalising it and running the static checks parse
hostile text with Python's parser, regular expressions and ``ast.unparse``: a 700-deep
decorator chain overflowed the recursion limit outside any handler and ended the search;
an unterminated fence of 100,000 backticks backtracked for minutes in one regular
expression, holding the search's GIL (every other candidate's deadline and LLM call
waited). So :func:`check_answer` and :func:`check_source` do that work in a child forked
for the purpose, with a CPU-time limit (:data:`CHECK_CPU_S`), a wall-clock limit
(:data:`CHECK_WALL_S`, for a child that stalls) and an address-space limit
(:data:`CHECK_MEMORY_MB` above what the process already maps). The caller waits on a pipe
without the GIL. Whatever happens in the child (an exception of any kind, a recursion or
memory blow-up, a crash, an overrun) comes back as the candidate's :class:`Failure`; the
same answer fails the same way every time, so a resumed or replayed search meets the same
failure and goes on.

Nothing here runs the program: the child only reads its text, as the caller did before,
so it needs no sandbox; it is a child so that its limits and its failures are its own.

    from rewardlab import llm_reward
    from rewardlab.llm_reward.training.checking import check_answer

    checked = check_answer(answer_text, llm_reward.describe("CartPole-v1"))
    print(checked.program if checked.failure is None else checked.failure.reason)
"""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from rewardlab.envs.descriptions import EnvDescription
from rewardlab.llm_reward.programs.checks import CheckError
from rewardlab.llm_reward.programs.program import RewardProgram, extract_code
from rewardlab.llm_reward.training.failures import NO_CODE_FAILURE, Failure, check_failure, cut

__all__ = ["CHECK_CPU_S", "CHECK_MEMORY_MB", "CHECK_WALL_S", "Checked", "check_answer", "check_source"]

#: the CPU seconds a child may spend on one answer (a real answer takes milliseconds)
CHECK_CPU_S = 2
#: the wall-clock seconds the caller waits for a child that does not use its CPU time (stalled)
CHECK_WALL_S = 30.0
#: the memory a child may map beyond what it inherited from the caller
CHECK_MEMORY_MB = 512
#: children at once: a search's candidates are read in parallel, and each may use its memory
MAX_CHILDREN = 4
#: the most bytes a child may send back (the program's source and its record)
MAX_REPLY_BYTES = 64 * 2**20

# Python 3.12 warns on every fork of a process with threads (the search has some): the
# child below runs only parsing code under its own limits and exits without cleanup.
warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning)


@dataclass(frozen=True)
class Checked:
    """What reading an answer (or a source) gave.

    :param source: the code found in the answer (``None``: none was found, or reading failed
        before it was).
    :param program: the checked program (``None`` when it failed).
    :param failure: why it failed (``None`` when it passed).
    """

    source: str | None
    program: RewardProgram | None
    failure: Failure | None


def check_answer(answer: str, description: EnvDescription) -> Checked:
    """Find the reward program in an LLM's answer and run every static check, in a child.

    :param answer: the LLM's whole reply.
    :param description: the env's description (its variables are the allowed arguments).
    """
    return _in_child(_read_answer, answer, description)


def check_source(source: str, description: EnvDescription) -> Checked:
    """Normalise and check a program's source for an env, in a child.

    :param source: the program's source.
    :param description: the env's description.
    """
    return _in_child(_read_source, source, description)


# ----------------------------------------------------------------- in the child
def _read_answer(answer: str, description: EnvDescription) -> dict[str, Any]:
    try:
        source = extract_code(answer)
    except CheckError as error:
        return {"source": None, "failure": asdict(Failure(NO_CODE_FAILURE, "; ".join(
            str(finding) for finding in error.findings[:5])))}
    return _read_source(source, description)


def _read_source(source: str, description: EnvDescription) -> dict[str, Any]:
    try:
        program = RewardProgram.from_source(source, description)  # parsed once, checked once
    except CheckError as error:
        return {"source": source, "failure": asdict(check_failure(error.findings))}
    return {"source": source, "program": asdict(program)}


def _child(work: Callable[..., dict[str, Any]], args: tuple[Any, ...], write_end: int) -> None:
    """Run ``work`` in the forked child and write its record to ``write_end``; never returns."""
    status = 0
    try:
        # nothing left by the caller's other threads may run here: no finalizers, no
        # warnings written through a stream whose lock another thread held at the fork
        gc.disable()
        warnings.simplefilter("ignore")
        sys.stdout = sys.stderr = None  # type: ignore[assignment]
        _close_inherited(keep=write_end)
        _limit(resource.RLIMIT_CORE, 0)  # SIGXCPU dumps core by default
        _limit(resource.RLIMIT_CPU, CHECK_CPU_S, CHECK_CPU_S + 1)
        _limit(resource.RLIMIT_AS, _mapped_bytes() + CHECK_MEMORY_MB * 2**20)
        try:
            record = work(*args)
        except MemoryError:
            record = {"error": "memory"}
        except BaseException as error:  # noqa: BLE001 - anything the parsers raise is the answer's failure
            record = {"error": "exception", "exception": _describe(error)}
        data = json.dumps(record).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view):]
    except BaseException:  # noqa: BLE001 - the caller sees the missing record
        status = 1
    finally:
        os._exit(status)


def _close_inherited(keep: int) -> None:
    """Close the caller's descriptors but the standard ones and ``keep``: its sockets and pipes
    (the sandbox's fork server, the LLM's connections) are not the child's to hold open.
    Listed, not ranged: the descriptor limit can be a billion."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed by now


def _limit(which: int, soft: int, hard: int | None = None) -> None:
    _, current_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _mapped_bytes() -> int:
    """The address space this process maps now (what ``RLIMIT_AS`` counts)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _describe(error: BaseException) -> str:
    try:
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
    except Exception:  # noqa: BLE001 - an exception whose str() fails
        text = type(error).__name__
    return cut(text, 300)


# ---------------------------------------------------------------- in the caller
_CHILDREN = threading.BoundedSemaphore(MAX_CHILDREN)


def _in_child(work: Callable[..., dict[str, Any]], text: str, description: EnvDescription) -> Checked:
    """Fork a child that runs ``work(text, description)`` and read its record back."""
    if not hasattr(os, "fork") or not os.path.exists("/proc/self/statm"):
        return _checked(_in_process(work, text, description))
    with _CHILDREN:
        return _fork_and_read(work, text, description)


def _fork_and_read(work: Callable[..., dict[str, Any]], text: str, description: EnvDescription) -> Checked:
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        return Checked(None, None, Failure("error", f"could not start the process that checks the program: {error}"))
    if pid == 0:  # the child
        os.close(read_end)
        _child(work, (text, description), write_end)
    os.close(write_end)
    data, overrun = b"", "was interrupted"
    try:
        data, overrun = _read_reply(read_end, time.monotonic() + CHECK_WALL_S)
    finally:
        os.close(read_end)
        if overrun:
            _kill(pid)
        status = _reap(pid)
    if overrun:
        return Checked(None, None, _overrun(overrun))
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
        return Checked(None, None, _overrun(f"used more than {CHECK_CPU_S} s of CPU time"))
    try:
        record = json.loads(data)
    except ValueError:
        how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exited with status {os.WEXITSTATUS(status)}")
        return Checked(None, None, Failure(
            "crash", f"the process that checks the program {how} before it answered; write the program "
                     "plainly (ordinary nesting, one ```python block)"))
    return _checked(record)


def _in_process(work: Callable[..., dict[str, Any]], text: str, description: EnvDescription) -> dict[str, Any]:
    """Where no child can be forked: the same work here, any exception still a failure."""
    try:
        return work(text, description)
    except MemoryError:
        return {"error": "memory"}
    except Exception as error:  # noqa: BLE001 - anything the parsers raise is the answer's failure
        return {"error": "exception", "exception": _describe(error)}


def _read_reply(fd: int, deadline: float) -> tuple[bytes, str]:
    """Everything the child writes until it closes the pipe, and ``""``; or, past the
    deadline or the size limit, how it overran (the caller then kills the child)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", f"did not finish within {CHECK_WALL_S:.0f} s"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), ""
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            return b"", f"made a record of more than {MAX_REPLY_BYTES // 2**20} MB"
        chunks.append(chunk)


def _reap(pid: int) -> int:
    """The child's exit status (0 when something else in the process reaped it first)."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _overrun(how: str) -> Failure:
    return Failure("timeout", f"finding the program in the answer and checking it {how} and was stopped; "
                              "reply with one ```python block holding plain code of ordinary size and nesting")


def _checked(record: Any) -> Checked:
    """The child's record (plain data) as a :class:`Checked`."""
    if not isinstance(record, dict):
        return Checked(None, None, Failure("crash", "the process that checks the program answered malformed data"))
    source = record.get("source") if isinstance(record.get("source"), str) else None
    if record.get("error") == "memory":
        return Checked(source, None, Failure(
            "limit", f"finding the program in the answer and checking it needed more than {CHECK_MEMORY_MB} MB "
                     "of memory; reply with one ```python block holding plain code of ordinary size"))
    if record.get("error") == "exception":
        return Checked(source, None, Failure(
            "check", f"the program could not be read ({record.get('exception')}); write it plainly: ordinary "
                     "nesting of calls, brackets and expressions, no decorators, one ```python block"))
    failure = record.get("failure")
    if isinstance(failure, dict):
        return Checked(source, None, Failure(**failure))
    fields = record.get("program")
    try:
        program = RewardProgram.from_dict(fields)
    except (KeyError, TypeError) as error:
        return Checked(source, None, Failure("crash", f"the process that checks the program answered "
                                                      f"malformed data ({error})"))
    return Checked(source, program, None)
