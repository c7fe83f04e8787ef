"""The file-system seam: every file operation of the journal and of the payload store.

Why a seam: durability bugs live in the gap between what a program wrote and what a disk
keeps after a power loss. Routing every ``open``/``write``/``fsync``/``rename``/``unlink``
through one small interface lets tests substitute a simulated file system that remembers
what is only cached and what is durable, crashes at operation *k*, or fails with EIO or
ENOSPC (see ``fsseam.simfs``). A test walks the source tree and fails on any direct
``os``/``open``/``shutil`` file call outside this module.

Thread-safety: ``RealFileSystem`` holds no state; each file object is used by one thread
at a time (the caller's executor job).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import stat as stat_module
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

from fsseam.flocks import RealFileLock, RealSharedLock


@dataclass(frozen=True, slots=True)
class FileStat:
    """The few attributes of a file the callers need."""

    size: int
    mtime: float
    is_dir: bool


class FsSync(Protocol):
    """A held handle on one file system (``FileSystem.open_syncfs``)."""

    def sync(self) -> None:
        """Make everything written to the file system so far durable (file data, inodes,
        directory entries); raise ``OSError`` if any writeback since the handle was opened
        (or since its last sync) failed. Errors are reported per handle (Linux ``errseq``),
        so a handle opened before the writes it covers sees every error among them."""
        ...

    def close(self) -> None:
        """Release the handle; idempotent."""
        ...


class WritableFile(Protocol):
    """A file opened for writing at its end."""

    @property
    def path(self) -> str: ...

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Write all of ``data`` (looping over short writes); return its length."""
        ...

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite bytes at ``offset`` (within what was written) without moving the write
        position: a header whose fields are known only once the body is written."""
        ...

    def fsync(self) -> None:
        """Make everything written so far durable."""
        ...

    def start_writeback(self, offset: int = 0, count: int = 0) -> None:
        """Start writing what was written so far to the disk, without waiting for it: the
        whole file, or ``count`` bytes from ``offset`` when ``count`` is given.

        A hint with no durability promise (only ``fsync`` makes one): a large file whose
        pages go to the disk while more is written leaves its final ``fsync`` little to do.
        """
        ...

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes and continue writing there."""
        ...

    def tell(self) -> int: ...

    def close(self) -> None: ...


class ReadableFile(Protocol):
    """A file opened for reading, with random access."""

    @property
    def path(self) -> str: ...

    def read(self, size: int = -1) -> bytes:
        """Read up to ``size`` bytes from the current offset (all when negative)."""
        ...

    def readinto(self, buffer: bytearray | memoryview) -> int: ...

    def seek(self, offset: int) -> None: ...

    def size(self) -> int: ...

    def fileno(self) -> int | None:
        """The OS descriptor for zero-copy paths (``os.sendfile``), or None if simulated."""
        ...

    def close(self) -> None: ...


class FileSystem(Protocol):
    """Every file-system operation the journal and the payload store perform."""

    timestamp_slack: float
    """How far behind the clock a file's ``stat`` mtime may be when it is written (seconds):
    a kernel stamps files from its coarse clock, up to one tick behind ``time.time()``, so a
    file written just after an instant may carry an mtime just before it."""

    def create(self, path: str, mode: int = 0o644) -> WritableFile:
        """Create a new, empty file; fails with FileExistsError if it exists.

        ``mode`` (less the umask) applies from the first instant, so a secret file is never
        readable by others, not even while it is still empty.
        """
        ...

    def open_append(self, path: str) -> WritableFile:
        """Open an existing file (or create it) for writing at its end."""
        ...

    def open_read(self, path: str) -> ReadableFile: ...

    def rename(self, source: str, target: str) -> None:
        """Atomically replace ``target`` by ``source`` (same file system)."""
        ...

    def unlink(self, path: str) -> None: ...

    def link(self, source: str, target: str) -> None:
        """Give the file ``source`` a second name ``target`` (a hard link; the target must
        not exist): one file under two names until one is unlinked."""
        ...

    def mkdir(self, path: str) -> None:
        """Create a directory and missing parents; no error if it exists."""
        ...

    def rmdir(self, path: str) -> None:
        """Remove an empty directory."""
        ...

    def listdir(self, path: str) -> list[str]: ...

    def stat(self, path: str) -> FileStat: ...

    def exists(self, path: str) -> bool: ...

    def truncate(self, path: str, size: int) -> None: ...

    def fsync_dir(self, path: str) -> None:
        """Make the directory's entries (creations, renames, unlinks) durable."""
        ...

    def fsync_file(self, path: str) -> None:
        """Make the data of the existing file ``path`` durable (no handle needed).

        For files written earlier without an fsync (balanced durability) that must be
        durable now; FileNotFoundError if the file is gone.
        """
        ...

    def open_syncfs(self, path: str) -> FsSync | None:
        """A handle that syncs the whole file system holding ``path`` (``syncfs(2)``), or
        None where the OS cannot report writeback errors through it (not Linux >= 5.8)."""
        ...

    def copy_range(self, source: ReadableFile, target: WritableFile, count: int) -> int:
        """Copy ``count`` bytes from ``source``'s offset to ``target``'s end; return copied."""
        ...

    def disk_usage(self, path: str) -> tuple[int, int]:
        """(total_bytes, free_bytes) of the file system holding ``path``."""
        ...

    def try_lock(self, path: str) -> FileLock | None:
        """Take an exclusive lock on ``path`` (created if missing) for as long as the
        returned handle stays open (or the process lives); None if another process holds
        it. Writes the caller's pid into the file, for the message of whoever is refused."""
        ...

    def lock_holder(self, path: str) -> str:
        """The pid written into a lock file by its holder ('' if unknown)."""
        ...

    def open_lock(self, path: str) -> SharedLock:
        """A lock on ``path`` (created if missing) that processes take in turn, each
        blocking until it is free; a process's hold ends with it (a SIGKILL cannot wedge it)."""
        ...


