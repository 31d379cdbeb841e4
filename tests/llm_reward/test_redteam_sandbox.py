"""Attacks on the reward program's process by someone who read the sandbox's source.

Each program switches the Python guard off first (through the frame that holds it), so
that only the kernel stands in its way, then tries one thing the kernel must refuse. The
refusal fails the candidate with kind ``sandbox`` and names the call, whatever the
program does about it.
"""

from __future__ import annotations

import platform
from typing import Any

import pytest

from rewardlab.llm_reward.sandbox.refusals import syscall_name
from rewardlab.llm_reward.sandbox.seccomp import notification_supported
from rewardlab.llm_reward.sandbox.support import kernel_support

pytestmark = pytest.mark.skipif(
    any(kernel_support().values()),
    reason=f"the kernel lacks isolation features: {kernel_support()}",
)

_GUARD_OFF = """
    builtins = torch.sys.modules["builtins"]
    frame = builtins.getattr(builtins, "__imp" + "ort__")("inspect").currentframe()
    while frame is not None:
        names = builtins.getattr(frame, "f_lo" + "cals")
        if names.get("guard") is not None:
            guard = names["guard"]
            builtins.setattr(builtins.getattr(guard, "_st" + "ate"), "busy", True)
        frame = builtins.getattr(frame, "f_ba" + "ck")
    load = builtins.getattr(builtins, "__imp" + "ort__")
"""


def evaluate_hostile(source: str, **settings: Any) -> Any:
    """``evaluate`` on a program that skips the static checks (its guard switched off)."""
    from rewardlab import llm_reward

    program = llm_reward.RewardProgram(
        source=source, function_name="compute_reward", parameters=("x",)
    )
    return llm_reward.evaluate(
        program,
        "CartPole-v1",
        **{
            "steps": 64,
            "seeds": (0,),
            "num_envs": 4,
            "timeout_s": 120,
            "static_checks": False,
            "ppo_kwargs": {"n_steps": 16},
            "num_checkpoints": 1,
            **settings,
        },
    )


# ------------------------------------------------------------ a refused call is named
_REFUSED = {
    # through ctypes, caught: the program goes on as a good candidate if it can
    "inotify_init1": """
    libc = load("ctypes").CDLL(None, use_errno=True)
    try:
        libc.inotify_init1(0)
    except builtins.BaseException:
        pass
""",
    # through os, no guard to pass: the call is one no audit hook sees
    "setsid": """
    try:
        torch.os.setsid()
    except builtins.BaseException:
        pass
""",
    # a timer, through the signal module
    "setitimer": """
    try:
        torch.sys.modules["signal"].setitimer(0, 10.0)
    except builtins.BaseException:
        pass
""",
}


@pytest.mark.skipif(
    not notification_supported(), reason="the kernel or libseccomp has no seccomp user notification"
)
@pytest.mark.parametrize("call", sorted(_REFUSED))
def test_a_refused_call_fails_the_candidate_by_name(call: str) -> None:
    source = "def compute_reward(x):\n" + _GUARD_OFF + _REFUSED[call] + "    return x, {'x': x}\n"
    result = evaluate_hostile(source)
    assert not result.ok and result.fitness is None
    assert result.failure is not None and result.failure.kind == "sandbox", result.failure
    assert f"refuses, {call} (" in result.failure.reason, result.failure.reason


def test_a_companion_that_stays_on_after_the_training_fails_the_candidate() -> None:
    # its exit replaced by a wait: what it would do after the job's last look goes unseen
    stay = """
    os_module = torch.os

    def stay(code):
        torch.sys.modules["time"].sleep(3600)

    os_module._exit = stay
"""
    result = evaluate_hostile(
        "def compute_reward(x):\n" + _GUARD_OFF + stay + "    return x, {'x': x}\n"
    )
    assert not result.ok and result.failure is not None, result
    assert "did not end within" in result.failure.reason, result.failure


