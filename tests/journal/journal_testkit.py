"""Helpers for the journal tests: byte mutations in the style of LevelDB's log_test.cc, log
builders, and the oracle that checks a reopened journal against what was written."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import crc32c
import msgpack

from fsseam.fs import FileSystem, RealFileSystem
from journal import Journal, JournalError, JournalOptions, Record, Snapshot
from journal.framing import CHECKSUM_START, HEADER, HEADER_SIZE
from journal.segment import list_segments
from journal.snapshot import list_snapshots

_FIELD_OFFSETS = {"crc": 4, "length": 8, "sequence": 12, "durable": 20}
_FIELD_FORMATS = {"crc": "<I", "length": "<I", "sequence": "<Q", "durable": "<Q"}


# -- byte mutations (pure) ----------------------------------------------------------------


def record_offsets(data: bytes) -> list[int]:
    """Offsets of the records of an undamaged segment."""
    offsets = []
    position = 0
    while position + HEADER_SIZE <= len(data):
        offsets.append(position)
        position += HEADER_SIZE + HEADER.unpack_from(data, position)[2]
    return offsets


def increment_byte(data: bytes, offset: int, delta: int = 1) -> bytes:
    changed = bytearray(data)
    changed[offset] = (changed[offset] + delta) % 256
    return bytes(changed)


def shrink_size(data: bytes, count: int) -> bytes:
    return data[: len(data) - count]


def set_field(data: bytes, record_offset: int, name: str, value: int) -> bytes:
    changed = bytearray(data)
    struct.pack_into(_FIELD_FORMATS[name], changed, record_offset + _FIELD_OFFSETS[name], value)
    return bytes(changed)


def fix_checksum(data: bytes, record_offset: int) -> bytes:
    """Recompute the crc of the record at ``record_offset`` (after changing its fields)."""
    length = HEADER.unpack_from(data, record_offset)[2]
    end = min(len(data), record_offset + HEADER_SIZE + length)
    crc = crc32c.crc32c(data[record_offset + CHECKSUM_START : end])
    return set_field(data, record_offset, "crc", crc)


def zero_range(data: bytes, start: int, end: int) -> bytes:
    return data[:start] + bytes(end - start) + data[end:]


# -- files --------------------------------------------------------------------------------


def read_file(fs: FileSystem, path: str) -> bytes:
    file = fs.open_read(path)
    try:
        return file.read()
    finally:
        file.close()


def replace_file(fs: FileSystem, path: str, data: bytes) -> None:
    """Overwrite a file as a disk fault would (durably, in place)."""
    if fs.exists(path):
        fs.unlink(path)
    file = fs.create(path)
    try:
        file.write(data)
        file.fsync()
    finally:
        file.close()


def mutate_file(fs: FileSystem, path: str, change: Callable[[bytes], bytes]) -> None:
    replace_file(fs, path, change(read_file(fs, path)))


def segment_paths(fs: FileSystem, directory: str) -> list[str]:
    return [path for _, path in list_segments(fs, directory)]


def snapshot_paths(fs: FileSystem, directory: str) -> list[str]:
    return [path for _, path in list_snapshots(fs, directory)]


# -- building and reading logs ------------------------------------------------------------


def event(number: int) -> dict[str, Any]:
    return {"type": "Put", "n": number, "key": f"key-{number}"}


def state_bytes(events: list[dict[str, Any]]) -> bytes:
    """The snapshot payload for a state made of ``events``."""
    data: bytes = msgpack.packb([item["n"] for item in events])
    return data


def append_sequentially(
    directory: str,
    count: int,
    options: JournalOptions | None = None,
    fs: FileSystem | None = None,
    first: int = 1,
) -> None:
    """Open, replay, append ``count`` events one batch each, close."""

    async def main() -> None:
        journal = Journal.open(directory, options or JournalOptions(), fs or RealFileSystem())
        list(journal.replay())
        for number in range(first, first + count):
            await journal.append(event(number))
        await journal.close()

    asyncio.run(main())


@dataclass
class Opened:
    snapshot: Snapshot | None
    records: list[Record]


def reopen(
    directory: str, options: JournalOptions | None = None, fs: FileSystem | None = None
) -> Opened:
    """Open, read the snapshot and every record, close (outside an event loop)."""
    return asyncio.run(reopen_async(directory, options, fs))


async def reopen_async(
    directory: str, options: JournalOptions | None = None, fs: FileSystem | None = None
) -> Opened:
    """Open, read the snapshot and every record, close (inside an event loop)."""
    journal = Journal.open(directory, options or JournalOptions(), fs or RealFileSystem())
    opened = Opened(journal.snapshot, list(journal.replay()))
    await journal.close()
    return opened


def sequences(records: list[Record]) -> list[int]:
    return [record.sequence for record in records]


@dataclass
class History:
    """What a test did to a journal: every event in call order (event i has sequence i+1)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    acknowledged: int = 0
    """Highest sequence whose append returned."""
    snapshot_returned: int = 0
    """Highest sequence whose write_snapshot returned."""
    closed_cleanly: bool = False
    """close() returned: everything acknowledged is durable, in either mode."""
    tokens: int = 0
    """Events carry a never-repeated token, so a stale record cannot pass for a new one."""

    def require_durable(self, durability: str) -> int:
        """The highest sequence that must survive a crash."""
        if durability == "strict" or self.closed_cleanly:
            return max(self.acknowledged, self.snapshot_returned)
        return self.snapshot_returned


def check_prefix(opened: Opened, history: History) -> int:
    """Assert the reopened journal is an unaltered prefix of ``history``; return its end."""
    base = 0
    if opened.snapshot is not None:
        base = opened.snapshot.sequence
        assert base <= len(history.calls)
        assert opened.snapshot.data == state_bytes(history.calls[:base])
    expected = list(range(base + 1, base + 1 + len(opened.records)))
    assert sequences(opened.records) == expected
    for record in opened.records:
        assert record.event == history.calls[record.sequence - 1]
    return base + len(opened.records)


def directory_files(fs: FileSystem, directory: str) -> list[str]:
    return sorted(os.path.join(directory, name) for name in fs.listdir(directory))


# -- driving a journal through a plan -----------------------------------------------------

Step = tuple[str, int]
"""("append", how many concurrently) or ("snapshot", 0)."""


def next_event(history: History) -> dict[str, Any]:
    history.tokens += 1
    return event(history.tokens)


async def drive(journal: Journal, history: History, plan: list[Step]) -> bool:
    """Run ``plan`` against ``journal``; stop at the first journal error (a crash, a fault).

    Returns whether every step succeeded. Only ``JournalError`` is expected: any other
    exception escapes and fails the test.
    """
    for kind, count in plan:
        if kind == "append":
            events = [next_event(history) for _ in range(count)]
            history.calls.extend(events)
            results = await asyncio.gather(
                *(journal.append(item) for item in events), return_exceptions=True
            )
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, JournalError):
                    raise result
            done = [result for result in results if isinstance(result, int)]
            history.acknowledged = max([history.acknowledged, *done])
            if len(done) < len(results):
                return False
        else:
            sequence = history.acknowledged
            if sequence <= journal.stats().last_snapshot_sequence:
                continue
            try:
                await journal.write_snapshot(sequence, state_bytes(history.calls[:sequence]))
            except JournalError:
                return False
            history.snapshot_returned = sequence
    return True