class FileLock(Protocol):
    """A held lock (``FileSystem.try_lock``); ``release`` ends it."""

    def release(self) -> None: ...


class SharedLock(Protocol):
    """A lock taken and released many times (``FileSystem.open_lock``); one holder at a
    time across processes and across the handles of one process."""

    def acquire(self) -> None:
        """Wait until this handle holds the lock. Blocking."""
        ...

    def try_acquire(self) -> bool:
        """Take the lock if no other handle holds it; whether this handle holds it now."""
        ...

    def release(self) -> None: ...

    def close(self) -> None:
        """Release (if held) and forget the handle."""
        ...


def pread(file: ReadableFile, offset: int, length: int) -> bytes:
    """``length`` bytes of ``file`` at ``offset`` (fewer at its end), leaving its position
    alone: several threads may read one descriptor at once. Blocking. Needs a descriptor
    (``fileno``); a file without one is read with ``seek`` and ``read`` by its one user."""
    fd = file.fileno()
    if fd is None:
        raise ValueError("pread needs a file with a descriptor")
    chunks: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
_nowait_reads = _RWF_NOWAIT is not None and hasattr(os, "preadv")


def pread_cached(file: ReadableFile, offset: int, length: int) -> bytes | None:
    """``length`` bytes at ``offset`` if the page cache holds them all, read without waiting
    for the disk (``preadv`` with ``RWF_NOWAIT``); None when the kernel would have to wait
    (EAGAIN), cannot say (then it is never asked again), or the file has no descriptor.
    Never blocks on the disk, so it may run on an event loop."""
    global _nowait_reads
    fd = file.fileno()
    if not _nowait_reads or _RWF_NOWAIT is None or fd is None or length <= 0:
        return None
    buffer = bytearray(length)
    try:
        count = os.preadv(fd, [buffer], offset, _RWF_NOWAIT)
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            _nowait_reads = False
            return None
        raise
    return bytes(buffer) if count == length else None


def link_count(file: ReadableFile) -> int:
    """How many names the open file still has: 0 once it was removed everywhere (its blocks
    are then held only by open descriptors). 1 for a file without a descriptor (simulated).
    One ``fstat``, which never waits for the disk."""
    fd = file.fileno()
    if fd is None:
        return 1
    try:
        return os.fstat(fd).st_nlink
    except OSError:
        return 0


_SYNC_FILE_RANGE_WRITE = 2