# ------------------------------------------- the guard is feedback, the kernel the boundary
_WRITE_A_FILE = """
    try:
        torch.os.open("out.txt", torch.os.O_WRONLY | torch.os.O_CREAT)
    except builtins.BaseException:
        pass
"""


@pytest.mark.skipif(
    not notification_supported(), reason="the kernel or libseccomp has no seccomp user notification"
)
def test_the_guard_switched_off_from_inside_leaves_the_kernels_refusal_by_name() -> None:
    # the guard lives in the program's own interpreter, so the program can switch it off;
    # it only words the feedback of a program that does not fight it
    guarded = (
        "def compute_reward(x):\n    builtins = torch.sys.modules['builtins']\n" + _WRITE_A_FILE
    )
    result = evaluate_hostile(guarded + "    return x, {'x': x}\n")
    assert result.failure is not None and result.failure.kind == "sandbox", result.failure
    assert "tried to open the file 'out.txt' (line 5)" in result.failure.reason, (
        result.failure.reason
    )
    # switched off: the same attempt fails the candidate all the same, named by the kernel
    result = evaluate_hostile(
        "def compute_reward(x):\n" + _GUARD_OFF + _WRITE_A_FILE + "    return x, {'x': x}\n"
    )
    assert not result.ok and result.failure is not None and result.failure.kind == "sandbox", (
        result.failure
    )
    assert "refuses, openat (" in result.failure.reason, result.failure.reason


# ------------------------------------------------- a refused call at the very end is seen
_AT_THE_END = {
    # after its last answer: the companion's own exit, replaced, makes the call first
    "after_the_last_answer": """
    os_module = torch.os
    real_exit = os_module._exit

    def late_exit(code):
        try:
            os_module.setsid()
        except builtins.BaseException:
            pass
        real_exit(code)

    os_module._exit = late_exit
""",
    # the call, caught, then an exit at once: the exit must not hide the attempt
    "then_exit": """
    try:
        torch.os.setsid()
    except builtins.BaseException:
        pass
    torch.os._exit(0)
""",
    # the call from a thread of its own while the answering thread exits at once
    "in_a_thread_then_exit": """
    start = builtins.getattr(guard, "_start_new" + "_thread")
    lock = load("_thread").allocate_lock()
    lock.acquire()

    def call():
        lock.release()
        torch.os.setsid()

    start(call, ())
    lock.acquire()
    torch.os._exit(0)
""",
    # the same through ctypes, which lets go of the interpreter's lock: the exit races the
    # call, and the kernel may withdraw it before the job reads it
    "in_a_thread_racing_the_exit": """
    start = builtins.getattr(guard, "_start_new" + "_thread")
    libc = load("ctypes").CDLL(None)
    lock = load("_thread").allocate_lock()
    lock.acquire()

    def call():
        builtins.setattr(builtins.getattr(guard, "_st" + "ate"), "busy", True)  # in this thread too
        lock.release()
        libc.setsid()

    start(call, ())
    lock.acquire()
    torch.os._exit(0)
""",
}


@pytest.mark.skipif(
    not notification_supported(), reason="the kernel or libseccomp has no seccomp user notification"
)
@pytest.mark.parametrize("when", sorted(_AT_THE_END))
def test_a_refused_call_at_the_end_fails_the_candidate_by_name(when: str) -> None:
    source = (
        "def compute_reward(x):\n" + _GUARD_OFF + _AT_THE_END[when] + "    return x, {'x': x}\n"
    )
    result = evaluate_hostile(source)
    assert not result.ok and result.fitness is None, result
    assert result.failure is not None and result.failure.kind == "sandbox", result.failure
    named = "refuses, setsid (" in result.failure.reason
    assert named or ("racing" in when and "withdrawn" in result.failure.reason), (
        result.failure.reason
    )


