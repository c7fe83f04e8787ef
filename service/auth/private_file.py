"""Small secret files (the server secret, the bootstrap credentials) written atomically, 0600.

Writes go through the file-system seam: a temporary file is created owner-only (the mode
is given to ``FileSystem.create``, so the file is never readable by others, not even while
empty), written, fsynced, renamed over the target, and the directory fsynced, so after a
crash the target is either absent, the old file or the whole new one, never a torn secret.

Thread-safety: blocking I/O; call from an executor or before the event loop starts. Two
concurrent writers of one path would share the temporary name: callers write each file from
one place only.
"""

from __future__ import annotations

import os

from fsseam.fs import FileSystem

PRIVATE_FILE_MODE = 0o600


def write_private_file(fs: FileSystem, path: str, data: bytes) -> None:
    """Atomically make ``path`` hold exactly ``data``, readable by the owner only."""
    temp = path + ".tmp"
    if fs.exists(temp):
        fs.unlink(temp)  # left by a crash mid-write; the target itself is untouched
    file = fs.create(temp, mode=PRIVATE_FILE_MODE)
    try:
        file.write(data)
        file.fsync()  # the bytes are durable before any name points at them
    except BaseException:
        file.close()
        fs.unlink(temp)
        raise
    file.close()
    fs.rename(temp, path)  # atomic: readers see the old file or the whole new one
    fs.fsync_dir(os.path.dirname(path) or ".")  # make the rename itself durable


def read_private_file(fs: FileSystem, path: str) -> bytes:
    """All bytes of ``path``."""
    file = fs.open_read(path)
    try:
        return file.read()
    finally:
        file.close()
