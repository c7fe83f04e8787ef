"""A simulated, in-memory file system for crash and fault testing.

``SimFileSystem`` implements ``fsseam.fs.FileSystem`` and remembers, per file and per
directory, what is only cached and what is durable:

- file data becomes durable with ``fsync`` on a handle of that file;
- directory entries (creations, renames, unlinks, mkdir, rmdir) become durable with
  ``fsync_dir`` on their directory;
- everything (every file and every directory) becomes durable with ``sync`` on the handle
  ``open_syncfs`` returns, as ``syncfs(2)`` does.

Every operation is counted (and, with ``trace=True``, logged). A ``Fault`` makes operation
number ``at`` (or the first later one of the named kinds) either crash, meaning it is not
performed and it and every later operation raise ``SimulatedCrash``, or fail with ``OSError``
EIO or ENOSPC, once or persistently. A failure is normally not performed; a ``performed``
fsync failure takes effect and then reports the error (the data reached the disk, the
caller hears EIO), so the caller cannot know what survived. After a crash (or at any
moment, for a power cut "now"), ``crash_image(mode)``
returns a new file system holding what a disk would keep after losing power:

``"lose_unsynced"``
    only durable data and durable directory entries survive;
``"keep_unsynced"``
    everything written survives (the kernel flushed it all in time);
``"random_subset"``
    a seeded random subset of the unsynced writes and directory changes survives, so later
    writes may persist while earlier ones are lost (pages reach the disk in any order);
    missing ranges inside a file read as zeros;
``"torn_tail"``
    everything survives except each file's last unsynced write, of which only a seeded
    random strict prefix persists.

A failed ``fsync`` behaves like Linux after an I/O error: the file's unsynced writes are
marked clean without reaching the disk (they stay readable until the crash, are lost by it,
and a retried fsync "succeeds" without saving them). That is what makes never retrying an
fsync testable.

Capacity is finite (``capacity`` bytes), so writes fail with ENOSPC naturally when it is
exhausted; ``disk_usage`` reports it. ``stat`` mtimes come from an injectable clock
(``ManualClock`` by default), and randomness only from seeds, so runs are deterministic.

The parts live in modules of their own: ``simfs_tree`` (files, directories and crash
images), ``simfs_faults`` (operation counting and fault injection) and ``simfs_handles``
(open files); this module joins them into the ``FileSystem`` and is the one to import.

Thread-safety: one re-entrant lock serialises every operation; handles use their file
system's lock. Safe to use from an executor thread while a test thread inspects it.
"""

from __future__ import annotations

import errno
import os
import posixpath
import threading
from collections import Counter
from collections.abc import Callable, Iterable

from fsseam.fs import FileStat, ReadableFile, WritableFile
from fsseam.simfs_faults import (
    OPERATIONS,
    Fault,
    FaultInjector,
    FaultKind,
    SimulatedCrash,
    fault_for_error,
    operation_names,
)
from fsseam.simfs_handles import SimFsSync, SimReadableFile, SimWritableFile
from fsseam.simfs_tree import (
    CRASH_MODES,
    Change,
    CrashMode,
    SimDir,
    SimFile,
    apply_change,
    crash_tree,
    sync_tree,
)

__all__ = [
    "CRASH_MODES",
    "OPERATIONS",
    "CrashMode",
    "Fault",
    "FaultKind",
    "ManualClock",
    "SimFileSystem",
    "SimulatedCrash",
]


class ManualClock:
    """A clock that moves only when told: ``clock()`` reads it, ``advance`` moves it."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class _SimLock:
    """A lock of the simulated file system: one holder per path, in this process."""

    def __init__(self, held: set[str], path: str) -> None:
        self._held, self._path = held, path

    def release(self) -> None:
        self._held.discard(self._path)


class _SimSharedLock:
    """A lock of the simulated file system that holders take in turn (``open_lock``): a
    thread lock per path, shared by every handle of it; ``close`` releases a hold, as a
    process's death does."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._held = False

    def acquire(self) -> None:
        self._lock.acquire()
        self._held = True

    def try_acquire(self) -> bool:
        if not self._held:
            self._held = self._lock.acquire(blocking=False)
        return self._held

    def release(self) -> None:
        self._held = False
        self._lock.release()

    def close(self) -> None:
        if self._held:
            self.release()


