"""A simulated, in-memory file system for crash and fault testing.

``SimFileSystem`` implements ``fsseam.fs.FileSystem`` and remembers, per file and per
directory, what is only cached and what is durable:

- file data becomes durable with ``fsync`` on a handle of that file;
- directory entries (creations, renames, unlinks, mkdir, rmdir) become durable with
  ``fsync_dir`` on their directory.

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

Thread-safety: one re-entrant lock serialises every operation; handles use their file
system's lock. Safe to use from an executor thread while a test thread inspects it.
"""

from __future__ import annotations

import errno
import os
import posixpath
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from fsseam.fs import FileStat, ReadableFile, WritableFile

CrashMode = Literal["lose_unsynced", "keep_unsynced", "random_subset", "torn_tail"]
CRASH_MODES: tuple[CrashMode, ...] = (
    "lose_unsynced",
    "keep_unsynced",
    "random_subset",
    "torn_tail",
)
FaultKind = Literal["crash", "eio", "enospc"]

OPERATIONS = frozenset(
    {
        "create",
        "open_append",
        "open_read",
        "write",
        "fsync",
        "truncate",
        "read",
        "rename",
        "unlink",
        "link",
        "mkdir",
        "rmdir",
        "listdir",
        "stat",
        "exists",
        "fsync_dir",
        "copy_range",
        "disk_usage",
    }
)
"""The counted operation names (handle ``close``, ``seek``, ``tell`` and ``size`` are free)."""
_PERFORMABLE = frozenset({"fsync", "fsync_dir"})


class SimulatedCrash(Exception):
    """The simulated machine lost power; every later operation raises this too."""


