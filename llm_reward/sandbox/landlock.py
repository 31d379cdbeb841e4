"""Landlock (landlock(7)): the kernel's file and network rules for one process and its threads.

:func:`restrict` handles reads as well as writes: after it, the process can read only
beneath the paths it was given and write only beneath its run directory, for C code as
well as Python (torch's own file I/O never reaches Python's audit hooks). With ABI 4+ it
cannot ``connect`` or ``bind`` TCP; with ABI 6+ it cannot signal processes outside its
domain nor reach abstract Unix sockets.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence

__all__ = ["landlock_abi", "restrict"]

# The same syscall numbers on x86_64 and the generic table (arm64).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE_AND_REMOVE = sum(1 << bit for bit in range(4, 13))  # remove dir/file, make char..symlink
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
# Every filesystem right, with the ABI that introduced it.
_FS_RIGHTS = ((1, EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | _MAKE_AND_REMOVE), (2, REFER),
              (3, TRUNCATE), (5, IOCTL_DEV))
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # those a file (not a folder) takes
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers, 0 if none (not Linux, too old, disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def restrict(writable: Sequence[str], readable: Sequence[str], devices: Sequence[str] = ()) -> None:
    """Restrict this process for good: read beneath ``readable`` and ``writable``, write
    beneath ``writable`` only, plus ``/dev/null``; no TCP and no signals out (as the ABI allows).

    :param writable: folders the process may read and change (its run directory).
    :param readable: folders and files it may read (and map to execute: libraries).
    :param devices: device files it may open for reading and writing and ``ioctl``
        (a GPU's ``/dev/nvidia*``).
    :raises OSError: the kernel refused a step (no Landlock, a path it cannot open).
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError("this kernel has no Landlock")
    libc = ctypes.CDLL(None, use_errno=True)
    handled = sum(rights for version, rights in _FS_RIGHTS if abi >= version)
    attr = _RulesetAttr(
        handled_access_fs=handled,
        handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
        scoped=(_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    reading = handled & (EXECUTE | READ_FILE | READ_DIR)
    try:
        rules = [(path, reading) for path in readable] + [(path, handled) for path in writable]
        rules.append(("/dev/null", handled & (READ_FILE | WRITE_FILE | TRUNCATE)))
        rules += [(path, handled & (READ_FILE | WRITE_FILE | IOCTL_DEV)) for path in devices]
        for path, rights in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_RIGHTS
                rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    number = ctypes.get_errno()
                    raise OSError(number, f"landlock_add_rule({path!r}): {os.strerror(number)}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