def _load_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux ``sync_file_range(2)`` from the C library (Python's ``os`` lacks it), or None."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int], int], function)


_sync_file_range = _load_sync_file_range()


def _load_syncfs() -> Callable[[int], None] | None:
    """``syncfs(2)`` as a call that raises ``OSError``, or None where it cannot be trusted.

    Python's ``os`` has it on some builds; else the C library's. Before Linux 5.8 syncfs
    returned 0 even when writeback failed, so an older kernel gets None (and the callers
    fsync each file instead)."""
    system = os.uname()
    version = re.match(r"(\d+)\.(\d+)", system.release)
    if system.sysname != "Linux" or version is None:
        return None
    if (int(version[1]), int(version[2])) < (5, 8):
        return None
    native = getattr(os, "syncfs", None)
    if native is not None:
        return cast(Callable[[int], None], native)
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int

    def syncfs(fd: int) -> None:
        if function(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return syncfs


_syncfs = _load_syncfs()


class _RealWritableFile:
    __slots__ = ("_fd", "_path")

    def __init__(self, path: str, fd: int) -> None:
        self._path = path
        self._fd = fd

    @property
    def path(self) -> str:
        return self._path

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        total = len(view)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        return total

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written

    def fsync(self) -> None:
        os.fsync(self._fd)

    def start_writeback(self, offset: int = 0, count: int = 0) -> None:
        # SYNC_FILE_RANGE_WRITE (count 0: to the end): queue the dirty pages for writing and
        # return. A failure here is only a lost hint; the fsync that follows reports errors.
        if _sync_file_range is not None:
            _sync_file_range(self._fd, offset, count, _SYNC_FILE_RANGE_WRITE)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        os.lseek(self._fd, size, os.SEEK_SET)

    def tell(self) -> int:
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class _RealReadableFile:
    __slots__ = ("_fd", "_path")

    def __init__(self, path: str, fd: int) -> None:
        self._path = path
        self._fd = fd

    @property
    def path(self) -> str:
        return self._path

    def read(self, size: int = -1) -> bytes:
        if size >= 0:
            return os.read(self._fd, size)
        chunks = []
        while chunk := os.read(self._fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)

    def readinto(self, buffer: bytearray | memoryview) -> int:
        return os.readv(self._fd, [buffer])

    def seek(self, offset: int) -> None:
        os.lseek(self._fd, offset, os.SEEK_SET)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class _RealFsSync:
    """A descriptor on a directory of the file system; closed by ``close`` or, at the
    latest, when the handle is garbage (a store a test dropped without stopping)."""

    __slots__ = ("__weakref__", "_close", "_fd", "_syncfs")

    def __init__(self, fd: int, syncfs: Callable[[int], None]) -> None:
        self._fd = fd
        self._syncfs = syncfs
        self._close = weakref.finalize(self, os.close, fd)

    def sync(self) -> None:
        if not self._close.alive:
            raise ValueError("the file-system handle is closed")
        self._syncfs(self._fd)

    def close(self) -> None:
        self._close()


# copy_file_range is refused across file systems and by some (overlayfs, old kernels).
_NO_COPY_FILE_RANGE = frozenset(
    {errno.EXDEV, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.ETXTBSY}
)


def _copy_by_reading(source_fd: int, target_fd: int, count: int) -> int:
    copied = 0
    while copied < count:
        chunk = os.read(source_fd, min(count - copied, 1 << 20))
        if not chunk:
            break
        view = memoryview(chunk)
        while view:
            view = view[os.write(target_fd, view) :]
        copied += len(chunk)
    return copied


class RealFileSystem:
    """The operating system's file system."""

    timestamp_slack = 0.05
    """Ten ticks of a 200 Hz kernel's coarse clock (``FileSystem.timestamp_slack``)."""

    _CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    _APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    _READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)

    def create(self, path: str, mode: int = 0o644) -> WritableFile:
        return _RealWritableFile(path, os.open(path, self._CREATE_FLAGS, mode))

    def open_append(self, path: str) -> WritableFile:
        fd = os.open(path, self._APPEND_FLAGS, 0o644)
        os.lseek(fd, 0, os.SEEK_END)
        return _RealWritableFile(path, fd)

    def open_read(self, path: str) -> ReadableFile:
        return _RealReadableFile(path, os.open(path, self._READ_FLAGS))

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def link(self, source: str, target: str) -> None:
        os.link(source, target)

    def mkdir(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def stat(self, path: str) -> FileStat:
        result = os.stat(path)
        return FileStat(
            size=result.st_size,
            mtime=result.st_mtime,
            is_dir=stat_module.S_ISDIR(result.st_mode),
        )

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_file(self, path: str) -> None:
        fd = os.open(path, self._READ_FLAGS)
        try:
            os.fsync(fd)  # Linux flushes a file's dirty pages through any descriptor
        finally:
            os.close(fd)

    def open_syncfs(self, path: str) -> FsSync | None:
        syncfs = _syncfs
        if syncfs is None:
            return None
        return _RealFsSync(os.open(path, self._READ_FLAGS | getattr(os, "O_DIRECTORY", 0)), syncfs)

    def copy_range(self, source: ReadableFile, target: WritableFile, count: int) -> int:
        source_fd = source.fileno()
        target_fd = getattr(target, "fileno", lambda: None)()
        if source_fd is None or target_fd is None:
            raise TypeError("RealFileSystem.copy_range needs real files")
        copied = 0
        while copied < count:
            want = min(count - copied, 1 << 30)
            try:
                step = os.copy_file_range(source_fd, target_fd, want)
            except OSError as exc:
                if exc.errno not in _NO_COPY_FILE_RANGE:
                    raise
                return copied + _copy_by_reading(source_fd, target_fd, count - copied)
            if step == 0:
                break
            copied += step
        return copied

    def disk_usage(self, path: str) -> tuple[int, int]:
        result = os.statvfs(path)
        return result.f_blocks * result.f_frsize, result.f_bavail * result.f_frsize

    def try_lock(self, path: str) -> FileLock | None:
        # O_CLOEXEC: a flock belongs to the open file, so a child that inherited it would
        # keep the data dir locked after the server died.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        # The pid is a hint for humans, never read for correctness: no fsync.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return RealFileLock(fd)

    def open_lock(self, path: str) -> SharedLock:
        # O_CLOEXEC: a child that inherited the descriptor would share the lock's holds.
        return RealSharedLock(
            os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        )

    def lock_holder(self, path: str) -> str:
        try:
            with open(path, "rb") as file:
                text = file.read(32).decode("ascii", "replace").strip()
        except OSError:
            return ""
        return text if text.isdigit() else ""