class ManualClock:
    """A clock that moves only when told: ``clock()`` reads it, ``advance`` moves it."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Fault:
    """Make the first matching operation at or after count ``at`` crash or fail.

    ``operations`` limits the fault to those operation names (see ``OPERATIONS``); ``paths``
    to operations whose path starts with one of the prefixes. A ``persistent`` failure keeps
    firing on every later matching operation; a crash is always permanent. A ``performed``
    failure (only for ``fsync`` and ``fsync_dir``) makes the operation durable first.
    """

    at: int
    kind: FaultKind
    persistent: bool = False
    operations: frozenset[str] | None = None
    paths: tuple[str, ...] | None = None
    performed: bool = False

    def __post_init__(self) -> None:
        if self.performed and (
            self.kind == "crash" or self.operations is None or not self.operations <= _PERFORMABLE
        ):
            raise ValueError("only fsync and fsync_dir failures can be performed")

    def matches(self, index: int, operation: str, path: str) -> bool:
        return (
            index >= self.at
            and (self.operations is None or operation in self.operations)
            and (self.paths is None or path.startswith(self.paths))
        )


@dataclass(eq=False)
class _File:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""
    # Changes since the last fsync, in order: ("write", offset, bytes) or ("truncate", size).
    pending: list[tuple[str, int, bytes]] = field(default_factory=list)
    mtime: float = 0.0
    links: int = 0


@dataclass(eq=False)
class _Dir:
    entries: dict[str, _File | _Dir] = field(default_factory=dict)
    durable: dict[str, _File | _Dir] = field(default_factory=dict)
    # Entry changes since the last fsync_dir, in order: (name, node or None for removal).
    pending: list[tuple[str, _File | _Dir | None]] = field(default_factory=list)
    mtime: float = 0.0


def _apply(content: bytearray, change: tuple[str, int, bytes]) -> None:
    kind, position, data = change
    if kind == "truncate":
        if position < len(content):
            del content[position:]
        else:
            content.extend(bytes(position - len(content)))
        return
    end = position + len(data)
    if position > len(content):
        content.extend(bytes(position - len(content)))
    content[position:end] = data


class _SimLock:
    """A lock of the simulated file system: one holder per path, in this process."""

    def __init__(self, held: set[str], path: str) -> None:
        self._held, self._path = held, path

    def release(self) -> None:
        self._held.discard(self._path)


class SimFileSystem:
    """An in-memory ``FileSystem`` that can crash, fail, and show what a power loss keeps."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] | None = None,
        capacity: int = 1 << 40,
        trace: bool = False,
    ) -> None:
        self.clock: Callable[[], float] = clock if clock is not None else ManualClock()
        self.capacity = capacity
        self.operations = 0
        """Operations performed (or attempted) so far; the next one has this index."""
        self.trace: list[tuple[int, str, str]] | None = [] if trace else None
        """With ``trace=True``: (index, operation, path) of every counted operation."""
        self.counts: Counter[str] = Counter()
        """Operations by name."""
        self.crashed = False
        self._faults: list[Fault] = []
        self._lock = threading.RLock()
        self._root = _Dir()
        self._used = 0
        self._locks: set[str] = set()

    # -- fault injection -------------------------------------------------------------------

    def inject(self, fault: Fault) -> None:
        """Arm ``fault``."""
        with self._lock:
            self._faults.append(fault)

    def crash_at(self, at: int, operations: Iterable[str] | None = None) -> None:
        """Crash at operation ``at`` (or the first later one of the given kinds)."""
        self.inject(Fault(at, "crash", operations=_names(operations)))

    def fail_at(
        self,
        at: int,
        error: int,
        *,
        persistent: bool = False,
        operations: Iterable[str] | None = None,
    ) -> None:
        """Fail operation ``at`` (or the first later matching one) with ``OSError(error)``."""
        if error not in (errno.EIO, errno.ENOSPC):
            raise ValueError("only EIO and ENOSPC are simulated")
        kind: FaultKind = "eio" if error == errno.EIO else "enospc"
        self.inject(Fault(at, kind, persistent=persistent, operations=_names(operations)))

    def crash(self) -> None:
        """Lose power now: every later operation raises ``SimulatedCrash``."""
        with self._lock:
            self.crashed = True

    def _operation(self, name: str, path: str = "") -> OSError | None:
        """Count one operation and fire any fault armed for it. Caller holds the lock.

        Returns the error of a ``performed`` fault, which the caller raises after doing the
        operation (only ``fsync`` and ``fsync_dir`` can get one).
        """
        index = self.operations
        self.operations += 1
        self.counts[name] += 1
        if self.trace is not None:
            self.trace.append((index, name, path))
        if self.crashed:
            raise SimulatedCrash(f"{name} {path} after the crash")
        for fault in self._faults:
            if fault.matches(index, name, path):
                if fault.kind == "crash":
                    self.crashed = True
                    raise SimulatedCrash(f"crash at operation {index} ({name} {path})")
                if not fault.persistent:
                    self._faults.remove(fault)
                code = errno.EIO if fault.kind == "eio" else errno.ENOSPC
                error = OSError(code, os.strerror(code), path)
                if fault.performed:
                    return error
                raise error
        return None

    # -- crash images ----------------------------------------------------------------------

    def crash_image(self, mode: CrashMode, seed: int = 0) -> SimFileSystem:
        """A new file system with what survives a power loss now, by ``mode``."""
        if mode not in CRASH_MODES:
            raise ValueError(f"unknown crash mode {mode!r}")
        with self._lock:
            rng = random.Random(seed)
            image = SimFileSystem(clock=self.clock, capacity=self.capacity)
            files: dict[int, _File] = {}
            image._root = self._image_dir(self._root, mode, rng, files)
            image._used = sum(len(node.data) for node in files.values())
            return image

    def _image_dir(
        self, directory: _Dir, mode: CrashMode, rng: random.Random, files: dict[int, _File]
    ) -> _Dir:
        if mode == "lose_unsynced":
            entries = dict(directory.durable)
        elif mode == "random_subset":
            entries = dict(directory.durable)
            for name, node in directory.pending:
                if rng.random() < 0.5:
                    if node is None:
                        entries.pop(name, None)
                    else:
                        entries[name] = node
        else:
            entries = dict(directory.entries)
        result = _Dir(mtime=directory.mtime)
        for name in sorted(entries):
            node = entries[name]
            if isinstance(node, _Dir):
                copy: _File | _Dir = self._image_dir(node, mode, rng, files)
            else:
                if id(node) not in files:
                    files[id(node)] = self._image_file(node, mode, rng)
                copy = files[id(node)]
                copy.links += 1
            result.entries[name] = copy
            result.durable[name] = copy
        return result

    @staticmethod
    def _image_file(node: _File, mode: CrashMode, rng: random.Random) -> _File:
        content = bytearray(node.durable)
        changes = node.pending
        if mode == "keep_unsynced":
            for change in changes:
                _apply(content, change)
        elif mode == "random_subset":
            for change in changes:
                if rng.random() < 0.5:
                    _apply(content, change)
        elif mode == "torn_tail":
            last_write = max(
                (i for i, change in enumerate(changes) if change[0] == "write"), default=-1
            )
            for i, change in enumerate(changes):
                if i == last_write:
                    kind, position, data = change
                    keep = rng.randrange(len(data)) if len(data) > 1 else 0
                    _apply(content, (kind, position, data[:keep]))
                else:
                    _apply(content, change)
        return _File(data=content, durable=bytes(content), mtime=node.mtime)

    # -- path helpers ----------------------------------------------------------------------

    @staticmethod
    def _split(path: str) -> list[str]:
        normal = posixpath.normpath("/" + path)
        return [part for part in normal.split("/") if part]

    def _lookup(self, path: str, missing_ok: bool = False) -> _File | _Dir | None:
        node: _File | _Dir = self._root
        for part in self._split(path):
            if not isinstance(node, _Dir) or part not in node.entries:
                if missing_ok:
                    return None
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
            node = node.entries[part]
        return node

    def _parent(self, path: str) -> tuple[_Dir, str]:
        parts = self._split(path)
        if not parts:
            raise PermissionError(errno.EPERM, "the root has no parent", path)
        parent = self._lookup("/".join(parts[:-1]))
        if not isinstance(parent, _Dir):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return parent, parts[-1]

    def _file(self, path: str) -> _File:
        node = self._lookup(path)
        if isinstance(node, _Dir):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        assert node is not None
        return node

    def _dir(self, path: str) -> _Dir:
        node = self._lookup(path)
        if not isinstance(node, _Dir):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return node

    def _link(self, parent: _Dir, name: str, node: _File | _Dir | None) -> None:
        old = parent.entries.get(name)
        if isinstance(old, _File) and old is not node:
            old.links -= 1
            if old.links == 0:
                self._used -= len(old.data)
        if node is None:
            parent.entries.pop(name, None)
        else:
            parent.entries[name] = node
            if isinstance(node, _File) and old is not node:
                node.links += 1
        parent.pending.append((name, node))
        parent.mtime = self.clock()

    # -- data changes ----------------------------------------------------------------------

    def _change(self, node: _File, change: tuple[str, int, bytes], path: str) -> None:
        kind, position, data = change
        size = len(node.data)
        growth = (position if kind == "truncate" else max(size, position + len(data))) - size
        if node.links > 0 and growth > 0 and self._used + growth > self.capacity:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        _apply(node.data, change)
        node.pending.append(change)
        node.mtime = self.clock()
        if node.links > 0:
            self._used += growth

    def _write_at(self, node: _File, position: int, data: bytes, path: str) -> None:
        self._change(node, ("write", position, bytes(data)), path)

    def _fsync(self, node: _File, path: str) -> None:
        try:
            late = self._operation("fsync", path)
        except OSError:
            node.pending.clear()  # Linux marks the pages clean although they never arrived
            raise
        if node.pending:
            # Apply the changes rather than copy the cache: writes dropped by a failed fsync
            # stay in the cache but never become durable.
            content = bytearray(node.durable)
            for change in node.pending:
                _apply(content, change)
            node.durable = bytes(content)
            node.pending.clear()
        if late is not None:
            raise late

    # -- FileSystem ------------------------------------------------------------------------

    def create(self, path: str, mode: int = 0o644) -> WritableFile:
        """Create a file; ``mode`` is accepted and ignored (simulated files have no owner)."""
        with self._lock:
            self._operation("create", path)
            parent, name = self._parent(path)
            if name in parent.entries:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
            node = _File(mtime=self.clock())
            self._link(parent, name, node)
            return _SimWritableFile(self, node, path, 0)

    def open_append(self, path: str) -> WritableFile:
        with self._lock:
            self._operation("open_append", path)
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if isinstance(node, _Dir):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            if node is None:
                node = _File(mtime=self.clock())
                self._link(parent, name, node)
            return _SimWritableFile(self, node, path, len(node.data))

    def open_read(self, path: str) -> ReadableFile:
        with self._lock:
            self._operation("open_read", path)
            return _SimReadableFile(self, self._file(path), path)

    def rename(self, source: str, target: str) -> None:
        with self._lock:
            self._operation("rename", source)
            source_parent, source_name = self._parent(source)
            node = source_parent.entries.get(source_name)
            if node is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), source)
            target_parent, target_name = self._parent(target)
            existing = target_parent.entries.get(target_name)
            if isinstance(existing, _Dir):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
            if existing is node:
                return
            self._link(target_parent, target_name, node)
            self._link(source_parent, source_name, None)

    def unlink(self, path: str) -> None:
        with self._lock:
            self._operation("unlink", path)
            self._file(path)
            parent, name = self._parent(path)
            self._link(parent, name, None)

    def link(self, source: str, target: str) -> None:
        with self._lock:
            self._operation("link", target)
            node = self._file(source)
            parent, name = self._parent(target)
            if name in parent.entries:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
            self._link(parent, name, node)

    def mkdir(self, path: str) -> None:
        with self._lock:
            self._operation("mkdir", path)
            node: _File | _Dir = self._root
            for part in self._split(path):
                if not isinstance(node, _Dir):
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
                child = node.entries.get(part)
                if child is None:
                    child = _Dir(mtime=self.clock())
                    self._link(node, part, child)
                node = child
            if not isinstance(node, _Dir):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)

    def rmdir(self, path: str) -> None:
        with self._lock:
            self._operation("rmdir", path)
            if self._dir(path).entries:
                raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), path)
            parent, name = self._parent(path)
            self._link(parent, name, None)

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            self._operation("listdir", path)
            return sorted(self._dir(path).entries)

    def stat(self, path: str) -> FileStat:
        with self._lock:
            self._operation("stat", path)
            node = self._lookup(path)
            if isinstance(node, _Dir):
                return FileStat(size=0, mtime=node.mtime, is_dir=True)
            assert node is not None
            return FileStat(size=len(node.data), mtime=node.mtime, is_dir=False)

    def exists(self, path: str) -> bool:
        with self._lock:
            self._operation("exists", path)
            return self._lookup(path, missing_ok=True) is not None

    def truncate(self, path: str, size: int) -> None:
        with self._lock:
            self._operation("truncate", path)
            self._change(self._file(path), ("truncate", size, b""), path)

    def fsync_dir(self, path: str) -> None:
        with self._lock:
            late = self._operation("fsync_dir", path)
            directory = self._dir(path)
            directory.durable = dict(directory.entries)
            directory.pending.clear()
            if late is not None:
                raise late

    def fsync_file(self, path: str) -> None:
        with self._lock:
            node = self._lookup(path, missing_ok=True)
            if not isinstance(node, _File):
                self._operation("fsync", path)
                self._file(path)  # raises the error a missing path or a directory gets
            assert isinstance(node, _File)
            self._fsync(node, path)

    def copy_range(self, source: ReadableFile, target: WritableFile, count: int) -> int:
        if not isinstance(source, _SimReadableFile) or not isinstance(target, _SimWritableFile):
            raise TypeError("SimFileSystem.copy_range needs its own files")
        with self._lock:
            self._operation("copy_range", target.path)
            data = source.take(count)
            target.put(data)
            return len(data)

    def disk_usage(self, path: str) -> tuple[int, int]:
        with self._lock:
            self._operation("disk_usage", path)
            self._lookup(path)
            return self.capacity, max(0, self.capacity - self._used)

    def try_lock(self, path: str) -> _SimLock | None:
        with self._lock:
            self._operation("try_lock", path)
            if path in self._locks:
                return None
            self._locks.add(path)
            return _SimLock(self._locks, path)

    def lock_holder(self, path: str) -> str:
        return ""

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
                if not isinstance(child, _Dir):
                    child = _Dir(mtime=self.clock())
                    self._link(directory, part, child)
                    directory.durable = dict(directory.entries)
                    directory.pending.clear()
                directory = child
            parent, name = directory, parts[-1]
            node = parent.entries.get(name)
            if not isinstance(node, _File):
                node = _File()
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
            stack: list[_Dir] = [self._root]
            while stack:
                directory = stack.pop()
                total += len(directory.pending)
                for node in directory.entries.values():
                    if isinstance(node, _Dir):
                        stack.append(node)
                    else:
                        total += len(node.pending)
            return total


