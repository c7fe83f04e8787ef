"""Claims on regions of an upload's file that every serving process sees: OFD locks.

Why: with several serving processes (``SERVICE_WORKERS``) the parts of one upload arrive on
different processes. A part may be written in place only while no other request writes the
same part, and ``complete`` may seal the file only once no part is being written into it.
An open file description lock (``F_OFD_SETLK``, Linux 3.15+) on a part's region says so to
every process: it conflicts with any other description's lock, in this process too, and the
kernel drops it when its descriptor closes, so a process that dies mid-part leaves no claim
behind. A POSIX ``lockf`` lock would not do: it never conflicts within one process, and
closing any descriptor of the file drops all of that process's locks on it.

Where the system has no OFD locks, ``supported()`` is False and, with several processes,
parts keep their own files (``service.multipart.in_place``).

Thread-safety: blocking functions (run them on an executor); a ``RegionLock`` is released
once, by its owner.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import time

_FLOCK = struct.Struct("hhqqi4x")
"""``struct flock`` on Linux: type, whence, start, length, pid (0 for OFD locks), padding."""
POLL_SECONDS = 0.01
"""How often ``lock_when_free`` tries again."""


def supported() -> bool:
    return hasattr(fcntl, "F_OFD_SETLK")


class RegionLock:
    """A held write lock; ``release`` (idempotent) drops it by closing its descriptor."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def try_lock(path: str, start: int, length: int) -> RegionLock | None:
    """A write lock on ``length`` bytes of the existing file ``path`` from ``start`` (0: to
    the end and beyond), or None when another description holds any of them."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, length, 0)
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, request)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return None
        raise
    except BaseException:
        os.close(fd)
        raise
    return RegionLock(fd)


def lock_when_free(path: str, start: int, length: int, timeout: float) -> RegionLock | None:
    """``try_lock`` until it succeeds, or None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        lock = try_lock(path, start, length)
        if lock is not None or time.monotonic() >= deadline:
            return lock
        time.sleep(POLL_SECONDS)
