"""Open-file handles of the simulated file system.

A handle keeps its position and its closed flag; every counted step goes back to its file
system through the small ``HandleHost`` protocol (its lock, its operation counter, its data
changes), so this module needs nothing of ``fsseam.simfs`` and no import cycle forms.

Thread-safety: a handle takes its file system's lock for every counted step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from fsseam.simfs_tree import Change, SimFile


class HandleHost(Protocol):
    """What a handle needs of its file system."""

    @property
    def lock(self) -> threading.RLock: ...

    def count(self, name: str, path: str = "") -> OSError | None: ...

    def change(self, node: SimFile, change: Change, path: str) -> None: ...

    def fsync_node(self, node: SimFile, path: str) -> None: ...


class _SimHandle:
    """A position in one file of one file system, until closed."""

    def __init__(self, fs: HandleHost, node: SimFile, path: str, position: int = 0) -> None:
        self._fs = fs
        self._node = node
        self._path = path
        self._position = position
        self._closed = False

    @property
    def path(self) -> str:
        return self._path

    def _check(self) -> None:
        if self._closed:
            raise ValueError(f"{self._path} is closed")

    def close(self) -> None:
        self._closed = True


class SimWritableFile(_SimHandle):
    def write(self, data: bytes | bytearray | memoryview) -> int:
        with self._fs.lock:
            self._check()
            self._fs.count("write", self._path)
            return self.put(bytes(data))

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        with self._fs.lock:
            self._check()
            self._fs.count("write", self._path)
            self._fs.change(self._node, ("write", offset, bytes(data)), self._path)

    def put(self, data: bytes) -> int:
        """Write at the position without counting (``copy_range`` counted already)."""
        self._fs.change(self._node, ("write", self._position, data), self._path)
        self._position += len(data)
        return len(data)

    def fsync(self) -> None:
        with self._fs.lock:
            self._check()
            self._fs.fsync_node(self._node, self._path)

    def start_writeback(self, offset: int = 0, count: int = 0) -> None:
        """A hint without a promise: the simulated disk keeps the bytes volatile until an
        fsync, as a real one may, so this changes nothing."""
        with self._fs.lock:
            self._check()

    def truncate(self, size: int) -> None:
        with self._fs.lock:
            self._check()
            self._fs.count("truncate", self._path)
            self._fs.change(self._node, ("truncate", size, b""), self._path)
            self._position = size

    def tell(self) -> int:
        return self._position

    def fileno(self) -> None:
        return None


class SimReadableFile(_SimHandle):
    def read(self, size: int = -1) -> bytes:
        with self._fs.lock:
            self._check()
            self._fs.count("read", self._path)
            return self.take(size)

    def take(self, size: int) -> bytes:
        """Read from the position without counting (``copy_range`` counted already)."""
        end = len(self._node.data) if size < 0 else self._position + size
        data = bytes(self._node.data[self._position : end])
        self._position += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:
        with self._fs.lock:
            self._check()
            self._fs.count("read", self._path)
            data = self.take(len(buffer))
            buffer[: len(data)] = data
            return len(data)

    def seek(self, offset: int) -> None:
        self._position = offset

    def size(self) -> int:
        return len(self._node.data)

    def fileno(self) -> int | None:
        return None


class SimFsSync:
    """What ``SimFileSystem.open_syncfs`` returns: ``sync`` is a counted ``syncfs``."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self.sync = sync

    def close(self) -> None:
        """Nothing is held."""
