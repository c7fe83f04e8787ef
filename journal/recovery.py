"""Opening a journal directory: choose the snapshot, validate the log, cut a torn tail.

Recovery is point-in-time. The chain of segments after the chosen snapshot is read until the
first record that is short, fails its checksum, has an implausible length or breaks the
sequence; everything from there on is cut. Cutting is normal after a crash (the last batch
was being written), so it only needs a log line. It becomes corruption when the cut would
drop a record the log had already called durable: a record at or below the highest durable
mark seen anywhere (the ``durable`` field of any intact record, including intact records
found *beyond* the damage, or the sequence of any snapshot, including a damaged newer one).
Then opening raises ``JournalCorruptionError`` naming file and offset, unless the caller
passed ``repair=True``. Before cutting, the cut bytes are copied to
``<segment>.broken-<offset>`` (whole later segments are renamed to ``<name>.broken-0``), as
etcd's ``repair.go`` does, so nothing is destroyed without a copy.

Why look beyond the damage: unsynced pages reach the disk in any order, so after a crash good
records may follow a hole; that alone is not corruption. But if any record, wherever it is,
says "everything up to N was durable when I was written" and the hole is at or below N, the
disk lost data that had been fsynced.

Thread-safety: runs once, synchronously, inside ``Journal.open`` before any other access.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from fsseam import crashpoints
from fsseam.durable import make_dirs_durably
from fsseam.fs import FileSystem
from journal.errors import JournalCorruptionError
from journal.model import JournalOptions
from journal.segment import (
    broken_path,
    check_segment,
    list_segments,
    salvage_segment,
)
from journal.snapshot import TEMP_SUFFIX, Snapshot, list_snapshots, load_snapshot

logger = logging.getLogger("journal")


@dataclass(frozen=True, slots=True)
class LiveSegment:
    """A segment of the recovered chain, all of whose bytes are good records."""

    first_sequence: int
    path: str
    size: int
    last_sequence: int
    """``first_sequence - 1`` when the segment is empty."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """What opening found: the snapshot to start from and the valid chain after it."""

    snapshot: Snapshot | None
    snapshot_bytes: int
    """Bytes of all snapshot files present."""
    segments: tuple[LiveSegment, ...]
    """The chain, oldest first; replay reads these. May be empty (a new log)."""
    last_sequence: int
    """The highest sequence covered by the snapshot or the chain."""
    seconds: float


@dataclass(frozen=True, slots=True)
class _Cut:
    path: str
    offset: int
    reason: str
    index: int
    """Index in the segment list of the segment that is cut."""


def recover(fs: FileSystem, directory: str, options: JournalOptions) -> Recovery:
    """Validate ``directory`` and cut any torn tail; raise on damaged durable records."""
    started = time.perf_counter()
    make_dirs_durably(fs, directory)  # a new log must not vanish with its directory
    _remove_stale_temps(fs, directory)
    snapshot, snapshot_bytes, claims = _choose_snapshot(fs, directory, options.verify_snapshot)
    base = snapshot.sequence if snapshot is not None else 0

    segments = list_segments(fs, directory)
    # Start at the segment holding base + 1; older ones are fully covered leftovers of an
    # interrupted cleanup and are ignored (the next snapshot removes them).
    start = 0
    for index, (first, _) in enumerate(segments):
        if first <= base + 1:
            start = index
    segments = segments[start:]
    expected = segments[0][0] if segments and segments[0][0] <= base + 1 else base + 1

    chain: list[LiveSegment] = []
    cut: _Cut | None = None
    for index, (first, path) in enumerate(segments):
        if first != expected:
            cut = _Cut(path, 0, f"segment name says {first}, expected {expected}", index)
            break
        check = check_segment(fs, path, expected, options.max_record_bytes)
        claims = max(claims, check.max_durable)
        expected = check.next_sequence
        if check.damage is not None:
            cut = _Cut(path, check.good_end, check.damage.value, index)
            if check.good_end > 0:
                chain.append(LiveSegment(first, path, check.good_end, expected - 1))
            break
        chain.append(LiveSegment(first, path, check.size, expected - 1))

    if cut is not None:
        claims = max(claims, _salvage_claims(fs, segments, cut, options.max_record_bytes))
        _guard(cut, expected, claims, options.repair)
        _cut(fs, directory, segments, cut)
    if expected - 1 < base:
        # The chain ends before the snapshot's sequence: records the snapshot proves durable
        # are missing (cut above under repair=True, or a segment removed from outside).
        if cut is None:
            where = chain[-1].path if chain else directory
            offset = chain[-1].size if chain else 0
            _guard(
                _Cut(where, offset, "log ends before the snapshot", len(segments)),
                expected,
                claims,
                options.repair,
            )
        chain = []  # a new segment starts after the snapshot; these become leftovers
        expected = base + 1

    return Recovery(
        snapshot=snapshot,
        snapshot_bytes=snapshot_bytes,
        segments=tuple(chain),
        last_sequence=max(expected - 1, base),
        seconds=time.perf_counter() - started,
    )


def _remove_stale_temps(fs: FileSystem, directory: str) -> None:
    for name in fs.listdir(directory):
        if name.endswith(TEMP_SUFFIX):
            fs.unlink(os.path.join(directory, name))  # a snapshot never renamed into place


def _choose_snapshot(
    fs: FileSystem, directory: str, verify: bool
) -> tuple[Snapshot | None, int, int]:
    """The newest valid snapshot, the bytes of all snapshot files, the highest sequence seen.

    A snapshot file under its final name was fsynced before it was renamed there, so even a
    damaged one proves its sequence had been durable.
    """
    snapshots = list_snapshots(fs, directory)
    total = sum(fs.stat(path).size for _, path in snapshots)
    claims = snapshots[0][0] if snapshots else 0
    for sequence, path in snapshots:
        snapshot = load_snapshot(fs, path, sequence, verify)
        if snapshot is not None:
            return snapshot, total, claims
        logger.warning("snapshot %s is damaged; falling back to an older one", path)
    return None, total, claims


def _salvage_claims(
    fs: FileSystem, segments: list[tuple[int, str]], cut: _Cut, max_record_bytes: int
) -> int:
    claims = 0
    for index in range(cut.index, len(segments)):
        path = segments[index][1]
        offset = cut.offset if index == cut.index else 0
        found = salvage_segment(fs, path, offset, max_record_bytes)
        claims = max(claims, found.max_durable)
    return claims


def _guard(cut: _Cut, first_dropped: int, claims: int, repair: bool) -> None:
    if first_dropped > claims:
        logger.warning(
            "torn tail in %s at offset %d (%s); dropping records from %d on",
            cut.path,
            cut.offset,
            cut.reason,
            first_dropped,
        )
        return
    reason = (
        f"{cut.reason}; record {first_dropped} would be dropped but records up to "
        f"{claims} are known durable"
    )
    if not repair:
        raise JournalCorruptionError(cut.path, cut.offset, reason)
    logger.error(
        "repairing %s at offset %d: %s (repair=True accepts the loss)",
        cut.path,
        cut.offset,
        reason,
    )


def _cut(fs: FileSystem, directory: str, segments: list[tuple[int, str]], cut: _Cut) -> None:
    """Move the bytes from the cut on aside, then truncate (etcd's repair.go order)."""
    first_path = segments[cut.index][1]
    if cut.offset > 0:
        keep = broken_path(first_path, cut.offset)
        if fs.exists(keep):
            fs.unlink(keep)  # from an earlier repair interrupted before its truncate
        source = fs.open_read(first_path)
        target = fs.create(keep)
        try:
            source.seek(cut.offset)
            fs.copy_range(source, target, source.size() - cut.offset)
            target.fsync()  # the copy must survive before the original bytes are cut
        finally:
            source.close()
            target.close()
        fs.fsync_dir(directory)  # ... and so must its name
        crashpoints.hit("journal.replay.truncate")
        fs.truncate(first_path, cut.offset)
        later = segments[cut.index + 1 :]
    else:
        crashpoints.hit("journal.replay.truncate")
        later = segments[cut.index :]
    for _, path in reversed(later):
        fs.rename(path, broken_path(path, 0))
        if fs.exists(path):
            # A crash inside an earlier rename(2) can leave both names linked to the file,
            # and renaming between two links of one file does nothing: drop the old name,
            # or the writer could not create the segment anew.
            fs.unlink(path)
    # No fsync here: LogWriter.resume fsyncs the (cut) active segment and the directory
    # before any record can reuse the cut sequences, and a crash before that only makes the
    # next open cut the same bytes again.