@pytest.mark.skipif(
    not notification_supported(), reason="the kernel or libseccomp has no seccomp user notification"
)
def test_the_job_hears_of_the_refused_call_and_the_call_never_runs() -> None:
    import ctypes
    import errno
    import os
    import socket

    from rewardlab.llm_reward.sandbox.refusals import RefusalWatch
    from rewardlab.llm_reward.sandbox.seccomp import allow_computation_only

    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the companion: the allowlist, then a call outside it
        code = 1
        try:
            ours.close()
            ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as confine sets it
            allow_computation_only(theirs)
            try:
                os.setsid()
            except OSError as error:
                code = 3 if error.errno == errno.ENOSYS else 4  # ENOSYS: it never ran
        finally:
            os._exit(code)
    theirs.close()
    watch = RefusalWatch.receive(ours)
    assert ours.recv(1) == b""  # the watch shut the channel down at the refusal
    _, status = os.waitpid(pid, 0)
    assert watch.refused == "setsid"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3, status


def test_where_the_kernel_cannot_notify_a_refused_call_kills_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ctypes
    import os
    import signal
    import socket

    from rewardlab.llm_reward.sandbox import refusals, seccomp

    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the companion on a kernel without seccomp user notification
        try:
            ours.close()
            monkeypatch.setattr(seccomp, "notification_supported", lambda: False)
            ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as confine sets it
            seccomp.allow_computation_only(theirs)
            os.setsid()
        finally:
            os._exit(0)
    theirs.close()
    watch = refusals.RefusalWatch.receive(ours)
    _, status = os.waitpid(pid, 0)
    assert watch.refused is None and watch._listener is None  # told there is no listener
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS, status


def test_syscall_names_come_from_the_machines_table() -> None:
    from rewardlab.llm_reward.sandbox.refusals import syscall_names

    arch, names = syscall_names()
    assert names, "libseccomp named no system call"
    number = next(number for number, name in names.items() if name == "inotify_add_watch")
    assert syscall_name(number, arch) == "inotify_add_watch"
    # another architecture's number is given as a number, never as this table's name
    assert syscall_name(number, arch ^ 1) == f"system call {number} of architecture {arch ^ 1:#x}"


