"""Multipart parts written once, straight into their upload's file at their final offset.

Why: a part staged in its own file and copied into the object later crosses the disk twice;
for a 512 MiB upload that made multipart half as fast as one PUT. Parts of an upload are
uniform in practice (every client sends parts of one size but a shorter last one), so the
offset of part ``n`` is knowable when it arrives: ``(n - 1) * S``, with the stride ``S``
the session's ``recommended_part_size`` (journaled when the upload started, so every
process and every restart agrees on it). A part of at most ``S`` bytes is written there
(``RegionWriter``), in the upload's one file ``<root>/assembly/<upload>.direct``; anything
else takes the old path (its own payload file), and ``seal`` copies such parts into place.

A part written so is named by a *direct part id*, ``<upload>.<offset>.<size>.<nonce>`` (hex
fields): the record of the part says where its bytes are, so the file is found again after
a restart, ``PayloadStore.verify`` checks the region, and releasing the id removes nothing
(the region belongs to the upload's file, which goes with the upload). The nonce keeps a
re-sent part's id apart from the one it replaces.

``seal`` turns the file into the object: copies the parts that live elsewhere into their
regions, finishes the whole-object SHA-256 from the last part boundary hashed so far (the
caller keeps those, reading the file back as parts arrive), cuts the file to its exact
length, fsyncs it (strict) and gives it a second name in the staging area (a hard link),
which the usual promote renames into place. The upload's file keeps every stored part
readable until the completion is committed: a crash before it leaves a completable upload.

Crash points: ``multipart.direct_written`` (a part's bytes written, and synced in strict,
before its record), ``multipart.direct_copied`` (a part copied in by ``seal``),
``multipart.direct_sealed`` (the object linked into staging, before the promote).

Thread-safety: blocking functions; one ``RegionWriter`` per thread at a time. Writers of
different parts of one file run concurrently (``pwrite`` to disjoint regions).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from fsseam import crashpoints
from fsseam.fs import FileSystem, WritableFile
from service.storage.staging import (
    OVERLAP_MIN_BYTES,
    WRITEBACK_BYTES,
    BatchHasher,
    StagedPayload,
)

DIRECT_SUFFIX = ".direct"
READ_WINDOW_BYTES = 1024 * 1024
"""Window for reading a region back (to hash or copy it): page-cache reads, syscalls noise."""


@dataclass(frozen=True, slots=True)
class DirectRef:
    """Where a direct part's bytes are: ``size`` bytes at ``offset`` of ``upload_id``'s file."""

    upload_id: str
    offset: int
    size: int


def direct_part_id(upload_id: str, offset: int, size: int) -> str:
    """A new id for a part written at ``offset`` of the upload's file.

    >>> parse_direct_id(direct_part_id("ab12", 16, 5))[:3]
    ('ab12', 16, 5)
    """
    return f"{upload_id}.{offset:x}.{size:x}.{secrets.token_hex(4)}"


def parse_direct_id(value: str) -> tuple[str, int, int] | None:
    """(upload id, offset, size) of a direct part id; None for anything else (a payload id).

    >>> parse_direct_id("0123456789abcdef0123456789abcdef") is None
    True
    >>> parse_direct_id("u1.10.5.abcd")
    ('u1', 16, 5)
    >>> parse_direct_id("u1.zz.5.abcd") is None
    True
    """
    fields = value.split(".")
    if len(fields) != 4 or not all(f.isalnum() and f.isascii() for f in fields):
        return None
    try:
        offset, size = int(fields[1], 16), int(fields[2], 16)
    except ValueError:
        return None
    if offset < 0 or size < 0:
        return None
    return fields[0], offset, size


def is_direct_id(value: str) -> bool:
    return parse_direct_id(value) is not None


def direct_path(assembly_dir: str, upload_id: str) -> str:
    """The file holding ``upload_id``'s direct parts; the upload id is server-made hex."""
    if not upload_id.isalnum() or not upload_id.isascii():
        raise ValueError(f"not an upload id: {upload_id!r}")
    return os.path.join(assembly_dir, upload_id + DIRECT_SUFFIX)


