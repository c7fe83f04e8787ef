"""Reading committed records back out of a live journal directory, as framed bytes.

A shipper (the continuous archive, a standby's feed) copies records elsewhere exactly as the
journal wrote them: the frame (header and body) is the unit, so the copy keeps every crc and
can be checked, replayed or re-shipped without being decoded and encoded again. Sequences are
gapless, so "everything after N" is a position, and a ``LogTail`` remembers where it stopped
in which segment: following the newest records costs a read of the new bytes only, not a
walk from the segment's start.

Reads run beside the writer, which only appends to the active segment and unlinks segments
the last snapshot covers. The caller asks only for acknowledged sequences (their bytes are
complete in the file, in the page cache at least), and holds a retention floor
(``Journal.retain_from``) so that the segments it still needs are not unlinked under it. A
record asked for that is no longer in the log raises ``RecordsGoneError``: the reader
must start again from a snapshot.

Thread-safety: a ``LogTail`` is used by one thread at a time (a shipper's executor job);
several tails may read one directory at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from fsseam.fs import FileSystem, ReadableFile
from journal import framing
from journal.errors import JournalCorruptionError, JournalError
from journal.segment import READ_CHUNK, list_segments


class RecordsGoneError(JournalError):
    """The first record asked for was covered by a snapshot and its segment removed."""


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record as the journal framed it: ``frame`` is header plus body."""

    sequence: int
    frame: bytes

    @property
    def body(self) -> bytes:
        return self.frame[framing.HEADER_SIZE :]

    def event(self) -> dict[str, Any]:
        """The decoded event (a map with a "type" key)."""
        event: dict[str, Any] = msgpack.unpackb(self.body, raw=False)
        return event


class LogTail:
    """Reads committed records of ``directory`` in order, resuming where it stopped."""

    def __init__(self, fs: FileSystem, directory: str, max_record_bytes: int) -> None:
        self._fs = fs
        self._directory = directory
        self._max_record_bytes = max_record_bytes
        self._file: ReadableFile | None = None
        self._path = ""
        self._next = 0
        """The sequence of the record at the file's current offset (0: no position)."""
        self._buffer = bytearray()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._next = 0
        self._buffer.clear()

    def read(self, first: int, last: int, max_bytes: int = 8 << 20) -> list[RawRecord]:
        """Records ``first`` .. at most ``last`` (acknowledged), stopping once ``max_bytes`` of
        frames are gathered (always at least one record when ``first <= last``).

        Raises ``RecordsGoneError`` when ``first`` is older than the oldest segment, and
        ``JournalCorruptionError`` when a record at or below ``last`` is not intact."""
        if first > last:
            return []
        if self._next != first or self._file is None:
            self._position_at(first)
        out: list[RawRecord] = []
        gathered = 0
        while self._next <= last and (not out or gathered < max_bytes):
            record = self._next_record()
            if record is None:
                if not self._advance_segment():
                    raise JournalCorruptionError(
                        self._path, -1, f"record {self._next} missing (log ends before {last})"
                    )
                continue
            out.append(record)
            gathered += len(record.frame)
        return out

    def _position_at(self, first: int) -> None:
        self.close()
        segments = list_segments(self._fs, self._directory)
        candidates = [(start, path) for start, path in segments if start <= first]
        if not candidates:
            oldest = segments[0][0] if segments else None
            raise RecordsGoneError(f"record {first} is no longer in the log (oldest: {oldest})")
        start, path = candidates[-1]
        self._open(path, start)
        while self._next < first:
            # At the segment's end before ``first``: it must be the next segment's start.
            if self._next_record() is None and (not self._advance_segment() or self._next > first):
                raise RecordsGoneError(f"record {first} is no longer in the log")

    def _open(self, path: str, first_sequence: int) -> None:
        if self._file is not None:
            self._file.close()
        self._file = self._fs.open_read(path)
        self._path = path
        self._next = first_sequence
        self._buffer.clear()

    def _advance_segment(self) -> bool:
        """Move to the segment that starts at ``self._next``; False if there is none yet."""
        for start, path in list_segments(self._fs, self._directory):
            if start == self._next and path != self._path:
                self._open(path, start)
                return True
        return False

    def _fill(self, wanted: int) -> bool:
        """Read until the buffer holds ``wanted`` bytes; False if the file ends first."""
        assert self._file is not None
        while len(self._buffer) < wanted:
            chunk = self._file.read(max(READ_CHUNK, wanted - len(self._buffer)))
            if not chunk:
                return False
            self._buffer += chunk
        return True

    def _next_record(self) -> RawRecord | None:
        """The record at the current position, or None at the (current) end of the file."""
        if not self._fill(framing.HEADER_SIZE):
            if self._buffer:
                return None  # a batch being written: its records are not acknowledged
            return None
        magic, crc, length, sequence, _ = framing.HEADER.unpack_from(self._buffer)
        if magic != framing.MAGIC or not 1 <= length <= self._max_record_bytes:
            raise JournalCorruptionError(self._path, -1, f"no record at sequence {self._next}")
        if sequence != self._next:
            raise JournalCorruptionError(
                self._path, -1, f"sequence {sequence} where {self._next} was expected"
            )
        size = framing.HEADER_SIZE + length
        if not self._fill(size):
            return None
        frame = bytes(self._buffer[:size])
        if framing.checksum(memoryview(frame)[framing.CHECKSUM_START :]) != crc:
            raise JournalCorruptionError(self._path, -1, f"record {sequence}: checksum mismatch")
        del self._buffer[:size]
        self._next = sequence + 1
        return RawRecord(sequence, frame)


class FramesDamagedError(JournalError):
    """Shipped frames that are not the records they claim to be."""


def split_frames(data: bytes, first: int, max_record_bytes: int) -> list[RawRecord]:
    """The records of ``data``, a run of frames that must start at sequence ``first`` and end
    exactly after a record; every crc and sequence is checked (``framing.scan``), and any
    damage raises ``FramesDamagedError`` naming the first bad sequence and why."""
    result = framing.scan(data, 0, first, max_record_bytes)
    if result.damage is not None:
        raise FramesDamagedError(f"record {result.next_sequence}: {result.damage.value}")
    records = []
    position = 0
    for sequence in range(first, result.next_sequence):
        length = framing.HEADER.unpack_from(data, position)[2]
        end = position + framing.HEADER_SIZE + length
        records.append(RawRecord(sequence, bytes(data[position:end])))
        position = end
    return records
