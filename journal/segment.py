"""Segment files: naming, streaming validation and streaming replay of one segment.

The log is a series of files ``segment-<first sequence, 20 digits>.log`` in one directory,
each a concatenation of framed records (``journal.framing``) whose first record carries the
sequence in the file name. Names sort in sequence order, and the name alone tells which
sequences a segment can hold, so covered segments can be removed without reading them.

Reading is streamed in bounded chunks: memory depends on the largest record, never on the
size of the log.

Thread-safety: functions only; each call uses its own file objects. Called from the thread
that opens the journal and from the replay iterator's consumer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import msgpack

from fsseam.fs import FileSystem
from journal import framing
from journal.errors import JournalCorruptionError
from journal.model import Record, set_record_event, set_record_sequence

SEGMENT_PREFIX = "segment-"
SEGMENT_SUFFIX = ".log"
BROKEN_INFIX = ".broken-"
READ_CHUNK = 1 << 20

_DIGITS = 20


def segment_name(first_sequence: int) -> str:
    """File name of the segment whose first record has ``first_sequence``.

    >>> segment_name(1)
    'segment-00000000000000000001.log'
    """
    return f"{SEGMENT_PREFIX}{first_sequence:0{_DIGITS}d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The first sequence encoded in a segment file name, or None for any other file.

    >>> parse_segment_name("segment-00000000000000000042.log")
    42
    >>> parse_segment_name("segment-00000000000000000042.log.broken-100") is None
    True
    """
    if not (name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX)):
        return None
    digits = name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)]
    if len(digits) != _DIGITS or not digits.isdigit():
        return None
    return int(digits)


def list_segments(fs: FileSystem, directory: str) -> list[tuple[int, str]]:
    """(first sequence, path) of every segment in ``directory``, oldest first."""
    found = []
    for name in fs.listdir(directory):
        first = parse_segment_name(name)
        if first is not None:
            found.append((first, os.path.join(directory, name)))
    found.sort()
    return found


def broken_path(path: str, offset: int) -> str:
    """Where the bytes cut from ``path`` at ``offset`` are kept (as etcd's repair does)."""
    return f"{path}{BROKEN_INFIX}{offset}"


@dataclass(frozen=True, slots=True)
class SegmentCheck:
    """The outcome of validating one segment from its start.

    ``good_end`` is the offset after the last good record; ``damage`` (None when the whole
    file is good) says why the scan stopped there.
    """

    path: str
    first_sequence: int
    size: int
    good_end: int
    next_sequence: int
    max_durable: int
    damage: framing.Damage | None


def check_segment(
    fs: FileSystem, path: str, expected_sequence: int, max_record_bytes: int
) -> SegmentCheck:
    """Validate the records of one segment, streaming, starting at ``expected_sequence``."""
    first_sequence = expected_sequence
    max_durable = 0
    buffer = bytearray()
    base = 0  # file offset of buffer[0]
    position = 0  # offset within buffer of the next record
    file = fs.open_read(path)
    try:
        size = file.size()
        at_eof = False
        want = READ_CHUNK
        while True:
            while not at_eof and len(buffer) - position < want:
                chunk = file.read(max(READ_CHUNK, want))
                if not chunk:
                    at_eof = True
                buffer += chunk
            result = framing.scan(buffer, position, expected_sequence, max_record_bytes)
            position = result.position
            expected_sequence = result.next_sequence
            max_durable = max(max_durable, result.max_durable)
            if result.damage is framing.Damage.SHORT and not at_eof:
                # The record continues past what was read: keep its start, read on.
                del buffer[:position]
                base += position
                position = 0
                want = result.needed
                continue
            if result.damage is None and not at_eof:
                del buffer[:position]
                base += position
                position = 0
                want = READ_CHUNK
                continue
            return SegmentCheck(
                path=path,
                first_sequence=first_sequence,
                size=max(size, base + len(buffer)),
                good_end=base + position,
                next_sequence=expected_sequence,
                max_durable=max_durable,
                damage=result.damage,
            )
    finally:
        file.close()


def salvage_segment(
    fs: FileSystem, path: str, offset: int, max_record_bytes: int
) -> framing.SalvageResult:
    """Look for intact records anywhere at or after ``offset`` (damaged path only).

    Reads the rest of the segment into memory: bounded by the segment size, and only run
    when opening found damage.
    """
    file = fs.open_read(path)
    try:
        file.seek(offset)
        data = file.read()
    finally:
        file.close()
    return framing.salvage(data, 0, max_record_bytes)


_DECODE_ERRORS = (msgpack.UnpackException, ValueError, TypeError, KeyError)


def read_segment(
    fs: FileSystem,
    path: str,
    first_sequence: int,
    last_sequence: int,
    skip_through: int,
    max_record_bytes: int,
) -> Iterator[Record]:
    """Yield the records of an already validated segment, skipping sequences <= skip_through.

    The segment was checked by ``check_segment`` at open (and cut back to its last good
    record), so this pass only decodes: a streaming msgpack ``Unpacker`` reads the file in
    chunks, skips each 28-byte header and decodes each body in C. Sequences are implied by
    position because validation proved them consecutive. A body that is not one msgpack map
    with a "type" key can only come from a broken writer and raises JournalCorruptionError.
    """
    file = fs.open_read(path)
    buffer_limit = max(4 * READ_CHUNK, 2 * (framing.HEADER_SIZE + max_record_bytes))
    unpacker = msgpack.Unpacker(file, read_size=READ_CHUNK, max_buffer_size=buffer_limit)
    skip_header = unpacker.read_bytes
    skip_body = unpacker.skip
    decode = unpacker.unpack
    header_size = framing.HEADER_SIZE
    new_object = object.__new__
    set_sequence = set_record_sequence
    set_event = set_record_event
    try:
        try:
            for _ in range(first_sequence, min(skip_through, last_sequence) + 1):
                skip_header(header_size)
                skip_body()
            # The hot loop of start-up: locals only, new_record() inlined.
            for sequence in range(max(first_sequence, skip_through + 1), last_sequence + 1):
                skip_header(header_size)
                event = decode()
                if event.__class__ is not dict or "type" not in event:
                    raise TypeError("record body is not an event map")
                record = new_object(Record)
                set_sequence(record, sequence)
                set_event(record, event)
                yield record
            if unpacker.tell() != file.size():
                raise ValueError("bytes left after the last record")
        except _DECODE_ERRORS as exc:
            raise JournalCorruptionError(
                path, unpacker.tell(), f"undecodable record: {exc}"
            ) from exc
    finally:
        file.close()
