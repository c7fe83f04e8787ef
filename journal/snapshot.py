"""Snapshot files: the caller's serialised state at a sequence, written atomically.

A snapshot file ``snapshot-<sequence, 20 digits>.snap`` holds::

    magic       4 bytes   c1 4a 53 4e ("\\xc1JSN")
    crc         u32 LE    crc32c of every byte after this field
    sequence    u64 LE    the last sequence applied to the state (equals the file name's)
    created_at  f64 LE    unix seconds
    length      u64 LE    length of data
    data        length bytes, opaque to the journal

It is written as ``<name>.tmp`` (the data streamed, the header last, over a placeholder),
fsynced, renamed into place and the directory fsynced
(etcd's ``cut()`` pattern), so a crash leaves either the old set of snapshots or the new
one, never a half-written file under a final name. The crc catches later damage (bit rot, a
bad sector); opening then falls back to the previous snapshot, which is why the journal
keeps two. The data is never held in memory by the journal: opening checks it in chunks (or
only the header, ``verify_snapshot=False``) and ``Snapshot.data`` reads it when asked, or
``SnapshotReader`` streams it to a decoder that reads it as it goes (a rebuild of the
index at 10 M objects), checking the crc once the last byte has been read.

Thread-safety: functions only; the journal runs writers one at a time in its executor.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import crc32c

from fsseam import crashpoints
from fsseam.fs import FileSystem, ReadableFile
from journal.errors import SnapshotDamagedError

SNAPSHOT_PREFIX = "snapshot-"
SNAPSHOT_SUFFIX = ".snap"
TEMP_SUFFIX = ".tmp"
MAGIC = b"\xc1JSN"
_HEADER = struct.Struct("<4sIQdQ")
_COVERED = struct.Struct("<QdQ")
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEADER.size
_DIGITS = 20
_CASTAGNOLI = 0x82F63B78
"""crc32c's polynomial, bit-reflected."""
READ_CHUNK = 1024 * 1024


def snapshot_name(sequence: int) -> str:
    """File name of the snapshot at ``sequence``.

    >>> snapshot_name(12)
    'snapshot-00000000000000000012.snap'
    """
    return f"{SNAPSHOT_PREFIX}{sequence:0{_DIGITS}d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> int | None:
    """The sequence in a snapshot file name, or None for any other file."""
    if not (name.startswith(SNAPSHOT_PREFIX) and name.endswith(SNAPSHOT_SUFFIX)):
        return None
    digits = name[len(SNAPSHOT_PREFIX) : -len(SNAPSHOT_SUFFIX)]
    if len(digits) != _DIGITS or not digits.isdigit():
        return None
    return int(digits)


def list_snapshots(fs: FileSystem, directory: str) -> list[tuple[int, str]]:
    """(sequence, path) of every snapshot file in ``directory``, newest first."""
    found = []
    for name in fs.listdir(directory):
        sequence = parse_snapshot_name(name)
        if sequence is not None:
            found.append((sequence, os.path.join(directory, name)))
    found.sort(reverse=True)
    return found


def load_snapshot(fs: FileSystem, path: str, sequence: int, verify: bool = True) -> Snapshot | None:
    """Check one snapshot file; None if it is damaged in any way (``verify``: its data is
    read, in chunks, and checked against the crc; else only the header is checked)."""
    file = fs.open_read(path)
    try:
        header = file.read(HEADER_SIZE)
        if len(header) < HEADER_SIZE:
            return None
        magic, stored_crc, stored_sequence, created_at, length = _HEADER.unpack(header)
        if magic != MAGIC or stored_sequence != sequence or file.size() != HEADER_SIZE + length:
            return None
        if verify and _data_crc(file, header, length) != stored_crc:
            return None
    finally:
        file.close()
    return Snapshot(sequence, created_at, length, stored_crc, path, fs)


def _data_crc(file: ReadableFile, header: bytes, length: int) -> int | None:
    """The crc of the header's covered fields and the next ``length`` bytes (None: short)."""
    crc = crc32c.crc32c(header[8:])
    remaining = length
    while remaining:
        chunk = file.read(min(remaining, READ_CHUNK))
        if not chunk:
            return None
        crc = crc32c.crc32c(chunk, crc)
        remaining -= len(chunk)
    return crc


@dataclass(frozen=True, slots=True, eq=False)
class Snapshot:
    """Serialised state as of ``sequence`` (every record up to it applied), in a file: the
    data is read (and checked against ``crc``) only when asked for, never kept in memory."""

    sequence: int
    created_at: float
    """Unix seconds when the snapshot was written."""
    length: int
    crc: int
    """The crc32c the file's header holds for the data: names this snapshot's content."""
    path: str
    fs: FileSystem

    @property
    def data(self) -> bytes:
        """The snapshot's bytes (read now); ``SnapshotDamagedError`` if they fail the crc."""
        return read_snapshot_data(self)


