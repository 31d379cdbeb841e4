"""What the kernel offers the sandbox, and the calls into libc every isolation step makes.

:func:`kernel_support` says which features (namespaces, Landlock, seccomp) this kernel has;
a worker refuses to run when one is missing (:class:`IsolationUnavailable`), unless the
caller set :data:`UNSAFE_OPT_OUT`.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

__all__ = ["UNSAFE_OPT_OUT", "IsolationUnavailable", "kernel_support"]

# An explicit, loudly named opt-out for kernels that lack a feature (never the default).
UNSAFE_OPT_OUT = "REWARDLAB_UNSAFE_NO_ISOLATION"


class IsolationUnavailable(RuntimeError):
    """The kernel lacks a feature the sandbox needs; the message names it."""


def c_library() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def check_errno(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


@functools.cache  # the kernel's features do not change while a process runs
def kernel_support() -> dict[str, str | None]:
    """Each feature the sandbox uses, mapped to ``None`` when available or to why it is not.

    Features: ``namespaces`` (user, PID, network, mount, IPC), ``landlock`` (ABI 1 or
    newer) and ``seccomp`` (libseccomp through ``pyseccomp``).
    """
    from rewardlab.llm_reward.sandbox.landlock import landlock_abi

    support: dict[str, str | None] = {"namespaces": None, "landlock": None, "seccomp": None}
    if not sys.platform.startswith("linux"):
        return dict.fromkeys(support, f"not Linux ({sys.platform})")
    try:
        with open("/proc/sys/user/max_user_namespaces") as limit:
            if int(limit.read().strip() or 0) == 0:
                support["namespaces"] = (
                    "user namespaces are disabled (user.max_user_namespaces = 0)")
    except OSError:
        support["namespaces"] = (
            "the kernel has no user namespaces (/proc/sys/user/max_user_namespaces)")
    try:
        with open("/proc/sys/kernel/unprivileged_userns_clone") as switch:
            if os.geteuid() != 0 and switch.read().strip() == "0":
                support["namespaces"] = ("unprivileged user namespaces are off "
                                         "(kernel.unprivileged_userns_clone = 0)")
    except OSError:
        pass
    if landlock_abi() < 1:
        support["landlock"] = "the kernel has no Landlock (Linux 5.13+, enabled in the LSM list)"
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as error:
        support["seccomp"] = f"libseccomp is not usable through pyseccomp ({error})"
    return support


def opted_out() -> bool:
    """Whether to run without isolation: the kernel lacks a feature and the user opted out."""
    return os.environ.get(UNSAFE_OPT_OUT) == "1" and any(kernel_support().values())


def require_support() -> None:
    missing = {name: why for name, why in kernel_support().items() if why is not None}
    if missing and os.environ.get(UNSAFE_OPT_OUT) != "1":
        details = "; ".join(f"{name}: {why}" for name, why in missing.items())
        raise IsolationUnavailable(
            f"refusing to run untrusted code without kernel isolation ({details}). Run on a Linux "
            f"kernel that has them, or set {UNSAFE_OPT_OUT}=1 to run reward programs with the "
            "Python-level checks only, which do not stop a program written to escape"
        )


def report_failure(error: BaseException, stage: str) -> None:
    """Write why a stage of the worker failed to its standard error (``worker.log``)."""
    try:
        os.write(2, f"{stage}: {error}\n".encode(errors="replace"))
    except OSError:
        pass
