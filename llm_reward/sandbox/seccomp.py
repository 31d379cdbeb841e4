"""A worker's seccomp filters: the job's deny list, and the allowlist of a job's companion,
which runs the untrusted program (its refusals are watched by
:mod:`~rewardlab.llm_reward.sandbox.refusals`)."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import signal
import socket
from typing import Any

from rewardlab.llm_reward.sandbox.support import c_library, check_errno

__all__ = ["ALLOWED_SYSCALLS", "REFUSED_SIGNAL", "allow_computation_only", "load_deny_list"]

_CLONE_THREAD = 0x00010000


# Refused with EPERM: new programs and processes (threads stay allowed), other processes'
# memory, new sockets of any family, new namespaces and mounts, kernel keys, BPF, perf,
# modules, io_uring (which runs syscalls the filter never sees), handles to files by number.
_DENIED_SYSCALLS = (
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "setsid", "setpgid", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "init_module", "finit_module", "delete_module", "kexec_load", "reboot", "swapon", "swapoff",
    "iopl", "ioperm", "mknod", "mknodat", "name_to_handle_at", "open_by_handle_at",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "personality", "acct", "quotactl",
    # metadata, which Landlock does not cover: a worker could otherwise set the set-user-ID
    # bit on the user's programs, open their files to others, or forge their times
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
    "utime", "utimes", "futimesat", "utimensat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    # memory that RLIMIT_AS does not count: a memfd's pages (256 of them, RLIMIT_FSIZE each)
    # and SysV shared memory or message queues, which outlive their mapping until the
    # worker's IPC namespace ends (a worker held 1.5 GB under a 1 GB limit; red-team finding)
    "memfd_create", "shmget", "shmat", "msgget",
)
# Answered EOPNOTSUPP (as a file system without it), so glibc's posix_fallocate writes
# instead: allocating takes no time, and a worker allocated gigabytes between two looks of
# the disk-quota watchdog (red-team finding).
_UNSUPPORTED_SYSCALLS = ("fallocate",)


def _add_rule(rules: Any, action: Any, name: str, *arguments: Any) -> None:
    """``rules.add_rule(action, name, *arguments)``, skipped for a syscall this architecture
    (or libseccomp) does not have."""
    try:
        rules.add_rule(action, name, *arguments)
    except (RuntimeError, ValueError, OSError):
        pass


def load_deny_list() -> None:
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    deny = seccomp.ERRNO(errno.EPERM)
    for name in _DENIED_SYSCALLS:
        _add_rule(rules, deny, name)
    # clone: threads only (CLONE_THREAD set); clone3 answers ENOSYS, so that glibc falls
    # back to clone, whose flags the filter can read.
    rules.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, 0))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for name in _UNSUPPORTED_SYSCALLS:
        rules.add_rule(seccomp.ERRNO(errno.EOPNOTSUPP), name)
    rules.load()


# What a reward program's process may ask of the kernel at all: computation, memory,
# threads, time, its own signals, reading (Landlock says what) and I/O on the descriptors it
# holds. Everything else is refused and fails the candidate with kind "sandbox", named
# (or, where the kernel cannot name it, kills the process): a program cannot catch the
# refusal and go on as a good candidate. It acts on no other process: signals, affinity and
# limits for itself only (from the companion, prlimit on the job once set its file-size
# limit to 0 and its training failed, blamed on the trainer). Found by tracing the
# companion through torch, numpy and per-state programs (loading, calls, errors, lazy
# imports); every call outside the list is one no reward needs (inotify, timers, signal
# queues, message queues, new descriptors of any kind but files opened for reading).
ALLOWED_SYSCALLS = (
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore", "get_mempolicy",
    "set_mempolicy", "mbind",
    # threads (clone only with CLONE_THREAD, below) and waiting
    "futex", "futex_waitv", "set_robust_list", "rseq", "set_tid_address", "exit", "exit_group",
    "restart_syscall", "sched_yield", "getcpu", "sched_getaffinity", "sched_getparam",
    "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", "getpriority",
    "arch_prctl",
    # time, randomness, who and where it is
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "times", "getrusage", "getrandom", "sysinfo", "uname", "getpid", "gettid", "getppid", "getuid",
    "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "getpgrp", "getcwd",
    # its own signal handling (sending: kill and tgkill to itself, below)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigpending",
    "rt_sigsuspend", "rt_sigtimedwait",
    # I/O on the descriptors it holds (the channel, the log, files it opened for reading)
    "read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "recvfrom", "sendto",
    "shutdown", "poll", "ppoll", "select", "pselect6", "lseek", "close", "close_range", "dup",
    "dup2", "dup3", "fadvise64",
    # reading what Landlock lets it read (lazy imports, tracebacks' source lines)
    "fstat", "newfstatat", "stat", "lstat", "statx", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents64", "getdents", "fstatfs", "statfs",
)
#: file flags a program's process may not open with: writing, creating, truncating
#: (O_ACCMODE O_CREAT O_TRUNC O_APPEND __O_TMPFILE)
_WRITING_FLAGS = 0o3 | 0o100 | 0o1000 | 0o2000 | 0o20000000
#: ioctl requests of Python's own I/O: TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO
_ALLOWED_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421)
#: fcntl commands: F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC (not
#: F_SETOWN or F_SETSIG, which would point a descriptor's signals at another process)
_ALLOWED_FCNTLS = (0, 1, 2, 3, 4, 1030)
#: prctl options: PR_GET_DUMPABLE, PR_SET_NAME, PR_GET_NAME (threads' names), PR_SET_VMA
_ALLOWED_PRCTLS = (3, 15, 16, 0x53564D41)


def allow_computation_only(report: socket.socket | None = None) -> None:
    """The seccomp allowlist of a process that runs untrusted code next to a job (a job's
    companion): :data:`ALLOWED_SYSCALLS`, with ``clone`` for threads only, files opened for
    reading only, ``ioctl``, ``fcntl`` and ``prctl`` for the few requests Python and its
    libraries make, signals and affinity for itself only, its limits read only; ``clone3``
    answers ``ENOSYS`` (glibc then uses ``clone``, whose flags the filter reads) and
    ``openat2`` too (its flags are out of the filter's sight).

    Any other call is refused and never runs. Given ``report`` (the process's channel to the job),
    the kernel stops the calling thread and tells the job which call it was: the filter's listener
    (seccomp user notification) goes to the job over ``report`` before any untrusted code runs (the
    job takes it with :meth:`~rewardlab.llm_reward.sandbox.refusals.RefusalWatch.receive`), one byte
    with it, and this process keeps no copy of it. Where the kernel or libseccomp has no user
    notification, or without ``report``, the call kills the process (``SIGSYS``, see
    :data:`REFUSED_SIGNAL`) and the failure cannot name it. A call of another architecture's table
    (``int 0x80`` on x86_64) kills the process in either case: by default libseccomp kills only the
    thread, and a program's thread could probe and vanish unseen.

    Called by :func:`~rewardlab.llm_reward.sandbox.isolation.confine` (``companion=``), after
    Landlock and ``PR_SET_NO_NEW_PRIVS``.

    :param report: the channel to send the listener over; one byte is sent on it in any case.
    """
    import pyseccomp as seccomp

    own = os.getpid()
    listening = report is not None and notification_supported()
    rules = seccomp.SyscallFilter(defaction=seccomp.NOTIFY if listening else seccomp.KILL_PROCESS)
    rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    allow = seccomp.ALLOW

    def add(name: str, *arguments: Any) -> None:
        _add_rule(rules, allow, name, *arguments)

    for name in ALLOWED_SYSCALLS:
        # the process's exit goes through the job, which lets it go on once it has read
        # every call refused before it: an exit cannot withdraw a refused call unseen
        if not (name == "exit_group" and listening and continue_supported()):
            add(name)
    add("clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, _CLONE_THREAD))
    add("openat", seccomp.Arg(2, seccomp.MASKED_EQ, _WRITING_FLAGS, 0))
    add("open", seccomp.Arg(1, seccomp.MASKED_EQ, _WRITING_FLAGS, 0))
    for request in _ALLOWED_IOCTLS:
        add("ioctl", seccomp.Arg(1, seccomp.EQ, request))
    for command in _ALLOWED_FCNTLS:
        add("fcntl", seccomp.Arg(1, seccomp.EQ, command))
    for option in _ALLOWED_PRCTLS:
        add("prctl", seccomp.Arg(0, seccomp.EQ, option))
    for name in ("kill", "tgkill"):
        add(name, seccomp.Arg(0, seccomp.EQ, own))
    for name in ("sched_setaffinity", "get_robust_list"):
        add(name, seccomp.Arg(0, seccomp.EQ, 0))
    # its own limits, read only: raising one is refused all the same, and no longer silently
    add("prlimit64", seccomp.Arg(0, seccomp.EQ, 0), seccomp.Arg(2, seccomp.EQ, 0))
    for name in ("clone3", "openat2"):
        _add_rule(rules, seccomp.ERRNO(errno.ENOSYS), name)
    if listening:
        # the listener's one way out; a program that sends on its channel gains nothing: the
        # job reads the channel with recv, which drops any descriptor sent with the data
        add("sendmsg", seccomp.Arg(0, seccomp.EQ, report.fileno()))
        listener = _load_with_listener(seccomp, rules)
    else:
        rules.load()
    if report is None:
        return
    if not listening:
        report.sendall(NO_LISTENER)
        return
    try:
        socket.send_fds(report, [LISTENER], [listener])
    finally:
        os.close(listener)


#: the signal the kernel kills a process with for a call its seccomp filter does not allow
REFUSED_SIGNAL = signal.SIGSYS
#: the byte a companion sends with its filter's listener, or without one
LISTENER, NO_LISTENER = b"L", b"-"


@functools.cache
def continue_supported() -> bool:
    """Whether this kernel lets a listener run a notified call as it was made
    (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``, Linux 5.5+)."""
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 5)



@functools.cache
def notification_supported() -> bool:
    """Whether this kernel and libseccomp hand a filter's refusals to another process
    (seccomp user notification: Linux 5.0+, libseccomp 2.5+ at API level 5 or more)."""
    try:
        import pyseccomp as seccomp

        return hasattr(seccomp, "NOTIFY") and seccomp.get_api() >= 5
    except (ImportError, OSError, NotImplementedError, AttributeError):
        return False


_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 1 << 3


def _load_with_listener(seccomp: Any, rules: Any) -> int:
    """Load ``rules`` with a listener and return it (``seccomp(SECCOMP_SET_MODE_FILTER,
    SECCOMP_FILTER_FLAG_NEW_LISTENER)`` on the program libseccomp compiles). Not libseccomp's
    own load: it asks for a listener only when a rule's action is to notify, and a default
    action is none (a rule may not repeat it), so its filter would notify no one and the
    kernel would answer every refused call ``ENOSYS``, unseen."""
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)  # a program larger than the pipe fails, never blocks

        class Sink:
            def fileno(self) -> int:
                return write_end

        rules.export_bpf(Sink())
        os.close(write_end)
        write_end = -1
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    code = b"".join(chunks)

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    instructions = ctypes.create_string_buffer(code, len(code))
    program = Program(len(code) // 8, ctypes.cast(instructions, ctypes.c_void_p))
    number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, "seccomp")
    loaded = c_library().syscall(ctypes.c_long(number), ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
                                 ctypes.c_long(_SECCOMP_FILTER_FLAG_NEW_LISTENER),
                                 ctypes.byref(program))
    return check_errno(loaded, "seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER)")
