"""Real-file-system wrappers that record or fail operations, and a crash-point recorder.

They subclass ``RealFileSystem``: every byte still goes to a real temporary directory, the
wrappers only watch (``RecordingFileSystem``) or refuse (``FailingFileSystem``).
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator

import pytest

from fsseam import crashpoints
from fsseam.fs import ReadableFile, RealFileSystem, WritableFile


class _WatchedFile:
    """A real writable file whose writes and fsyncs pass through the owning file system."""

    def __init__(self, inner: WritableFile, owner: RecordingFileSystem | FailingFileSystem):
        self.inner = inner
        self._owner = owner

    @property
    def path(self) -> str:
        return self.inner.path

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._owner.before_write(self, len(data))
        return self.inner.write(data)

    def write_at(self, offset: int, data: bytes) -> None:
        self._owner.before_write(self, len(data))
        self.inner.write_at(offset, data)

    def fsync(self) -> None:
        self._owner.before_fsync(self)
        self.inner.fsync()

    def start_writeback(self, offset: int = 0, count: int = 0) -> None:
        if isinstance(self._owner, RecordingFileSystem):
            self._owner.writebacks.append(self.path)
        self.inner.start_writeback(offset, count)

    def truncate(self, size: int) -> None:
        self.inner.truncate(size)

    def tell(self) -> int:
        return self.inner.tell()

    def fileno(self) -> int:
        return self.inner.fileno()  # type: ignore[attr-defined, no-any-return]

    def close(self) -> None:
        self.inner.close()


class RecordingFileSystem(RealFileSystem):
    """Logs every durability-relevant operation, in order, into ``events``."""

    def __init__(self, events: list[tuple[str, str]] | None = None) -> None:
        self.events: list[tuple[str, str]] = [] if events is None else events
        self.write_sizes: list[int] = []
        self.writebacks: list[str] = []
        """Paths whose writeback was started early, once per start."""
        self.threads: set[int] = set()
        """Threads that wrote or fsynced a file."""
        self.write_delay = 0.0
        """Seconds each write takes on top of the real one: a disk slower than the client."""
        self.fsync_dir_delay = 0.0
        """Seconds each directory fsync takes on top of the real one: a disk whose metadata
        flush is slow, so that callers arriving meanwhile find one running."""
        self._lock = threading.Lock()

    def record(self, kind: str, path: str) -> None:
        with self._lock:
            self.events.append((kind, path))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def create(self, path: str) -> WritableFile:
        self.record("create", path)
        return _WatchedFile(super().create(path), self)

    def before_write(self, file: _WatchedFile, size: int) -> None:
        time.sleep(self.write_delay)
        self.record("write", file.path)
        with self._lock:
            self.write_sizes.append(size)
            self.threads.add(threading.get_ident())

    def copy_range(self, source: ReadableFile, target: WritableFile, count: int) -> int:
        """A kernel-side copy appends bytes like a write: watched the same way."""
        assert isinstance(target, _WatchedFile)
        self.before_write(target, count)
        return super().copy_range(source, target.inner, count)

    def before_fsync(self, file: _WatchedFile) -> None:
        self.record("fsync", file.path)
        with self._lock:
            self.threads.add(threading.get_ident())

    def rename(self, source: str, target: str) -> None:
        self.record("rename", target)
        super().rename(source, target)

    def fsync_dir(self, path: str) -> None:
        self.record("fsync_dir", path)
        time.sleep(self.fsync_dir_delay)
        super().fsync_dir(path)

    def mkdir(self, path: str) -> None:
        self.record("mkdir", path)
        super().mkdir(path)

    def unlink(self, path: str) -> None:
        self.record("unlink", path)
        super().unlink(path)


class FailingFileSystem(RealFileSystem):
    """Fails writes once ``write_budget`` bytes were written, or every fsync, as told."""

    def __init__(self) -> None:
        self.write_budget: int | None = None
        self.write_errno = errno.ENOSPC
        self.fsync_errno: int | None = None
        self.write_gate: threading.Event | None = None
        """When set, every write waits for it: a disk that does not keep up."""
        self.write_entered = threading.Event()
        """Set once a write has started (and is perhaps waiting at the gate)."""
        self._written = 0
        self._lock = threading.Lock()

    def create(self, path: str) -> WritableFile:
        return _WatchedFile(super().create(path), self)

    def before_write(self, file: _WatchedFile, size: int) -> None:
        self.write_entered.set()
        if self.write_gate is not None:
            self.write_gate.wait(timeout=10)
        with self._lock:
            if self.write_budget is not None and self._written + size > self.write_budget:
                raise OSError(self.write_errno, "simulated", file.path)
            self._written += size

    def copy_range(self, source: ReadableFile, target: WritableFile, count: int) -> int:
        """A kernel-side copy appends bytes like a write: it spends the same budget."""
        assert isinstance(target, _WatchedFile)
        self.before_write(target, count)
        return super().copy_range(source, target.inner, count)

    def before_fsync(self, file: _WatchedFile) -> None:
        if self.fsync_errno is not None:
            raise OSError(self.fsync_errno, "simulated", file.path)


class SimulatedCrash(BaseException):
    """Raised by a crash hook: like a SIGKILL, it is no error the code may clean up after."""


@pytest.fixture
def recording_fs() -> RecordingFileSystem:
    return RecordingFileSystem()


@pytest.fixture
def failing_fs() -> FailingFileSystem:
    return FailingFileSystem()


@pytest.fixture
def crash_hits(recording_fs: RecordingFileSystem) -> Iterator[list[tuple[str, str]]]:
    """Record every crash point into the recording file system's event log."""
    crashpoints.set_hook(lambda name: recording_fs.record("hit", name))
    yield recording_fs.events
    crashpoints.set_hook(None)


class CrashArmer:
    """``arm(name)`` makes the next hit of crash point ``name`` raise ``Crash``."""

    Crash = SimulatedCrash

    def arm(self, target: str) -> None:
        def hook(name: str) -> None:
            if name == target:
                crashpoints.set_hook(None)
                raise SimulatedCrash(name)

        crashpoints.set_hook(hook)


@pytest.fixture
def crash_at() -> Iterator[CrashArmer]:
    yield CrashArmer()
    crashpoints.set_hook(None)