def read_snapshot_data(snapshot: Snapshot) -> bytes:
    """The snapshot's data, checked against its crc (``SnapshotDamagedError``)."""
    file = snapshot.fs.open_read(snapshot.path)
    try:
        header = file.read(HEADER_SIZE)
        data = file.read(snapshot.length)
    finally:
        file.close()
    crc = crc32c.crc32c(data, crc32c.crc32c(header[8:]))
    if len(header) < HEADER_SIZE or header[:4] != MAGIC or len(data) != snapshot.length:
        raise SnapshotDamagedError(f"snapshot {snapshot.path} is shorter than its header says")
    if crc != snapshot.crc or _CRC.unpack(header[4:8])[0] != snapshot.crc:
        raise SnapshotDamagedError(f"snapshot {snapshot.path} fails its checksum")
    return data


class SnapshotReader:
    """A snapshot's data as a file to ``read``, a piece at a time, for a decoder that
    streams it (``msgpack.Unpacker(reader)``); ``check`` then reads whatever the decoder
    left and raises ``SnapshotDamagedError`` unless the data matches the crc. Until
    ``check`` has passed, what was read may be damaged. ``close`` when done."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._file = snapshot.fs.open_read(snapshot.path)
        header = self._file.read(HEADER_SIZE)
        if len(header) < HEADER_SIZE or header[:4] != MAGIC:
            self._file.close()
            raise SnapshotDamagedError(f"snapshot {snapshot.path} has no header")
        self._stored_crc = _CRC.unpack(header[4:8])[0]
        self._crc = crc32c.crc32c(header[8:])
        self._left = snapshot.length

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of the data (all that is left for -1); b"" at its end."""
        wanted = self._left if size < 0 else min(size, self._left)
        chunk = self._file.read(wanted) if wanted else b""
        self._crc = crc32c.crc32c(chunk, self._crc)
        self._left -= len(chunk)
        return chunk

    def check(self) -> None:
        """Read the rest and check the whole against the crc (``SnapshotDamagedError``)."""
        while self._left and self.read(READ_CHUNK):
            pass
        path, crc = self._snapshot.path, self._snapshot.crc
        if self._left:
            raise SnapshotDamagedError(f"snapshot {path} is shorter than its header says")
        if self._crc != crc or self._stored_crc != crc:
            raise SnapshotDamagedError(f"snapshot {path} fails its checksum")

    def close(self) -> None:
        self._file.close()


def _times(matrix: list[int], vector: int) -> int:
    total, row = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[row]
        vector >>= 1
        row += 1
    return total


def _square(matrix: list[int]) -> list[int]:
    return [_times(matrix, matrix[n]) for n in range(32)]


def _combine(first: int, second: int, second_length: int) -> int:
    """crc32c(a + b) from crc32c(a), crc32c(b) and len(b) (zlib's ``crc32_combine``: the
    operator that appends zero bits, as 32x32 matrices over GF(2), squared per bit of the
    length), so the header's crc is known without reading the streamed data again."""
    if second_length == 0:
        return first
    odd = [_CASTAGNOLI] + [1 << n for n in range(31)]  # one zero bit
    even = _square(odd)  # two
    odd = _square(even)  # four
    while True:
        even = _square(odd)  # one zero byte, then 4, 16, ...
        if second_length & 1:
            first = _times(even, first)
        second_length >>= 1
        if not second_length:
            break
        odd = _square(even)
        if second_length & 1:
            first = _times(odd, first)
        second_length >>= 1
        if not second_length:
            break
    return first ^ second


def write_snapshot_file(
    fs: FileSystem,
    directory: str,
    sequence: int,
    created_at: float,
    data: bytes | Iterable[bytes],
) -> tuple[str, int]:
    """Write a snapshot durably and atomically; return its path and its crc.

    ``data`` is the bytes or, for a large state, an iterable of chunks written as they come
    (never joined in memory): the header, whose length and crc are known only at the end,
    is written last, over its placeholder. Both durability modes fsync here: segments are
    deleted on the strength of this file, so it must be on disk before its name is.
    """
    path = os.path.join(directory, snapshot_name(sequence))
    temp = path + TEMP_SUFFIX
    if fs.exists(temp):
        fs.unlink(temp)  # left by a crash mid-write; never renamed, so never trusted
    file = fs.create(temp)
    try:
        file.write(bytes(HEADER_SIZE))
        crc = 0
        length = 0
        for chunk in [data] if isinstance(data, bytes) else data:
            if chunk:
                file.write(chunk)
                crc = crc32c.crc32c(chunk, crc)
                length += len(chunk)
        covered = _COVERED.pack(sequence, created_at, length)
        crc = _combine(crc32c.crc32c(covered), crc, length)  # crc32c(covered + data)
        file.write_at(0, MAGIC + _CRC.pack(crc) + covered)
        file.fsync()  # the data must be durable before the rename can expose it
    finally:
        file.close()
    crashpoints.hit("journal.snapshot.before_rename")
    fs.rename(temp, path)
    crashpoints.hit("journal.snapshot.after_rename")
    fs.fsync_dir(directory)  # make the rename itself durable before anything relies on it
    return path, crc
