"""The event log's files (unit tests on a temporary directory): rolling, reading ranges, a
torn tail cut at open, and retention by age, count and a webhook's hold."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fsseam.fs import RealFileSystem
from fsseam.simfs import Fault, SimFileSystem
from service.events import log as event_log
from service.events.feed import derive
from service.events.log import EventLog
from service.meta import MetaState, records

DAY_MS = 86_400_000


def line(sequence: int, time_ms: int = 0) -> tuple[int, int, bytes]:
    doc = {"sequence": sequence, "time": "2026-11-22T08:41:44.123Z", "bucket": "b", "key": "k"}
    return sequence, time_ms, json.dumps(doc).encode() + b"\n"


def opened(directory: Path, segment_events: int = 3, start_after: int = 0) -> EventLog:
    log = EventLog(RealFileSystem(), str(directory), segment_events)
    log.open(start_after)
    return log


def sequences(lines: list[tuple[int, bytes]]) -> list[int]:
    found = [sequence for sequence, _ in lines]
    assert found == [json.loads(item)["sequence"] for _, item in lines]
    return found


def test_appends_roll_files_and_reads_return_the_asked_range(tmp_path: Path) -> None:
    log = opened(tmp_path / "events")
    log.append([line(n) for n in (2, 3, 5, 8, 9, 10, 12)])
    assert len(list((tmp_path / "events").iterdir())) == 3
    assert sequences(log.read(0, 100, 12)) == [2, 3, 5, 8, 9, 10, 12]
    assert sequences(log.read(5, 2, 12)) == [8, 9]
    assert sequences(log.read(3, 100, 9)) == [5, 8, 9]
    assert log.covered_after == 0 and log.last_sequence == 12
    log.append([line(4)])  # older than the newest: ignored, never written twice
    assert sequences(log.read(3, 100, 12)) == [5, 8, 9, 10, 12]


def test_reads_from_anywhere_find_what_a_scan_from_the_start_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads start at the mark nearest before their resume point (noted by earlier reads):
    whatever marks exist, in whatever order reads came, they return the same lines."""
    monkeypatch.setattr(event_log, "MARK_BYTES", 300)
    monkeypatch.setattr(event_log, "READ_CHUNK", 1000)
    written = [n for n in range(1, 1500) if n % 7]
    log = opened(tmp_path / "events", segment_events=200)
    log.append([line(n) for n in written])
    rng = random.Random(5)
    for _ in range(300):
        after, limit = rng.randrange(0, 1500), rng.randrange(1, 40)
        through = rng.randrange(after, 1501)
        expected = [n for n in written if after < n <= through][:limit]
        assert sequences(log.read(after, limit, through)) == expected, (after, limit, through)


def test_a_torn_last_line_is_cut_at_open(tmp_path: Path) -> None:
    log = opened(tmp_path / "events", segment_events=100, start_after=41)
    log.append([line(42), line(43)])
    log.close()
    (segment,) = (tmp_path / "events").iterdir()
    assert segment.name == f"{42:020d}.events"
    with segment.open("ab") as file:
        file.write(b'{"sequence": 44, "bu')
    again = opened(tmp_path / "events", segment_events=100)
    assert again.last_sequence == 43 and again.covered_after == 41
    assert segment.read_bytes().endswith(b"\n")
    again.append([line(44)])
    assert sequences(again.read(41, 100, 44)) == [42, 43, 44]


def test_open_reads_sealed_files_by_their_tail_and_knows_their_newest_event(
    tmp_path: Path,
) -> None:
    log = opened(tmp_path / "events")
    log.append([line(n, time_ms=n * 1000) for n in (2, 3, 5, 8, 9, 10, 12)])
    log.close()
    again = opened(tmp_path / "events")
    assert again.last_sequence == 12 and again.event_count() == 7
    assert [s.last_sequence for s in again._segments] == [5, 10, 12]
    assert again._segments[0].last_time_ms == again._segments[2].last_time_ms > 0
    assert sequences(again.read(0, 100, 12)) == [2, 3, 5, 8, 9, 10, 12]


def test_a_hole_left_by_a_power_cut_is_cut_with_everything_after_it(tmp_path: Path) -> None:
    """A power cut kept a newer file whole but tore an older one: the start cuts every line
    after the replay point, so replay derives them all again and no hole stays."""
    log = opened(tmp_path / "events")
    log.append([line(n) for n in (2, 3, 4, 5, 6, 7, 8)])
    log.close()
    files = sorted((tmp_path / "events").iterdir())
    assert [f.name for f in files] == [f"{n:020d}.events" for n in (1, 5, 8)]
    middle = files[1].read_bytes()
    files[1].write_bytes(middle[: middle.index(b"\n") + 1])  # line 6 and 7 lost, 8 kept
    again = opened(tmp_path / "events")
    assert again.last_sequence == 8  # the hole is invisible to the scan
    again.forget_after(3)
    assert again.last_sequence == 3
    assert [f.name for f in sorted((tmp_path / "events").iterdir())] == [f"{1:020d}.events"]
    again.append([line(n) for n in (4, 5, 6, 7, 8)])
    assert sequences(again.read(0, 100, 8)) == [2, 3, 4, 5, 6, 7, 8]


