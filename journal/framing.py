"""Record framing: pure functions from events to bytes and from bytes back to records.

The byte format is specified in ``docs/journal-format.md``; this module is its only
implementation. Every record is::

    magic    4 bytes   c1 4a 52 4e ("\\xc1JRN")
    crc      u32 LE    crc32c of every byte after this field: length, sequence, durable, body
    length   u32 LE    body length, 1 .. max_record_bytes
    sequence u64 LE    this record's sequence number (1, 2, 3, ... without gaps)
    durable  u64 LE    the highest sequence already durable when this record was written
    body     length bytes: one msgpack-encoded event (a map with a "type" key)

Nothing here does I/O, so the reader can be fuzzed and unit-tested on plain bytes. Policy
(which damage is a torn tail and which is corruption) belongs to ``journal.recovery``; the
scanner only reports where and why it stopped, like LevelDB's ``log::Reader``.

Thread-safety: pure functions over immutable inputs.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import crc32c
import msgpack

MAGIC = b"\xc1JRN"
"""Marks a record start. 0xc1 never occurs in UTF-8 text nor as a msgpack type byte, so
event strings cannot forge it, and after damage the scanner can find the next candidate
record with one ``bytes.find``."""

HEADER = struct.Struct("<4sIIQQ")
"""magic, crc, length, sequence, durable."""
HEADER_SIZE = HEADER.size
CHECKSUM_START = 8
"""The crc covers the record from this offset (after magic and crc) to its end."""

_FIELDS = struct.Struct("<IIIQQ")
_MAGIC_INT = int.from_bytes(MAGIC, "little")
_COVERED_HEADER = struct.Struct("<IQQ")
_CRC = struct.Struct("<I")


class Damage(enum.Enum):
    """Why a scan stopped before the end of its data."""

    SHORT = "record extends past the end of the data"
    BAD_MAGIC = "no record magic"
    BAD_LENGTH = "implausible length"
    BAD_CHECKSUM = "checksum mismatch"
    BAD_DURABLE = "durable mark not below the record's sequence"
    BAD_SEQUENCE = "sequence break"


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Where a scan of contiguous records stopped.

    ``position`` is the offset just past the last good record, ``next_sequence`` the
    sequence the next record must carry, ``max_durable`` the highest durable mark among the
    good records (0 if none). ``damage`` is None when the data ended exactly after a record;
    for ``Damage.SHORT``, ``needed`` is how many bytes from ``position`` the record would
    need (the header alone when even that is incomplete).
    """

    position: int
    next_sequence: int
    max_durable: int
    damage: Damage | None
    needed: int = 0


@dataclass(frozen=True, slots=True)
class SalvageResult:
    """Good-looking records found at arbitrary offsets after damage."""

    records: int
    max_sequence: int
    max_durable: int


def encode_event(event: dict[str, Any]) -> bytes:
    """msgpack-encode an event, checking it is a map with a "type" key.

    >>> encode_event({"type": "BucketCreated"})
    b'\\x81\\xa4type\\xadBucketCreated'
    """
    if not isinstance(event, dict):
        raise TypeError(f"an event is a dict, not {type(event).__name__}")
    if "type" not in event:
        raise ValueError('an event needs a "type" key')
    body: bytes = msgpack.packb(event)
    return body


def checksum(covered: bytes | bytearray | memoryview) -> int:
    """The crc32c a record stores: over everything after the crc field."""
    value: int = crc32c.crc32c(covered)
    return value


def encode_record(sequence: int, durable: int, body: bytes) -> bytes:
    """Frame one body.

    >>> record = encode_record(7, 5, b"\\x81\\xa4type\\xa1x")
    >>> len(record), record[:4], HEADER.unpack_from(record)[2:]
    (36, b'\\xc1JRN', (8, 7, 5))
    """
    covered_header = _COVERED_HEADER.pack(len(body), sequence, durable)
    crc = crc32c.crc32c(body, crc32c.crc32c(covered_header))
    return b"".join((MAGIC, _CRC.pack(crc), covered_header, body))


def encode_batch(first_sequence: int, durable: int, bodies: Sequence[bytes]) -> bytes:
    """Frame consecutive bodies starting at ``first_sequence``, all with one durable mark."""
    return b"".join(
        encode_record(sequence, durable, body)
        for sequence, body in enumerate(bodies, first_sequence)
    )


def scan(
    data: bytes | bytearray,
    start: int,
    expected_sequence: int,
    max_record_bytes: int,
) -> ScanResult:
    """Check contiguous records from ``start`` until the data ends or a record is bad.

    A record is good when its magic matches, its length is plausible (1 ..
    ``max_record_bytes``, checked before the length is used), the record is complete, its
    crc matches, its durable mark is below its sequence, and its sequence is the expected
    one. This is the hot loop of opening a journal: locals only, one struct unpack and one
    crc per record.
    """
    size = len(data)
    position = start
    max_durable = 0
    damage: Damage | None = None
    needed = 0
    unpack = _FIELDS.unpack_from
    crc = crc32c.crc32c
    with memoryview(data) as view:
        while True:
            remaining = size - position
            if remaining < HEADER_SIZE:
                if remaining:
                    damage, needed = Damage.SHORT, HEADER_SIZE
                break
            magic, stored_crc, length, sequence, durable = unpack(data, position)
            if magic != _MAGIC_INT:
                damage = Damage.BAD_MAGIC
                break
            if length == 0 or length > max_record_bytes:
                damage = Damage.BAD_LENGTH
                break
            end = position + HEADER_SIZE + length
            if end > size:
                damage, needed = Damage.SHORT, HEADER_SIZE + length
                break
            if crc(view[position + CHECKSUM_START : end]) != stored_crc:
                damage = Damage.BAD_CHECKSUM
                break
            if durable >= sequence:
                damage = Damage.BAD_DURABLE
                break
            if sequence != expected_sequence:
                damage = Damage.BAD_SEQUENCE
                break
            if durable > max_durable:
                max_durable = durable
            expected_sequence += 1
            position = end
    return ScanResult(position, expected_sequence, max_durable, damage, needed)


def salvage(data: bytes | bytearray, start: int, max_record_bytes: int) -> SalvageResult:
    """Find every intact-looking record at or after ``start``, wherever it begins.

    Used only after damage, to learn what the records beyond a hole claim was durable: a
    crash may persist later pages and lose earlier ones, so good records can follow a hole.
    Candidates are found by their magic; each must pass the length bound, fit in the data,
    match its crc and carry a durable mark below its sequence. Sequence order is not checked.
    """
    size = len(data)
    position = start
    records = max_sequence = max_durable = 0
    with memoryview(data) as view:
        while (position := data.find(MAGIC, position)) >= 0:
            if size - position < HEADER_SIZE:
                break
            _, stored_crc, length, sequence, durable = _FIELDS.unpack_from(data, position)
            end = position + HEADER_SIZE + length
            if (
                0 < length <= max_record_bytes
                and end <= size
                and durable < sequence
                and crc32c.crc32c(view[position + CHECKSUM_START : end]) == stored_crc
            ):
                records += 1
                max_sequence = max(max_sequence, sequence)
                max_durable = max(max_durable, durable)
                position = end
            else:
                position += 1
    return SalvageResult(records, max_sequence, max_durable)
