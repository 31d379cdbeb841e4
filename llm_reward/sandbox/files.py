"""Files a sandboxed worker could write, read and removed by the caller without following its links."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["read_private_tail", "remove_tree", "write_private"]


def read_private_tail(path: str | os.PathLike[str], limit: int = 2000) -> str:
    """The last ``limit`` bytes of a regular file in a folder a worker could write, as text.

    Follows no link (``O_NOFOLLOW``) and reads nothing but a regular file, so a program
    cannot make the caller read another file through a link it planted; ``""`` otherwise.

    :param path: the file.
    :param limit: bytes from the end.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def write_private(directory: str | os.PathLike[str], name: str, text: str) -> Path:
    """Write ``text`` as ``directory/name``, where a worker may have left a link or a file.

    Whatever is at that name is removed first (a link is removed, never followed), and the
    file is created anew with ``O_EXCL | O_NOFOLLOW``. Call it once the worker is gone.

    :param directory: a folder the caller made (a run directory).
    :param name: a plain file name.
    :raises OSError: the name could not be cleared (e.g. a folder is there).
    """
    if os.sep in name or name in ("", ".", ".."):
        raise ValueError(f"name={name!r} must be a plain file name")
    path = Path(directory) / name
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    return path


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` and everything beneath it, a folder a worker wrote; nothing if it is missing.

    A worker can nest folders deeper than Python's recursion limit (``shutil.rmtree``
    raises ``RecursionError``, even with ``ignore_errors``) and paths longer than the
    kernel's limit, so every folder found is first moved up to ``path`` itself, and emptied
    there: no recursion, no long paths. Links are removed, never followed. Call it once
    the worker is gone; errors of single entries are ignored.

    :param path: the folder.
    """
    root = os.fspath(path)
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            os.unlink(root)
            return
    except OSError:
        return
    pending, moved, token = [root], 0, os.urandom(6).hex()  # names the worker cannot have taken
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            entries = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    moved += 1
                    flat = os.path.join(root, f".removing-{token}-{moved}")
                    os.rename(entry.path, flat)
                    pending.append(flat)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue
        if folder != root:
            try:
                os.rmdir(folder)
            except OSError:
                pass
    try:
        os.rmdir(root)
    except OSError:
        pass