def test_lines_of_records_the_journal_lost_are_cut(tmp_path: Path) -> None:
    """Balanced durability: the journal lost records 5.. but their event lines survived;
    new records reuse those sequences and their events must be the ones kept."""
    log = opened(tmp_path / "events", segment_events=100)
    log.append([line(n) for n in (2, 3, 5, 6)])
    log.close()
    again = opened(tmp_path / "events", segment_events=100)
    again.forget_after(4)
    assert again.last_sequence == 3 and again.covered_after == 0
    again.append([line(5, 1), line(6, 1)])
    assert sequences(again.read(0, 100, 6)) == [2, 3, 5, 6]
    (segment,) = (tmp_path / "events").iterdir()
    assert segment.read_bytes().count(b"\n") == 4
    again.forget_after(10)  # nothing after it: nothing changes
    assert again.last_sequence == 6


def test_retention_keeps_young_events_enough_events_and_what_a_webhook_needs(
    tmp_path: Path,
) -> None:
    log = opened(tmp_path / "events", segment_events=2)
    now = 10 * DAY_MS
    log.append([line(n, now - 2 * DAY_MS) for n in range(1, 7)])
    log.append([line(n, now) for n in range(7, 9)])
    # Four files: [1,2] [3,4] [5,6] old, [7,8] young.
    assert log.drop_old(now, DAY_MS, keep_count=10, hold_after=None) == 0
    assert log.drop_old(now, DAY_MS, keep_count=2, hold_after=2) == 1
    assert log.covered_after == 2
    assert log.drop_old(now, DAY_MS, keep_count=2, hold_after=None) == 2
    assert log.covered_after == 6 and sequences(log.read(6, 10, 8)) == [7, 8]
    assert log.drop_old(now, 0, keep_count=0, hold_after=None) == 0  # the newest file stays


def test_events_are_derived_from_accepted_object_records_only() -> None:
    state = MetaState()
    bucket = records.bucket_created(
        name="b",
        owner="u",
        quota_bytes=None,
        versioning_enabled=False,
        tags={},
        at=1,
        bucket_id="bkt_" + "0" * 23 + "1",
    )
    ids = state.bucket_id_of
    assert derive(1, bucket, state.apply(bucket), ids) is None
    stored = records.object_stored(
        bucket="b",
        key="k",
        payload_id="p1",
        size=3,
        content_type="text/plain",
        sha256="ab" * 32,
        custom_metadata={},
        version_token="t1",
        if_none_match=False,
        if_match=None,
        at=1_795_336_904_123,
    )
    created = derive(2, stored, state.apply(stored), ids)
    assert created == {
        "event_id": "ev_0000000000000002",
        "sequence": 2,
        "type": "object.created",
        "bucket": "b",
        "bucket_id": "bkt_" + "0" * 23 + "1",
        "key": "k",
        "version_id": None,
        "size_bytes": 3,
        "etag": "ab" * 32,
        "time": "2026-11-22T08:41:44.123Z",
    }
    again = dict(stored, if_none_match=True, payload_id="p2", version_token="t2")
    assert derive(3, again, state.apply(again), ids) is None  # refused: no event
    deleted = records.object_deleted(bucket="b", key="k", version_id=None, version_token="t3", at=5)
    gone = derive(4, deleted, state.apply(deleted), ids)
    assert gone is not None and gone["type"] == "object.deleted" and gone["size_bytes"] == 3


def test_a_failed_fsync_stops_the_log_so_no_hole_is_sealed_in() -> None:
    """Linux drops the pages a failed fsync covered and the next fsync succeeds: a log that
    wrote on would seal the lost lines' hole into an older file, which a start reads by its
    tail alone. It stops instead, and its last file shows the loss to the next start."""
    fs = SimFileSystem()
    fs.mkdir("/data")
    log = EventLog(fs, "/data/events", 3)
    log.open(0)
    log.append([line(n) for n in (1, 2)])
    fs.inject(Fault(fs.operations, "eio", operations=frozenset({"fsync"})))
    with pytest.raises(OSError):
        log.sync()
    assert log.stopped
    with pytest.raises(OSError):
        log.append([line(3), line(4)])
    assert log.last_sequence == 2
    again = EventLog(fs.crash_image("keep_unsynced"), "/data/events", 3)
    again.open(0)
    assert again.last_sequence == 0 and not again.stopped  # the lost lines show at a start
