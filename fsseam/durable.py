"""Durable file operations every user of the seam needs, written once: directories whose
own entries survive a power loss, and small files replaced whole or not at all (and read
back whole).

Thread-safety: blocking; call from an executor (or before the event loop starts). Each
``replace_file`` takes a temporary name of its own, so two writes of one path never share
one (a write cut loose by a cancelled task may still be running when the next begins); the
last rename wins.
"""

from __future__ import annotations

import contextlib
import itertools
import os

from fsseam.fs import FileSystem

_TEMP_NUMBERS = itertools.count()


def make_dirs_durably(fs: FileSystem, path: str) -> None:
    """Create ``path`` and its missing parents, fsyncing each new entry into its parent.

    Why: ``mkdir`` only changes the parent directory, which a power loss may forget; a data
    directory whose own entry vanished takes every file in it along, however carefully
    those files were synced.
    """
    missing = []
    current = os.path.normpath(path)
    while not fs.exists(current):
        missing.append(current)
        parent = os.path.dirname(current) or "."
        if parent == current:
            break
        current = parent
    fs.mkdir(path)
    for created in reversed(missing):
        fs.fsync_dir(os.path.dirname(created) or ".")  # the new entry, top down


def replace_file(fs: FileSystem, path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Make ``path`` hold exactly ``data``: after a crash it holds the old bytes or the whole
    new ones, never a torn file. ``mode`` is the new file's from its creation (0o600: never
    readable by others, not even while empty). A failed write removes its temporary file
    and leaves ``path`` as it was."""
    temp = f"{path}.{next(_TEMP_NUMBERS)}.tmp"
    with contextlib.suppress(FileNotFoundError):
        fs.unlink(temp)  # left by a crash mid-write (create refuses an existing file)
    file = fs.create(temp, mode=mode)
    try:
        file.write(data)
        file.fsync()  # the bytes are durable before any name points at them
    except BaseException:
        file.close()
        fs.unlink(temp)
        raise
    file.close()
    fs.rename(temp, path)  # atomic: readers see the old file or the whole new one
    fs.fsync_dir(os.path.dirname(path) or ".")  # the rename itself must survive a crash


def read_file(fs: FileSystem, path: str) -> bytes | None:
    """All bytes of the small file ``path``; None when there is none."""
    if not fs.exists(path):
        return None
    file = fs.open_read(path)
    try:
        return file.read()
    finally:
        file.close()
