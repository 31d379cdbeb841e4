"""Walking folders that untrusted code wrote."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def walk_files(root: Path) -> Iterator[tuple[Path, os.DirEntry[str]]]:
    """Everything beneath ``root`` but folders, as ``(folder, entry)``, found without recursion
    and into no linked folder (as ``rglob``). A sandboxed worker's folders may nest past
    Python's recursion limit and paths past the kernel's length limit; a folder that cannot
    be listed is skipped.

    :param root: the folder to walk.
    """
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(folder / entry.name)
                    else:
                        yield folder, entry
        except OSError:
            continue  # what was found before the error stands