def upload_of_direct_file(name: str) -> str | None:
    """The upload id a file name in the assembly directory belongs to, if it is a direct file."""
    if not name.endswith(DIRECT_SUFFIX):
        return None
    upload_id = name[: -len(DIRECT_SUFFIX)]
    return upload_id if upload_id.isalnum() and upload_id.isascii() else None


@dataclass(frozen=True, slots=True)
class DirectStaged(StagedPayload):
    """A part written in place: no promote, ``payload_id`` names it already."""

    payload_id: str


class RegionWriter:
    """One part's body written at its offset in the upload's file, hashed as it arrives.

    Fed like a ``StagingFile`` (``write``, ``write_batch``, ``finish``, ``discard``) by one
    thread at a time. ``sync(path)`` makes the file durable (strict; shared between parts
    written together, ``service.storage.dirsync``); ``None`` in balanced mode. In strict mode
    writeback starts every ``WRITEBACK_BYTES`` written, as for a staging file: the disk works
    while the part arrives, the shared fsync finds little left, and the page cache does not
    fill with dirty pages that throttle every writer at once (measured with four 32 MiB parts
    in flight: without it they were received in lockstep, each fsync flushing all four).
    """

    def __init__(
        self,
        file: WritableFile,
        upload_id: str,
        offset: int,
        limit: int,
        sync: Callable[[str], None] | None,
    ) -> None:
        self._file: WritableFile | None = file
        self._path = file.path
        self._upload_id = upload_id
        self._offset = offset
        self._limit = limit
        self._sync = sync
        self._hash = hashlib.sha256()
        self._hasher: BatchHasher | None = None
        self._size = 0
        self._unflushed = 0

    @property
    def path(self) -> str:
        return self._path

    @property
    def size(self) -> int:
        return self._size

    def write(self, chunk: bytes | bytearray | memoryview) -> None:
        self.write_batch([chunk])

    def write_batch(self, units: Sequence[bytes | bytearray | memoryview]) -> None:
        """Write ``units`` in order at the next offsets, hashing them (on a helper thread
        while they are written, for a large batch)."""
        total = sum(len(unit) for unit in units)
        if self._size + total > self._limit:
            self.discard()
            raise OSError(errno.EFBIG, "a part grew past its region", self._path)
        file = self._open_file()
        hasher: BatchHasher | None = None
        if total >= OVERLAP_MIN_BYTES:
            if self._hasher is None:
                self._hasher = BatchHasher(self._hash)
            hasher = self._hasher
            hasher.start(units)
        try:
            for unit in units:
                file.write_at(self._offset + self._size, unit)
                if hasher is None:
                    self._hash.update(unit)
                self._size += len(unit)
                self._unflushed += len(unit)
                if self._sync is not None and self._unflushed >= WRITEBACK_BYTES:
                    # This part's pages only: the others' writers start their own.
                    end = self._offset + self._size
                    file.start_writeback(end - self._unflushed, self._unflushed)
                    self._unflushed = 0
        except OSError:
            if hasher is not None:
                hasher.wait()
            self.discard()
            raise
        if hasher is not None:
            hasher.wait()

    def finish(self) -> DirectStaged:
        """Make the bytes durable (strict) and name the part; no more writes after this."""
        file = self._open_file()
        self._stop_hasher()
        try:
            if self._sync is not None:
                self._sync(self._path)
            self._file = None
            file.close()
        except OSError:
            self.discard()
            raise
        crashpoints.hit("multipart.direct_written")
        return DirectStaged(
            path=self._path,
            size=self._size,
            sha256=self._hash.hexdigest(),
            payload_id=direct_part_id(self._upload_id, self._offset, self._size),
        )

    def discard(self) -> None:
        """Stop writing; idempotent. The region's bytes stay (no stored part names them)."""
        self._stop_hasher()
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def _stop_hasher(self) -> None:
        hasher, self._hasher = self._hasher, None
        if hasher is not None:
            hasher.close()

    def _open_file(self) -> WritableFile:
        if self._file is None:
            raise ValueError("the part is already finished or discarded")
        return self._file


