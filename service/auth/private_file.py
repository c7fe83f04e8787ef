"""Small secret files (the server secret, the bootstrap credentials) written atomically, 0600.

Writes go through the seam's ``replace_file`` (``fsseam.durable``) with mode 0600: the file
is created owner-only, so it is never readable by others, not even while empty, and after a
crash the target is either absent, the old file or the whole new one, never a torn secret.

Thread-safety: blocking I/O; call from an executor or before the event loop starts.
"""

from __future__ import annotations

from fsseam.durable import replace_file
from fsseam.fs import FileSystem

PRIVATE_FILE_MODE = 0o600


def write_private_file(fs: FileSystem, path: str, data: bytes) -> None:
    """Atomically make ``path`` hold exactly ``data``, readable by the owner only."""
    replace_file(fs, path, data, mode=PRIVATE_FILE_MODE)


def read_private_file(fs: FileSystem, path: str) -> bytes:
    """All bytes of ``path``."""
    file = fs.open_read(path)
    try:
        return file.read()
    finally:
        file.close()
