"""Reading committed records back as frames (``journal.tail``) and the retention floor that
keeps the segments a reader still needs (``Journal.retain_from``)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsseam.simfs import SimFileSystem
from journal import Journal, JournalCorruptionError, JournalOptions
from journal.framing import HEADER_SIZE
from journal.segment import list_segments
from journal.tail import LogTail, RecordsGoneError
from tests.journal.journal_testkit import event

DIRECTORY = "/data/journal"
SMALL_SEGMENTS = JournalOptions(segment_bytes=300)


def write_log(fs: SimFileSystem, count: int, options: JournalOptions = SMALL_SEGMENTS) -> None:
    async def main() -> None:
        journal = Journal.open(DIRECTORY, options, fs)
        list(journal.replay())
        for n in range(1, count + 1):
            await journal.append(event(n))
        await journal.close()

    asyncio.run(main())


def tail(fs: SimFileSystem) -> LogTail:
    return LogTail(fs, DIRECTORY, JournalOptions().max_record_bytes)


def test_frames_read_back_are_the_records_in_order_across_segments() -> None:
    fs = SimFileSystem()
    write_log(fs, 40)
    assert len(list_segments(fs, DIRECTORY)) > 3
    records = tail(fs).read(1, 40, max_bytes=1 << 30)
    assert [r.sequence for r in records] == list(range(1, 41))
    assert [r.event() for r in records] == [event(n) for n in range(1, 41)]
    assert all(len(r.frame) == HEADER_SIZE + len(r.body) for r in records)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=8))
def test_any_sequence_of_starts_reads_the_same_records(starts: list[int]) -> None:
    fs = SimFileSystem()
    write_log(fs, 40)
    reader = tail(fs)
    for first in starts:
        got = reader.read(first, 40, max_bytes=1 << 30)
        assert [r.sequence for r in got] == list(range(first, 41))


def test_a_tail_resumes_where_it_stopped_and_sees_records_appended_later() -> None:
    fs = SimFileSystem()
    write_log(fs, 10)
    reader = tail(fs)
    assert [r.sequence for r in reader.read(1, 10)] == list(range(1, 11))
    write_log_more(fs, 11, 20)
    opens = fs.counts["open_read"]
    assert [r.sequence for r in reader.read(11, 20)] == list(range(11, 21))
    # Following the tail reads on from where it was: it opens only the segments that rolled
    # since, never the first one again.
    rolled = [start for start, _ in list_segments(fs, DIRECTORY) if start > 10]
    assert fs.counts["open_read"] - opens == len(rolled)


def write_log_more(fs: SimFileSystem, first: int, last: int) -> None:
    async def main() -> None:
        journal = Journal.open(DIRECTORY, SMALL_SEGMENTS, fs)
        list(journal.replay())
        for n in range(first, last + 1):
            await journal.append(event(n))
        await journal.close()

    asyncio.run(main())


def test_max_bytes_bounds_a_read_but_always_returns_one_record() -> None:
    fs = SimFileSystem()
    write_log(fs, 20)
    reader = tail(fs)
    first = reader.read(1, 20, max_bytes=1)
    assert [r.sequence for r in first] == [1]
    rest = reader.read(2, 20, max_bytes=3 * len(first[0].frame))
    assert [r.sequence for r in rest] == [2, 3, 4]


def test_asking_past_what_was_written_is_an_error_not_a_wait() -> None:
    fs = SimFileSystem()
    write_log(fs, 5)
    with pytest.raises(JournalCorruptionError):
        tail(fs).read(4, 9)


def test_a_record_whose_segment_was_removed_is_gone() -> None:
    fs = SimFileSystem()

    async def main() -> None:
        journal = Journal.open(DIRECTORY, SMALL_SEGMENTS, fs)
        list(journal.replay())
        for n in range(1, 41):
            await journal.append(event(n))
        await journal.write_snapshot(20, b"state at 20")
        await journal.write_snapshot(40, b"state at 40")
        await journal.close()

    asyncio.run(main())
    with pytest.raises(RecordsGoneError):
        tail(fs).read(1, 40)


def test_the_retention_floor_keeps_every_segment_a_reader_still_needs() -> None:
    fs = SimFileSystem()
    floor = [5]

    async def main() -> None:
        journal = Journal.open(DIRECTORY, SMALL_SEGMENTS, fs)
        journal.retain_from = lambda: floor[0]
        list(journal.replay())
        for n in range(1, 41):
            await journal.append(event(n))
        await journal.write_snapshot(20, b"state at 20")
        await journal.write_snapshot(40, b"state at 40")
        assert [r.sequence for r in tail(fs).read(5, 40)] == list(range(5, 41))
        floor[0] = 30  # the reader moved on: the next snapshot may drop what it covered
        for n in range(41, 61):
            await journal.append(event(n))
        await journal.write_snapshot(60, b"state at 60")
        with pytest.raises(RecordsGoneError):
            tail(fs).read(5, 60)
        assert [r.sequence for r in tail(fs).read(30, 60)] == list(range(30, 61))
        await journal.close()

    asyncio.run(main())