class SimFileSystem:
    """An in-memory ``FileSystem`` that can crash, fail, and show what a power loss keeps."""

    timestamp_slack = 0.0
    """Its mtimes are its clock's own readings (``FileSystem.timestamp_slack``)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] | None = None,
        capacity: int = 1 << 40,
        trace: bool = False,
    ) -> None:
        self.clock: Callable[[], float] = clock if clock is not None else ManualClock()
        self.capacity = capacity
        self._faults = FaultInjector(trace)
        self._lock = threading.RLock()
        self._root = SimDir()
        self._used = 0
        self._locks: set[str] = set()
        self._shared_locks: dict[str, threading.Lock] = {}

    @property
    def operations(self) -> int:
        """Operations performed (or attempted) so far; the next one has this index."""
        return self._faults.operations

    @property
    def counts(self) -> Counter[str]:
        """Operations by name."""
        return self._faults.counts

    @property
    def trace(self) -> list[tuple[int, str, str]] | None:
        """With ``trace=True``: (index, operation, path) of every counted operation."""
        return self._faults.trace

    @trace.setter
    def trace(self, trace: list[tuple[int, str, str]] | None) -> None:
        self._faults.trace = trace

    @property
    def crashed(self) -> bool:
        """Whether power was lost: every operation now raises ``SimulatedCrash``."""
        return self._faults.crashed

    # -- fault injection -------------------------------------------------------------------

    def inject(self, fault: Fault) -> None:
        """Arm ``fault``."""
        with self._lock:
            self._faults.faults.append(fault)

    def crash_at(self, at: int, operations: Iterable[str] | None = None) -> None:
        """Crash at operation ``at`` (or the first later one of the given kinds)."""
        self.inject(Fault(at, "crash", operations=operation_names(operations)))

    def fail_at(
        self,
        at: int,
        error: int,
        *,
        persistent: bool = False,
        operations: Iterable[str] | None = None,
    ) -> None:
        """Fail operation ``at`` (or the first later matching one) with ``OSError(error)``."""
        self.inject(fault_for_error(at, error, persistent=persistent, operations=operations))

    def crash(self) -> None:
        """Lose power now: every later operation raises ``SimulatedCrash``."""
        with self._lock:
            self._faults.crashed = True

    @property
    def lock(self) -> threading.RLock:
        """The lock every operation holds (for handles: ``simfs_handles.HandleHost``)."""
        return self._lock

    def count(self, name: str, path: str = "") -> OSError | None:
        """Count one operation and fire any fault armed for it. Caller holds the lock.

        Returns the error of a ``performed`` fault, which the caller raises after doing the
        operation (only ``fsync`` and ``fsync_dir`` can get one).
        """
        return self._faults.operation(name, path)

    # -- crash images ----------------------------------------------------------------------

    def crash_image(self, mode: CrashMode, seed: int = 0) -> SimFileSystem:
        """A new file system with what survives a power loss now, by ``mode``."""
        with self._lock:
            root, used = crash_tree(self._root, mode, seed)
            image = SimFileSystem(clock=self.clock, capacity=self.capacity)
            image._root, image._used = root, used
            return image

    # -- path helpers ----------------------------------------------------------------------

    @staticmethod
    def _split(path: str) -> list[str]:
        normal = posixpath.normpath("/" + path)
        return [part for part in normal.split("/") if part]

    def _lookup(self, path: str, missing_ok: bool = False) -> SimFile | SimDir | None:
        node: SimFile | SimDir = self._root
        for part in self._split(path):
            if not isinstance(node, SimDir) or part not in node.entries:
                if missing_ok:
                    return None
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
            node = node.entries[part]
        return node

    def _parent(self, path: str) -> tuple[SimDir, str]:
        parts = self._split(path)
        if not parts:
            raise PermissionError(errno.EPERM, "the root has no parent", path)
        parent = self._lookup("/".join(parts[:-1]))
        if not isinstance(parent, SimDir):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return parent, parts[-1]

    def _file(self, path: str) -> SimFile:
        node = self._lookup(path)
        if isinstance(node, SimDir):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        assert node is not None
        return node

    def _dir(self, path: str) -> SimDir:
        node = self._lookup(path)
        if not isinstance(node, SimDir):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return node

    def _link(self, parent: SimDir, name: str, node: SimFile | SimDir | None) -> None:
        old = parent.entries.get(name)
        if isinstance(old, SimFile) and old is not node:
            old.links -= 1
            if old.links == 0:
                self._used -= len(old.data)
        if node is None:
            parent.entries.pop(name, None)
        else:
            parent.entries[name] = node
            if isinstance(node, SimFile) and old is not node:
                node.links += 1
        parent.pending.append((name, node))
        parent.mtime = self.clock()

    # -- data changes ----------------------------------------------------------------------

    def change(self, node: SimFile, change: Change, path: str) -> None:
        """Apply a write or truncate to a file's cache, within the capacity."""
        kind, position, data = change
        size = len(node.data)
        growth = (position if kind == "truncate" else max(size, position + len(data))) - size
        if node.links > 0 and growth > 0 and self._used + growth > self.capacity:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        apply_change(node.data, change)
        node.pending.append(change)
        node.mtime = self.clock()
        if node.links > 0:
            self._used += growth

    def fsync_node(self, node: SimFile, path: str) -> None:
        """Make a file's changes durable, or drop them as Linux does when fsync fails."""
        try:
            late = self.count("fsync", path)
        except OSError:
            node.pending.clear()  # Linux marks the pages clean although they never arrived
            raise
        if node.pending:
            # Apply the changes rather than copy the cache: writes dropped by a failed fsync
            # stay in the cache but never become durable.
            content = bytearray(node.durable)
            for change in node.pending:
                apply_change(content, change)
            node.durable = bytes(content)
            node.pending.clear()
        if late is not None:
            raise late

    # -- FileSystem ------------------------------------------------------------------------

    def create(self, path: str, mode: int = 0o644) -> WritableFile:
        """Create a file; ``mode`` is accepted and ignored (simulated files have no owner)."""
        with self._lock:
            self.count("create", path)
            parent, name = self._parent(path)
            if name in parent.entries:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
            node = SimFile(mtime=self.clock())
            self._link(parent, name, node)
            return SimWritableFile(self, node, path, 0)

    def open_append(self, path: str) -> WritableFile:
        with self._lock:
            self.count("open_append", path)
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if isinstance(node, SimDir):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            if node is None:
                node = SimFile(mtime=self.clock())
                self._link(parent, name, node)
            return SimWritableFile(self, node, path, len(node.data))

    def open_read(self, path: str) -> ReadableFile:
        with self._lock:
            self.count("open_read", path)
            return SimReadableFile(self, self._file(path), path)

    def rename(self, source: str, target: str) -> None:
        with self._lock:
            self.count("rename", source)
            source_parent, source_name = self._parent(source)
            node = source_parent.entries.get(source_name)
            if node is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), source)
            target_parent, target_name = self._parent(target)
            existing = target_parent.entries.get(target_name)
            if isinstance(existing, SimDir):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
            if existing is node:
                return
            self._link(target_parent, target_name, node)
            self._link(source_parent, source_name, None)

    def unlink(self, path: str) -> None:
        with self._lock:
            self.count("unlink", path)
            self._file(path)
            parent, name = self._parent(path)
            self._link(parent, name, None)

    def link(self, source: str, target: str) -> None:
        with self._lock:
            self.count("link", target)
            node = self._file(source)
            parent, name = self._parent(target)
            if name in parent.entries:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
            self._link(parent, name, node)

    def mkdir(self, path: str) -> None:
        with self._lock:
            self.count("mkdir", path)
            node: SimFile | SimDir = self._root
            for part in self._split(path):
                if not isinstance(node, SimDir):
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
                child = node.entries.get(part)
                if child is None:
                    child = SimDir(mtime=self.clock())
                    self._link(node, part, child)
                node = child
            if not isinstance(node, SimDir):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)

    def rmdir(self, path: str) -> None:
        with self._lock:
            self.count("rmdir", path)
            if self._dir(path).entries:
                raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), path)
            parent, name = self._parent(path)
            self._link(parent, name, None)

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            self.count("listdir", path)
            return sorted(self._dir(path).entries)

    def stat(self, path: str) -> FileStat:
        with self._lock:
            self.count("stat", path)
            node = self._lookup(path)
            if isinstance(node, SimDir):
                return FileStat(size=0, mtime=node.mtime, is_dir=True)
            assert node is not None
            return FileStat(size=len(node.data), mtime=node.mtime, is_dir=False)

    def exists(self, path: str) -> bool:
        with self._lock:
            self.count("exists", path)
            return self._lookup(path, missing_ok=True) is not None

    def truncate(self, path: str, size: int) -> None:
        with self._lock:
            self.count("truncate", path)
            self.change(self._file(path), ("truncate", size, b""), path)

    def fsync_dir(self, path: str) -> None:
        with self._lock:
            late = self.count("fsync_dir", path)
            directory = self._dir(path)
            directory.durable = dict(directory.entries)
            directory.pending.clear()
            if late is not None:
                raise late

    def open_syncfs(self, path: str) -> SimFsSync:
        """A ``syncfs`` handle (opening it is not counted): each ``sync`` is one counted
        ``syncfs`` operation that makes every file and directory durable at once; a failed
        one changes nothing, a ``performed`` failure makes all durable and still fails."""
        with self._lock:
            self._dir(path)
        return SimFsSync(lambda: self._syncfs(path))

    def _syncfs(self, path: str) -> None:
        with self._lock:
            late = self.count("syncfs", path)
            sync_tree(self._root)
            if late is not None:
                raise late

    def fsync_file(self, path: str) -> None:
        with self._lock:
            node = self._lookup(path, missing_ok=True)
            if not isinstance(node, SimFile):
                self.count("fsync", path)
                self._file(path)  # raises the error a missing path or a directory gets
            assert isinstance(node, SimFile)
            self.fsync_node(node, path)

    def copy_range(self, source: ReadableFile, target: WritableFile, count: int) -> int:
        if not isinstance(source, SimReadableFile) or not isinstance(target, SimWritableFile):
            raise TypeError("SimFileSystem.copy_range needs its own files")
        with self._lock:
            self.count("copy_range", target.path)
            data = source.take(count)
            target.put(data)
            return len(data)

    def disk_usage(self, path: str) -> tuple[int, int]:
        with self._lock:
            self.count("disk_usage", path)
            self._lookup(path)
            return self.capacity, max(0, self.capacity - self._used)

    def try_lock(self, path: str) -> _SimLock | None:
        with self._lock:
            self.count("try_lock", path)
            if path in self._locks:
                return None
            self._locks.add(path)
            return _SimLock(self._locks, path)

    def lock_holder(self, path: str) -> str:
        return ""

    def open_lock(self, path: str) -> _SimSharedLock:
        """Not a file operation (never counted, never crashes): a lock lives in memory."""
        with self._lock:
            return _SimSharedLock(self._shared_locks.setdefault(path, threading.Lock()))

    # -- inspection for tests (not counted) ------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        """The cached content of a file, without counting an operation."""
        with self._lock:
            return bytes(self._file(path).data)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Replace a file's content durably (creating it and its directories), uncounted.

        For tests that plant or damage files between runs, as a disk would.
        """
        with self._lock:
            directory = self._root
            parts = self._split(path)
            for part in parts[:-1]:
                child = directory.entries.get(part)
                if not isinstance(child, SimDir):
                    child = SimDir(mtime=self.clock())
                    self._link(directory, part, child)
                    directory.durable = dict(directory.entries)
                    directory.pending.clear()
                directory = child
            parent, name = directory, parts[-1]
            node = parent.entries.get(name)
            if not isinstance(node, SimFile):
                node = SimFile()
                self._link(parent, name, node)
                parent.durable = dict(parent.entries)
                parent.pending.clear()
            self._used += len(data) - len(node.data)
            node.data = bytearray(data)
            node.durable = bytes(data)
            node.pending.clear()
            node.mtime = self.clock()

    def unsynced(self) -> int:
        """How many file changes and directory changes are not durable yet."""
        with self._lock:
            total = 0
            stack: list[SimDir] = [self._root]
            while stack:
                directory = stack.pop()
                total += len(directory.pending)
                for node in directory.entries.values():
                    if isinstance(node, SimDir):
                        stack.append(node)
                    else:
                        total += len(node.pending)
            return total
