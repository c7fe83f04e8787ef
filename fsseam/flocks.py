"""The real file system's locks (``fsseam.fs.RealFileSystem.try_lock`` and ``open_lock``):
``flock`` on a descriptor of their own, so the kernel drops a lock when its holder dies.

May import: nothing of ours. Thread-safety: a lock handle belongs to one thread at a time.
"""

from __future__ import annotations

import fcntl
import os


class RealFileLock:
    """The held data-dir lock of ``try_lock``: released by closing its descriptor."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


class RealSharedLock:
    """``flock`` on a descriptor of its own: held per open file, so two handles of one
    process exclude each other too, and the kernel drops it when the holder dies."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def acquire(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def try_acquire(self) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)  # closing the only descriptor drops the flock
