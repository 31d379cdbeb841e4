"""A worker's disk quota: the keeper measures the run directory while the worker runs and
kills it once the directory outgrows its quota (:data:`QUOTA_EXIT`)."""

from __future__ import annotations

import math
import os
import select
import signal
import stat
import time

__all__ = ["MAX_ENTRIES", "QUOTA_EXIT", "directory_bytes", "process_handle"]

# Exit code of the keeper when the run directory outgrew its quota.
QUOTA_EXIT = 90
QUOTA_POLL_S = 0.05


#: the most files and folders a run directory may hold: each look of the quota's watchdog
#: takes longer the more there are, and a worker could write between two slow looks
MAX_ENTRIES = 20_000


def directory_bytes(path: str) -> float:
    """Disk space used beneath ``path``, counting allocated blocks, following no link.

    ``math.inf`` where what is beneath cannot be measured in full: more than
    :data:`MAX_ENTRIES` entries, or an entry the scan cannot reach (a path longer than the
    kernel's limit, below a chain of folders a worker made by changing into each one; a
    folder it made without permissions). A worker could otherwise hide what it writes there
    from the watchdog (a red-team finding: 1.6 GB under a 40 MB quota).
    """
    total, entries, pending = 0, 0, [path]
    while pending:
        try:
            with os.scandir(pending.pop()) as listing:
                for entry in listing:
                    entries += 1
                    if entries > MAX_ENTRIES:
                        return math.inf
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed since it was listed
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(entry.path)
        except FileNotFoundError:
            continue
        except OSError:
            return math.inf
    return total


def watch_quota(holder: int, run_dir: str, quota_mb: float) -> int:
    """Wait for the holder; kill it if the run directory grows past the quota (or cannot be
    measured: see :func:`directory_bytes`)."""
    quota = int(quota_mb * 2**20)
    ended = process_handle(holder)  # readable once the holder has exited: no wait for the next look
    try:
        while True:
            pid, status = os.waitpid(holder, os.WNOHANG)
            # also once the job has ended: no result past it
            over = directory_bytes(run_dir) > quota
            if pid == holder and not over:
                return status
            if over:
                if pid != holder:
                    os.kill(holder, signal.SIGKILL)
                    os.waitpid(holder, 0)
                message = (f"sandbox: the run directory outgrew its quota of {quota_mb:g} MB (or "
                           f"holds more than {MAX_ENTRIES:,} entries, or folders too deep to "
                           "measure)\n")
                os.write(2, message.encode())
                return QUOTA_EXIT << 8
            if ended is None:
                time.sleep(QUOTA_POLL_S)
            else:
                select.select([ended], [], [], QUOTA_POLL_S)
    finally:
        if ended is not None:
            os.close(ended)


def process_handle(pid: int) -> int | None:
    """A descriptor that turns readable when the child ``pid`` exits (``pidfd_open``, Linux
    5.3+), for waiting on it with ``select`` beside other things; None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
