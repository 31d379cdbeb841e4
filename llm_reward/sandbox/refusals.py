"""The job's side of its companion's refused calls: :class:`RefusalWatch` reads the seccomp
listener the companion's filter sends (seccomp user notification) and names each refused call."""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import select
import socket
import struct
import threading

from rewardlab.llm_reward.sandbox.seccomp import LISTENER, NO_LISTENER

__all__ = ["EXIT_GRACE_MS", "RefusalWatch", "syscall_name", "syscall_names"]

#: ``SECCOMP_IOCTL_NOTIF_RECV``, ``_IOWR('!', 0, struct seccomp_notif)``: the struct is 80
#: bytes, the call's number at byte 16 and its architecture (``AUDIT_ARCH_*``) at byte 20
_NOTIFICATION_BYTES = 80
_NOTIF_RECV = (3 << 30) | (_NOTIFICATION_BYTES << 16) | (ord("!") << 8)
_NOTIFICATION_CALL = struct.Struct("=iI")
_NOTIFICATION_ID = struct.Struct("=Q")
#: ``SECCOMP_IOCTL_NOTIF_SEND``, ``_IOWR('!', 1, struct seccomp_notif_resp)``: the call's id,
#: its return value, its error (negative) and flags (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``: run it)
_ANSWER = struct.Struct("=QqiI")
_NOTIF_SEND = (3 << 30) | (_ANSWER.size << 16) | (ord("!") << 8) | 1
_CONTINUE = 1
#: how long the watch holds an exit for the calls of other threads still to come, ms
EXIT_GRACE_MS = 20


def _answer(listener: int, call: int, error: int = 0, flags: int = 0) -> None:
    """Answer notified call ``call``: run it (``flags=_CONTINUE``) or fail it with ``error``.
    A call whose thread has ended meanwhile (``ENOENT``) needs no answer."""
    try:
        fcntl.ioctl(listener, _NOTIF_SEND, _ANSWER.pack(call, 0, -error, flags))
    except OSError as failure:
        if failure.errno != errno.ENOENT:
            raise



@functools.cache
def syscall_names() -> tuple[int, dict[int, str]]:
    """This machine's architecture (``AUDIT_ARCH_*``) and its system calls' names by number, from
    libseccomp; empty where libseccomp is not usable. Cached before a worker confines itself
    (:func:`~rewardlab.llm_reward.sandbox.namespaces.run_isolated`), since a confined job may not
    call native code."""
    try:
        import pyseccomp as seccomp

        arch = int(seccomp.system_arch())
        names = {}
        for number in range(1024):
            try:
                names[number] = seccomp.resolve_syscall(seccomp.Arch.NATIVE, number).decode()
            except (ValueError, OSError):
                continue
        return arch, names
    except (ImportError, OSError, AttributeError):
        return 0, {}


def syscall_name(number: int, arch: int) -> str:
    """The name of system call ``number`` of architecture ``arch`` (``AUDIT_ARCH_*``), or
    its number where this machine's table does not have it."""
    native, names = syscall_names()
    if arch == native and number in names:
        return names[number]
    return f"system call {number} of architecture {arch:#x}"


class RefusalWatch:
    """The job's side of its companion's refused calls: the listener of the companion's filter
    (:func:`~rewardlab.llm_reward.sandbox.seccomp.allow_computation_only`), watched by a thread of
    the job.

    The first refused call is recorded in :attr:`refused` (its name) and the channel to the
    companion is shut down, so that the job, waiting for an answer, stops waiting and fails the
    program (:attr:`refused` says why); every refused call, which never runs, returns ``ENOSYS``.
    The companion's exit (``exit_group``) is notified too, where the kernel can let it go on
    (:func:`~rewardlab.llm_reward.sandbox.seccomp.continue_supported`): read after every call
    refused before it, it runs then, so an exit cannot withdraw a refused call unseen. The job waits
    for the watch (:meth:`wait`) before it accepts a result or blames an exit, so a call made after
    the last answer, or just before the companion exits, is seen too.

    Take it with :meth:`receive` before anything else reads the channel.
    """

    def __init__(self, listener: int | None, channel: socket.socket):
        self.refused: str | None = None
        self._listener = listener
        self._channel = channel
        self._thread: threading.Thread | None = None
        if listener is not None:
            self._thread = threading.Thread(target=self._watch, name="refused-calls", daemon=True)
            self._thread.start()

    def wait(self, timeout_s: float) -> str | None:
        """Wait until the watch has ended (the companion has ended, or a call was refused),
        at most ``timeout_s``, and return :attr:`refused`: a result is accepted only once
        the watch has seen the companion's last call.

        :param timeout_s: the longest wait, seconds.
        """
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self.refused

    @classmethod
    def receive(cls, channel: socket.socket) -> RefusalWatch:
        """The watch of the companion at the other end of ``channel``: reads the byte its
        :func:`~rewardlab.llm_reward.sandbox.seccomp.allow_computation_only` sent, and the listener
        with it (none: a companion whose refused calls kill it, one that ended first, or one that
        sent no such byte and starts with its first frame, whose first byte is 0)."""
        if channel.recv(1, socket.MSG_PEEK) not in (LISTENER, NO_LISTENER):
            return cls(None, channel)
        _, listeners, _, _ = socket.recv_fds(channel, 1, 1)
        return cls(listeners[0] if listeners else None, channel)

    def _watch(self) -> None:
        listener = self._listener
        assert listener is not None
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        withdrawn, exiting = False, None
        try:
            while True:
                # an exit waits until no other call has come for a moment: a thread's call
                # made as the process exits is read before the exit can withdraw it
                ready = poller.poll(None if exiting is None else EXIT_GRACE_MS)
                if not ready and exiting is not None:
                    _answer(listener, exiting, flags=_CONTINUE)
                    exiting = None
                    continue
                events = next((event for fd, event in ready if fd == listener), 0)
                if events & select.POLLIN:
                    notification = bytearray(_NOTIFICATION_BYTES)
                    try:
                        fcntl.ioctl(listener, _NOTIF_RECV, notification, True)
                    except OSError as error:
                        if error.errno == errno.EINTR:
                            continue
                        if error.errno == errno.ENOENT:
                            # withdrawn before it could be read: its thread was killed, or a
                            # signal came first (the call is then made again and named)
                            withdrawn = True
                            continue
                        # a kernel whose notice this cannot read: refused all the same,
                        # unnamed; closing the listener answers every call ENOSYS
                        self._refuse(f"a call whose notice could not be read "
                                     f"({os.strerror(error.errno or 0)})")
                        return
                    (call,) = _NOTIFICATION_ID.unpack_from(notification, 0)
                    name = syscall_name(*_NOTIFICATION_CALL.unpack_from(notification, 16))
                    if name == "exit_group":
                        if exiting is not None:  # another thread's exit: one is enough
                            _answer(listener, exiting, flags=_CONTINUE)
                        exiting = call
                    else:
                        self._refuse(name)
                        _answer(listener, call, error=errno.ENOSYS)  # it never runs
                    continue
                if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    # no process uses the filter any more: the companion has ended
                    if withdrawn and self.refused is None:
                        self.refused = ("a call withdrawn as its thread ended, before it "
                                        "could be named")
                    return
        finally:
            os.close(listener)

    def _refuse(self, name: str) -> None:
        """Record the first refused call and shut the channel down, so that the job,
        waiting for an answer, stops waiting."""
        if self.refused is not None:
            return
        self.refused = name
        try:
            self._channel.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already
