"""Behaviour of opening a journal whose files were damaged, LevelDB log_test.cc style.

Logs are written through the real file system in ``tmp_path``, then bytes are mutated with
``increment_byte``, ``shrink_size``, ``set_field`` and ``fix_checksum`` before reopening.
Strict logs appended one record per batch make record n claim n-1 durable; balanced logs
never fsync while appending, so their records claim nothing and any hole is a torn tail.
"""

from __future__ import annotations

import asyncio
import logging
import os

import pytest

from journal import (
    Journal,
    JournalCorruptionError,
    JournalOptions,
    RealFileSystem,
    SnapshotDamagedError,
)
from journal.framing import HEADER_SIZE
from journal.segment import segment_name
from tests.journal.journal_testkit import (
    append_sequentially,
    event,
    fix_checksum,
    increment_byte,
    mutate_file,
    read_file,
    record_offsets,
    reopen,
    replace_file,
    segment_paths,
    sequences,
    set_field,
    shrink_size,
    snapshot_paths,
    zero_range,
)

FS = RealFileSystem()
BALANCED = JournalOptions(durability="balanced")


def only_segment(directory: str) -> str:
    (path,) = segment_paths(FS, directory)
    return path


def test_new_directory_opens_as_an_empty_log(tmp_path: os.PathLike[str]) -> None:
    directory = os.path.join(tmp_path, "new", "journal")
    opened = reopen(directory)
    assert opened.snapshot is None
    assert opened.records == []
    assert os.path.basename(only_segment(directory)) == segment_name(1)


def test_records_survive_reopen_in_order(tmp_path: str) -> None:
    append_sequentially(str(tmp_path), 5)
    opened = reopen(str(tmp_path))
    assert sequences(opened.records) == [1, 2, 3, 4, 5]
    assert [record.event for record in opened.records] == [event(n) for n in range(1, 6)]