def _names(operations: Iterable[str] | None) -> frozenset[str] | None:
    if operations is None:
        return None
    names = frozenset(operations)
    unknown = names - OPERATIONS
    if unknown:
        raise ValueError(f"unknown operations {sorted(unknown)}")
    return names


class _SimWritableFile:
    def __init__(self, fs: SimFileSystem, node: _File, path: str, position: int) -> None:
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

    def write(self, data: bytes | bytearray | memoryview) -> int:
        with self._fs._lock:
            self._check()
            self._fs._operation("write", self._path)
            return self.put(bytes(data))

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        with self._fs._lock:
            self._check()
            self._fs._operation("write", self._path)
            self._fs._write_at(self._node, offset, bytes(data), self._path)

    def put(self, data: bytes) -> int:
        """Write at the position without counting (``copy_range`` counted already)."""
        self._fs._write_at(self._node, self._position, data, self._path)
        self._position += len(data)
        return len(data)

    def fsync(self) -> None:
        with self._fs._lock:
            self._check()
            self._fs._fsync(self._node, self._path)

    def start_writeback(self) -> None:
        """A hint without a promise: the simulated disk keeps the bytes volatile until an
        fsync, as a real one may, so this changes nothing."""
        with self._fs._lock:
            self._check()

    def truncate(self, size: int) -> None:
        with self._fs._lock:
            self._check()
            self._fs._operation("truncate", self._path)
            self._fs._change(self._node, ("truncate", size, b""), self._path)
            self._position = size

    def tell(self) -> int:
        return self._position

    def fileno(self) -> None:
        return None

    def close(self) -> None:
        self._closed = True


class _SimReadableFile:
    def __init__(self, fs: SimFileSystem, node: _File, path: str) -> None:
        self._fs = fs
        self._node = node
        self._path = path
        self._position = 0
        self._closed = False

    @property
    def path(self) -> str:
        return self._path

    def _check(self) -> None:
        if self._closed:
            raise ValueError(f"{self._path} is closed")

    def read(self, size: int = -1) -> bytes:
        with self._fs._lock:
            self._check()
            self._fs._operation("read", self._path)
            return self.take(size)

    def take(self, size: int) -> bytes:
        """Read from the position without counting (``copy_range`` counted already)."""
        end = len(self._node.data) if size < 0 else self._position + size
        data = bytes(self._node.data[self._position : end])
        self._position += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:
        with self._fs._lock:
            self._check()
            self._fs._operation("read", self._path)
            data = self.take(len(buffer))
            buffer[: len(data)] = data
            return len(data)

    def seek(self, offset: int) -> None:
        self._position = offset

    def size(self) -> int:
        return len(self._node.data)

    def fileno(self) -> int | None:
        return None

    def close(self) -> None:
        self._closed = True
