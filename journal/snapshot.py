"""Snapshot files: the caller's serialised state at a sequence, written atomically.

A snapshot file ``snapshot-<sequence, 20 digits>.snap`` holds::

    magic       4 bytes   c1 4a 53 4e ("\\xc1JSN")
    crc         u32 LE    crc32c of every byte after this field
    sequence    u64 LE    the last sequence applied to the state (equals the file name's)
    created_at  f64 LE    unix seconds
    length      u64 LE    length of data
    data        length bytes, opaque to the journal

It is written as ``<name>.tmp``, fsynced, renamed into place and the directory fsynced
(etcd's ``cut()`` pattern), so a crash leaves either the old set of snapshots or the new
one, never a half-written file under a final name. The crc catches later damage (bit rot, a
bad sector); opening then falls back to the previous snapshot, which is why the journal
keeps two.

Thread-safety: functions only; the journal runs writers one at a time in its executor.
"""

from __future__ import annotations

import os
import struct

import crc32c

from fsseam import crashpoints
from fsseam.fs import FileSystem
from journal.model import Snapshot

SNAPSHOT_PREFIX = "snapshot-"
SNAPSHOT_SUFFIX = ".snap"
TEMP_SUFFIX = ".tmp"
MAGIC = b"\xc1JSN"
_HEADER = struct.Struct("<4sIQdQ")
_COVERED = struct.Struct("<QdQ")
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEADER.size
_DIGITS = 20


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


def snapshot_header(sequence: int, created_at: float, data: bytes) -> bytes:
    """The 32 bytes that precede ``data`` in a snapshot file."""
    covered = _COVERED.pack(sequence, created_at, len(data))
    crc = crc32c.crc32c(data, crc32c.crc32c(covered))
    return MAGIC + _CRC.pack(crc) + covered


def load_snapshot(fs: FileSystem, path: str, sequence: int) -> Snapshot | None:
    """Read and verify one snapshot file; None if it is damaged in any way.

    The header is read first and the data in one read of exactly its length, so a large
    snapshot is held in memory once.
    """
    file = fs.open_read(path)
    try:
        header = file.read(HEADER_SIZE)
        if len(header) < HEADER_SIZE:
            return None
        magic, stored_crc, stored_sequence, created_at, length = _HEADER.unpack(header)
        if magic != MAGIC or stored_sequence != sequence or file.size() != HEADER_SIZE + length:
            return None
        data = file.read(length)
    finally:
        file.close()
    if len(data) != length or crc32c.crc32c(data, crc32c.crc32c(header[8:])) != stored_crc:
        return None
    return Snapshot(sequence=sequence, data=data, created_at=created_at)


def write_snapshot_file(
    fs: FileSystem, directory: str, sequence: int, created_at: float, data: bytes
) -> str:
    """Write a snapshot durably and atomically; return its path.

    Both durability modes fsync here: segments are deleted on the strength of this file, so
    it must be on disk before its name is.
    """
    path = os.path.join(directory, snapshot_name(sequence))
    temp = path + TEMP_SUFFIX
    if fs.exists(temp):
        fs.unlink(temp)  # left by a crash mid-write; never renamed, so never trusted
    file = fs.create(temp)
    try:
        file.write(snapshot_header(sequence, created_at, data))
        file.write(data)
        file.fsync()  # the data must be durable before the rename can expose it
    finally:
        file.close()
    crashpoints.hit("journal.snapshot.before_rename")
    fs.rename(temp, path)
    crashpoints.hit("journal.snapshot.after_rename")
    fs.fsync_dir(directory)  # make the rename itself durable before anything relies on it
    return path