# A call through another architecture's table (int 0x80 on x86_64, the i386 getpid) from a
# thread of the program: libseccomp's default for a foreign architecture kills only the
# calling thread, so the attempt vanished with the thread and the program answered on as a
# good candidate.
_FOREIGN_TABLE = (
    """
def compute_reward(x):
"""
    + _GUARD_OFF
    + """
    ctypes, mmap = load("ctypes"), load("mmap")
    code = builtins.bytes([0xB8, 0x14, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20; int 0x80; ret
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    call = ctypes.CFUNCTYPE(ctypes.c_long)(address)
    start = builtins.getattr(guard, "_start_new" + "_thread")

    def probe():
        builtins.setattr(builtins.getattr(guard, "_st" + "ate"), "busy", True)
        call()

    start(probe, ())
    torch.sys.modules["time"].sleep(0.2)
    return x, {"x": x}
"""
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the attack's machine code is x86_64's")
def test_a_call_through_another_architectures_table_fails_the_candidate() -> None:
    result = evaluate_hostile(_FOREIGN_TABLE)
    assert not result.ok and result.fitness is None, result
    assert result.failure is not None and result.failure.kind == "sandbox", result.failure


# A program that prints: its output goes to the worker's log, which stays in a search's
# candidate folder. A megabyte per call left 66 MB after a 4,096-step run, and a candidate
# could leave up to the disk quota (1 GB by default) on the user's disk and still succeed.
_CHATTY = """
def compute_reward(x):
    print("x" * 1_000_000)
    return x, {"x": x}
"""


def test_a_chatty_program_leaves_a_bounded_log(tmp_path: Any) -> None:
    from rewardlab.llm_reward.sandbox.isolation import COMPANION_OUTPUT_MB

    result = evaluate_hostile(_CHATTY, steps=4096, run_dir=tmp_path / "run")
    log = tmp_path / "run" / "worker.log"
    assert log.stat().st_size <= (COMPANION_OUTPUT_MB + 1) * 2**20, log.stat().st_size
    # the write past the bound fails in the program, which says so
    assert result.failure is not None and "File too large" in result.failure.reason, result.failure


# /proc was readable whole: /proc/self/mountinfo listed the host's mount points (users'
# folders, data disks, the machine's own layout) and /proc/self/cgroup the host's cgroup
# path, which a program could send back in its failure text to the report and the model.
_PROC = (
    """
def compute_reward(x):
"""
    + _GUARD_OFF
    + """
    seen = []
    names = ["mountinfo", "mounts", "mountstats", "cgroup", "environ", "status", "stat", "maps"]
    for name in names:
        try:
            with builtins.open("/proc/self/" + name, "rb") as file:
                file.read(64)
            seen.append(name)
        except builtins.OSError:
            pass
    try:
        with builtins.open("/proc/2/cmdline", "rb") as file:
            file.read(64)
        seen.append("job")
    except builtins.OSError:
        pass
    raise ValueError("seen=" + ",".join(seen))
"""
)


def test_the_program_reads_nothing_of_the_machines_layout() -> None:
    # the mount table names the machine's folders, the cgroup its jobs, /proc/2 the job
    result = evaluate_hostile(_PROC)
    assert result.failure is not None and "seen=" in result.failure.reason, result.failure
    seen = result.failure.reason.rsplit("seen=", 1)[1].split(",")
    assert seen == [""], seen


# With /proc closed, the same facts were still in the program's own process: the caller's
# PATH and import path in os.environ and sys.path, the fork server's command line (its
# socket's folder) in sys.argv and sys.orig_argv, all of them again in the environment
# block the process started with (which /proc/self/environ shows), and the machine's
# host name in uname.
_CALLERS_SETTINGS = (
    """
def compute_reward(x):
"""
    + _GUARD_OFF
    + """
    ctypes, sys, os = load("ctypes"), torch.sys, torch.os
    libc = ctypes.CDLL(None)
    start = ctypes.c_void_p.in_dll(libc, "program_invocation_name").value
    libc.getauxval.restype = ctypes.c_ulong
    libc.getauxval.argtypes = [ctypes.c_ulong]
    end = libc.getauxval(31)  # AT_EXECFN, just past the environment's strings
    views = {
        "environ": builtins.repr(builtins.dict(os.environ)),
        "argv": builtins.repr(sys.argv) + builtins.repr(sys.orig_argv),
        "path": [*sys.path, *sys.path_importer_cache],  # whole entries
        "block": (ctypes.string_at(start, end - start).decode("latin-1")
                  if start and end > start else ""),
    }
    seen = [view + ":" + builtins.str(index) for view, text in views.items()
            for index, marker in builtins.enumerate(MARKERS) if marker in text]
    if os.uname().nodename == HOST:
        seen.append("hostname")
    raise ValueError("seen=" + ",".join(seen))
"""
)


def test_the_program_finds_none_of_the_callers_settings_in_its_process() -> None:
    import os
    import socket
    import sys

    from rewardlab.llm_reward.sandbox.readable import readable_roots

    roots = readable_roots(kernel_views=False)
    hidden = [
        path
        for path in sys.path
        if path and not any(path == root or path.startswith(root + os.sep) for root in roots)
    ]
    markers = ["rewardlab-forkserver-", os.environ["PATH"], *hidden]
    source = _CALLERS_SETTINGS.replace("MARKERS", repr(markers)).replace(
        "HOST", repr(socket.gethostname())
    )
    result = evaluate_hostile(source)
    assert result.failure is not None and "seen=" in result.failure.reason, result.failure
    seen = result.failure.reason.rsplit("seen=", 1)[1].split(",")
    assert seen == [""], (seen, markers)