def hash_region(fs: FileSystem, path: str, digest: hashlib._Hash, offset: int, size: int) -> None:
    """Fold ``size`` bytes of ``path`` from ``offset`` into ``digest`` (read back, page cache).

    Raises OSError (EIO) when the file ends early."""
    for window in read_region(fs, path, offset, size):
        digest.update(window)


def read_region(fs: FileSystem, path: str, offset: int, size: int) -> Iterator[memoryview]:
    """The bytes of a region, one window at a time (each valid until the next is read): memory
    stays at one window whatever the region's size."""
    source = fs.open_read(path)
    try:
        source.seek(offset)
        buffer = memoryview(bytearray(min(size, READ_WINDOW_BYTES)))
        left = size
        while left > 0:
            count = source.readinto(buffer[: min(left, len(buffer))])
            if count == 0:
                raise OSError(errno.EIO, f"{path} ends {left} bytes early", path)
            yield buffer[:count]
            left -= count
    finally:
        source.close()


def region_matches(fs: FileSystem, ref: DirectRef, path: str, sha256: str) -> bool:
    """Whether the region holds bytes of exactly this SHA-256 (the file may be gone)."""
    digest = hashlib.sha256()
    try:
        hash_region(fs, path, digest, ref.offset, ref.size)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.EIO:
            return False
        raise
    return digest.hexdigest() == sha256.lower()


def copy_into(fs: FileSystem, target: WritableFile, source_path: str, offset: int) -> int:
    """Write the whole file ``source_path`` into ``target`` at ``offset``; return its size."""
    source = fs.open_read(source_path)
    written = 0
    try:
        buffer = memoryview(bytearray(READ_WINDOW_BYTES))
        while count := source.readinto(buffer):
            target.write_at(offset + written, buffer[:count])
            written += count
    finally:
        source.close()
    return written


@dataclass(frozen=True, slots=True)
class SealPlan:
    """What ``seal`` does to turn an upload's file into its object."""

    copies: Sequence[tuple[str, int]]
    """(path of a part stored in its own file, offset of its region), in order."""
    hashed_end: int
    """Bytes at the start of the file already folded into ``digest``."""
    digest: hashlib._Hash
    """SHA-256 state after ``hashed_end`` bytes (a copy; ``seal`` updates it)."""
    end: int
    """The object's length."""


def seal(
    fs: FileSystem, path: str, staging_path: str, plan: SealPlan, *, strict: bool
) -> StagedPayload:
    """The object of an upload's file, linked at ``staging_path`` for the usual promote.

    The upload's file keeps its name: it still holds the stored parts until the completion
    is committed. Raises OSError (then ``staging_path`` may exist; the staging sweep takes it).
    """
    file = fs.open_append(path)
    try:
        for source_path, offset in plan.copies:
            copy_into(fs, file, source_path, offset)
            crashpoints.hit("multipart.direct_copied")
        file.truncate(plan.end)
        hash_region(fs, path, plan.digest, plan.hashed_end, plan.end - plan.hashed_end)
        if strict:
            # The object's bytes must be on disk before a rename makes them a payload.
            file.fsync()
    finally:
        file.close()
    fs.link(path, staging_path)
    crashpoints.hit("multipart.direct_sealed")
    return StagedPayload(path=staging_path, size=plan.end, sha256=plan.digest.hexdigest())


def sweep_closed(
    fs: FileSystem, assembly_dir: str, open_uploads: set[str], now: float, grace: float
) -> int:
    """Remove the files of uploads not in ``open_uploads`` last written ``grace`` seconds
    ago or more (a younger one may belong to an upload opened after the set was taken);
    return how many. A file of a closed upload is left by a crash between the record that
    closed it and the removal."""
    removed = 0
    for name in fs.listdir(assembly_dir):
        upload_id = upload_of_direct_file(name)
        if upload_id is None or upload_id in open_uploads:
            continue
        path = os.path.join(assembly_dir, name)
        try:
            if grace > 0 and now - fs.stat(path).mtime < grace:
                continue
            fs.unlink(path)
        except FileNotFoundError:
            continue
        removed += 1
    return removed