def test_truncated_trailing_record_is_ignored(
    tmp_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    append_sequentially(str(tmp_path), 5)
    path = only_segment(str(tmp_path))
    original = read_file(FS, path)
    last = record_offsets(original)[-1]
    mutate_file(FS, path, lambda data: shrink_size(data, 3))
    with caplog.at_level(logging.WARNING, logger="journal"):
        opened = reopen(str(tmp_path))
    assert sequences(opened.records) == [1, 2, 3, 4]
    assert any("torn tail" in message for message in caplog.messages)
    assert read_file(FS, path) == original[:last]
    assert read_file(FS, f"{path}.broken-{last}") == original[last:-3]


def test_appending_after_a_torn_tail_reuses_its_sequence(tmp_path: str) -> None:
    append_sequentially(str(tmp_path), 3)
    mutate_file(FS, only_segment(str(tmp_path)), lambda data: shrink_size(data, 1))
    append_sequentially(str(tmp_path), 1, first=100)
    opened = reopen(str(tmp_path))
    assert sequences(opened.records) == [1, 2, 3]
    assert opened.records[-1].event == event(100)


def test_bad_length_at_end_is_ignored(tmp_path: str) -> None:
    options = JournalOptions(max_record_bytes=1000)
    append_sequentially(str(tmp_path), 4, options)
    path = only_segment(str(tmp_path))
    last = record_offsets(read_file(FS, path))[-1]
    mutate_file(FS, path, lambda data: fix_checksum(set_field(data, last, "length", 1001), last))
    assert sequences(reopen(str(tmp_path), options).records) == [1, 2, 3]


def test_length_beyond_the_end_of_the_file_is_ignored(tmp_path: str) -> None:
    append_sequentially(str(tmp_path), 4)
    path = only_segment(str(tmp_path))
    data = read_file(FS, path)
    last = record_offsets(data)[-1]
    longer = len(data) - last - HEADER_SIZE + 50
    mutate_file(FS, path, lambda data: fix_checksum(set_field(data, last, "length", longer), last))
    assert sequences(reopen(str(tmp_path)).records) == [1, 2, 3]


def test_checksum_mismatch_stops_replay(tmp_path: str) -> None:
    append_sequentially(str(tmp_path), 5, BALANCED)
    path = only_segment(str(tmp_path))
    third = record_offsets(read_file(FS, path))[2]
    mutate_file(FS, path, lambda data: increment_byte(data, third + HEADER_SIZE + 2))
    assert sequences(reopen(str(tmp_path)).records) == [1, 2]


def test_sequence_break_stops_replay(tmp_path: str) -> None:
    append_sequentially(str(tmp_path), 5, BALANCED)
    path = only_segment(str(tmp_path))
    fourth = record_offsets(read_file(FS, path))[3]
    mutate_file(FS, path, lambda data: fix_checksum(set_field(data, fourth, "sequence", 9), fourth))
    assert sequences(reopen(str(tmp_path)).records) == [1, 2, 3]


def test_durable_mark_not_below_its_own_sequence_stops_replay(tmp_path: str) -> None:
    append_sequentially(str(tmp_path), 3, BALANCED)
    path = only_segment(str(tmp_path))
    third = record_offsets(read_file(FS, path))[2]
    mutate_file(FS, path, lambda data: fix_checksum(set_field(data, third, "durable", 3), third))
    assert sequences(reopen(str(tmp_path)).records) == [1, 2]


def test_good_records_after_a_hole_are_a_torn_tail_when_none_was_durable(tmp_path: str) -> None:
    append_sequentially(str(tmp_path), 6, BALANCED)
    path = only_segment(str(tmp_path))
    offsets = record_offsets(read_file(FS, path))
    # Unsynced pages reach the disk in any order: record 3's page never did.
    mutate_file(FS, path, lambda data: zero_range(data, offsets[2], offsets[3]))
    assert sequences(reopen(str(tmp_path)).records) == [1, 2]


def test_damaged_durable_record_raises_naming_file_and_offset(tmp_path: str) -> None:
    append_sequentially(str(tmp_path), 5)
    path = only_segment(str(tmp_path))
    second = record_offsets(read_file(FS, path))[1]
    mutate_file(FS, path, lambda data: increment_byte(data, second + HEADER_SIZE + 1))
    with pytest.raises(JournalCorruptionError) as raised:
        Journal.open(str(tmp_path))
    assert raised.value.path == path
    assert raised.value.offset == second
    assert path in str(raised.value) and f"offset {second}" in str(raised.value)
    assert not os.path.exists(f"{path}.broken-{second}")


def test_repair_truncates_and_keeps_the_broken_copy(
    tmp_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    append_sequentially(str(tmp_path), 5)
    path = only_segment(str(tmp_path))
    original = read_file(FS, path)
    second = record_offsets(original)[1]
    damaged = increment_byte(original, second + HEADER_SIZE + 1)
    replace_file(FS, path, damaged)
    with caplog.at_level(logging.ERROR, logger="journal"):
        opened = reopen(str(tmp_path), JournalOptions(repair=True))
    assert sequences(opened.records) == [1]
    assert any("repairing" in message for message in caplog.messages)
    assert read_file(FS, f"{path}.broken-{second}") == damaged[second:]
    assert read_file(FS, path) == original[:second]
    append_sequentially(str(tmp_path), 1, first=50)
    assert sequences(reopen(str(tmp_path)).records) == [1, 2]


def test_damage_in_an_earlier_segment_is_caught_by_claims_in_a_later_one(tmp_path: str) -> None:
    options = JournalOptions(segment_bytes=150)
    append_sequentially(str(tmp_path), 8, options)
    first_segment = segment_paths(FS, str(tmp_path))[0]
    last = record_offsets(read_file(FS, first_segment))[-1]
    mutate_file(FS, first_segment, lambda data: increment_byte(data, last + HEADER_SIZE))
    with pytest.raises(JournalCorruptionError) as raised:
        Journal.open(str(tmp_path), options)
    assert (raised.value.path, raised.value.offset) == (first_segment, last)


def test_missing_middle_segment_is_a_sequence_break(tmp_path: str) -> None:
    options = JournalOptions(segment_bytes=150)
    append_sequentially(str(tmp_path), 10, options)
    paths = segment_paths(FS, str(tmp_path))
    assert len(paths) >= 3
    os.unlink(paths[1])
    with pytest.raises(JournalCorruptionError) as raised:
        Journal.open(str(tmp_path), options)
    assert (raised.value.path, raised.value.offset) == (paths[2], 0)


def test_segments_roll_and_are_named_by_their_first_sequence(tmp_path: str) -> None:
    options = JournalOptions(segment_bytes=150)
    append_sequentially(str(tmp_path), 10, options)
    paths = segment_paths(FS, str(tmp_path))
    assert len(paths) >= 3
    for path in paths:
        data = read_file(FS, path)
        first_sequence = int(os.path.basename(path)[len("segment-") : -len(".log")])
        assert set_field(data, 0, "sequence", first_sequence) == data
    assert sequences(reopen(str(tmp_path), options).records) == list(range(1, 11))


def test_snapshot_then_reopen_yields_the_snapshot_and_later_records(tmp_path: str) -> None:
    async def main() -> None:
        journal = Journal.open(str(tmp_path))
        for number in range(1, 11):
            await journal.append(event(number))
        await journal.write_snapshot(7, b"state at 7")
        await journal.append(event(11))
        await journal.close()

    asyncio.run(main())
    opened = reopen(str(tmp_path))
    assert opened.snapshot is not None
    assert (opened.snapshot.sequence, opened.snapshot.data) == (7, b"state at 7")
    assert sequences(opened.records) == [8, 9, 10, 11]


async def _snapshots_at(
    directory: str, points: list[int], total: int, segment_bytes: int = 150
) -> None:
    journal = Journal.open(directory, JournalOptions(segment_bytes=segment_bytes))
    list(journal.replay())
    for number in range(1, total + 1):
        await journal.append(event(number))
        if number in points:
            await journal.write_snapshot(number, f"state {number}".encode())
    await journal.close()


def test_stale_segments_and_snapshots_are_removed(tmp_path: str) -> None:
    asyncio.run(_snapshots_at(str(tmp_path), [10], 30))
    before = segment_paths(FS, str(tmp_path))
    assert os.path.basename(before[0]) == segment_name(1)  # one snapshot: nothing removed yet
    asyncio.run(_write_snapshots(str(tmp_path), [25, 28]))
    after = segment_paths(FS, str(tmp_path))
    firsts = [int(os.path.basename(path)[len("segment-") : -len(".log")]) for path in after]
    # Kept: the segment holding 26 (the older retained snapshot is 25) and everything after.
    assert len(firsts) >= 2
    assert firsts[0] <= 26 < firsts[1]
    assert len(after) < len(before)
    names = [os.path.basename(path) for path in snapshot_paths(FS, str(tmp_path))]
    assert names == ["snapshot-00000000000000000028.snap", "snapshot-00000000000000000025.snap"]
    opened = reopen(str(tmp_path))
    assert opened.snapshot is not None and opened.snapshot.sequence == 28
    assert sequences(opened.records) == [29, 30]


async def _write_snapshots(directory: str, points: list[int]) -> None:
    journal = Journal.open(directory, JournalOptions(segment_bytes=150))
    list(journal.replay())
    for number in points:
        await journal.write_snapshot(number, f"state {number}".encode())
    await journal.close()


def test_damaged_latest_snapshot_falls_back_to_the_previous_one(
    tmp_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    asyncio.run(_snapshots_at(str(tmp_path), [10, 25], 30))
    newest = snapshot_paths(FS, str(tmp_path))[0]
    mutate_file(FS, newest, lambda data: increment_byte(data, len(data) - 1))
    with caplog.at_level(logging.WARNING, logger="journal"):
        opened = reopen(str(tmp_path))
    assert opened.snapshot is not None
    assert (opened.snapshot.sequence, opened.snapshot.data) == (10, b"state 10")
    assert sequences(opened.records) == list(range(11, 31))
    assert any("damaged" in message for message in caplog.messages)


def test_a_snapshot_streamed_in_chunks_reads_back_whole_with_its_crc(tmp_path: str) -> None:
    chunks = [b"a" * 1000, b"", b"b" * 70_000, b"c"]

    async def main() -> int:
        journal = Journal.open(str(tmp_path))
        for number in range(1, 4):
            await journal.append(event(number))
        crc = await journal.write_snapshot(3, iter(chunks))
        await journal.close()
        return crc

    crc = asyncio.run(main())
    opened = reopen(str(tmp_path))
    assert opened.snapshot is not None
    assert (opened.snapshot.sequence, opened.snapshot.crc) == (3, crc)
    assert opened.snapshot.data == b"".join(chunks)


def test_unverified_open_checks_the_header_and_the_data_when_it_is_read(tmp_path: str) -> None:
    asyncio.run(_snapshots_at(str(tmp_path), [10, 25], 30))
    newest = snapshot_paths(FS, str(tmp_path))[0]
    mutate_file(FS, newest, lambda data: increment_byte(data, len(data) - 1))
    lazy = Journal.open(str(tmp_path), JournalOptions(verify_snapshot=False))
    assert lazy.snapshot is not None and lazy.snapshot.sequence == 25  # the header is fine
    with pytest.raises(SnapshotDamagedError):
        lazy.snapshot.data  # noqa: B018 - reading it is the check
    lazy.close_unused()
    again = Journal.open(str(tmp_path))  # verified: falls back as a start that needs it does
    assert again.snapshot is not None and again.snapshot.data == b"state 10"
    again.close_unused()


def test_damaged_only_snapshot_falls_back_to_the_whole_log(tmp_path: str) -> None:
    asyncio.run(_snapshots_at(str(tmp_path), [5], 12))
    (only,) = snapshot_paths(FS, str(tmp_path))
    mutate_file(FS, only, lambda data: shrink_size(data, 1))
    opened = reopen(str(tmp_path))
    assert opened.snapshot is None
    assert sequences(opened.records) == list(range(1, 13))


def test_log_ending_before_the_snapshot_is_corruption(tmp_path: str) -> None:
    asyncio.run(_snapshots_at(str(tmp_path), [6], 6, segment_bytes=1 << 20))
    path = only_segment(str(tmp_path))
    fourth = record_offsets(read_file(FS, path))[3]
    mutate_file(FS, path, lambda data: data[:fourth])
    with pytest.raises(JournalCorruptionError):
        Journal.open(str(tmp_path))
    opened = reopen(str(tmp_path), JournalOptions(repair=True))
    assert opened.snapshot is not None and opened.snapshot.sequence == 6
    assert opened.records == []
    append_sequentially(str(tmp_path), 1, first=7)
    assert sequences(reopen(str(tmp_path)).records) == [7]


def test_repairing_damage_below_the_snapshot_continues_after_the_snapshot(tmp_path: str) -> None:
    asyncio.run(_snapshots_at(str(tmp_path), [6], 6, segment_bytes=1 << 20))
    path = only_segment(str(tmp_path))
    third = record_offsets(read_file(FS, path))[2]
    mutate_file(FS, path, lambda data: increment_byte(data, third + HEADER_SIZE))
    with pytest.raises(JournalCorruptionError):
        Journal.open(str(tmp_path))
    opened = reopen(str(tmp_path), JournalOptions(repair=True))
    assert opened.snapshot is not None and opened.snapshot.sequence == 6
    assert opened.records == []
    append_sequentially(str(tmp_path), 1, first=7)
    assert sequences(reopen(str(tmp_path)).records) == [7]


def test_stale_snapshot_temp_file_is_removed_at_open(tmp_path: str) -> None:
    temp = os.path.join(tmp_path, "snapshot-00000000000000000003.snap.tmp")
    replace_file(FS, temp, b"half a snapshot")
    assert reopen(str(tmp_path)).snapshot is None
    assert not os.path.exists(temp)
