"""Restore: a new data dir holding exactly the state after record N of an archive.

``python -m service restore --archive SRC --data-dir NEW [--to-sequence N | --to-time T]``.
The data dir it builds is what a primary's own would be after a clean stop at N, less what a
start derives again (the object index, the event log):

1. the newest archived snapshot at or before N, verbatim, as the journal's snapshot;
2. the archived records after it up to N, verbatim (every crc checked), as one segment;
3. every payload the snapshot or those records reference, each checked against its size and
   SHA-256 before it is put in place (the start's orphan sweep later removes the few that
   were released before N);
4. the signing secret, so presigned URLs and share links made before keep working.

A restore never writes into a data dir that holds anything. It writes through the
``FileSystem`` seam (so the crash matrix cuts it at every file operation:
``tests/crash/restorekit.py``) in an order that a crash anywhere leaves either nothing
declared ready or a complete data dir:

- first ``restore-incomplete``, made durable before anything else is written: a data dir
  holding it is not ready; a server refuses to start on it and a restore refuses to write
  into it, each saying to delete the directory and run the restore again;
- then every file, without an fsync each (a payload is checked against its SHA-256 as it is
  written; one that fails removes itself and fails the restore);
- then one ``syncfs(2)`` of the data dir's file system (where the kernel has none to trust,
  an fsync of each file and directory written), and only then the marker's removal, made
  durable: the commit point.

So a restore of many small payloads costs one flush, not two fsyncs per payload. Crash
points: ``restore.marked``, ``restore.written`` (nothing synced yet), ``restore.synced``
(the marker not yet removed).

``--to-time T`` restores the state after the last record committed at or before T (records
carry their commit time, ``at``): the records after the newest snapshot written at or before
T are read until the first later one.

Thread-safety: blocking, single-threaded (a command-line tool).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from fsseam import crashpoints
from fsseam.durable import make_dirs_durably
from fsseam.fs import FileSystem, RealFileSystem
from journal.segment import segment_name
from journal.snapshot import snapshot_name as journal_snapshot_name
from journal.tail import RawRecord, split_frames
from service.archive import layout
from service.archive.refs import PayloadRef, record_payload
from service.archive.shipper import (
    ArchivedSnapshot,
    ArchiveState,
    for_each_local_snapshot_payload,
    read_state,
)
from service.archive.targets import ArchiveError, ArchiveTarget
from service.auth.server_secret import SERVER_SECRET_FILENAME
from service.common.timefmt import rfc3339_ms
from service.startup import RESTORE_INCOMPLETE
from service.storage.direct import direct_path, parse_direct_id
from service.storage.layout import ASSEMBLY_DIR, Layout

JOURNAL_DIR = "journal"
SECRET_FILE = SERVER_SECRET_FILENAME
MAX_RECORD_BYTES = 16 * 1024 * 1024
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RestoreResult:
    sequence: int
    base: int
    records: int
    payloads: int
    payload_bytes: int


def choose_point(
    target: ArchiveTarget,
    state: ArchiveState,
    to_sequence: int | None,
    to_time_ms: int | None,
) -> tuple[int, ArchivedSnapshot | None]:
    """(N, the snapshot to start from) for the request; ``ArchiveError`` if out of range."""
    base, end = state.base, state.end
    if base is None or end is None:
        raise ArchiveError(f"{target.description} holds no archive")
    oldest = state.snapshots[0] if state.snapshots else None
    if to_time_ms is not None:
        if oldest is not None and to_time_ms < oldest.created_ms:
            raise ArchiveError(
                f"the oldest point the archive can restore is {rfc3339_ms(oldest.created_ms)}"
            )
        start = [s for s in state.snapshots if s.created_ms <= to_time_ms]
        from_sequence = start[-1].sequence if start else base
        to_sequence = _last_at_or_before(target, state, from_sequence, end, to_time_ms)
    sequence = end if to_sequence is None else to_sequence
    if sequence == 0:
        raise ArchiveError("record 0 is the empty state: there is nothing to restore")
    if not base <= sequence <= end:
        raise ArchiveError(f"record {sequence} is outside what the archive holds ({base}..{end})")
    usable = [s for s in state.snapshots if s.sequence <= sequence]
    return sequence, (usable[-1] if usable else None)


def _last_at_or_before(
    target: ArchiveTarget, state: ArchiveState, start: int, end: int, at_ms: int
) -> int:
    last = start
    for records in state.records:
        if records.last <= start or records.first > end:
            continue
        for record in _frames_of(target, records):
            if record.sequence <= start:
                continue
            if int(record.event().get("at", 0)) > at_ms:
                return last
            last = record.sequence
    return last


def _frames_of(target: ArchiveTarget, records: layout.RecordsFile) -> list[RawRecord]:
    try:
        return split_frames(target.read(records.name), records.first, MAX_RECORD_BYTES)
    except ValueError as exc:
        raise ArchiveError(f"{records.name} is damaged: {exc}") from None


def restore(
    target: ArchiveTarget,
    data_dir: str,
    *,
    to_sequence: int | None = None,
    to_time_ms: int | None = None,
    progress: Progress = lambda line: None,
    fs: FileSystem | None = None,
) -> RestoreResult:
    """Build ``data_dir`` (absent or empty) from ``target`` (module docstring)."""
    fs = fs or RealFileSystem()
    marker = os.path.join(data_dir, RESTORE_INCOMPLETE)
    if fs.exists(marker):
        raise ArchiveError(
            f"{data_dir} holds a restore that did not finish ({RESTORE_INCOMPLETE}): "
            "delete the directory and run the restore again"
        )
    if fs.exists(data_dir) and fs.listdir(data_dir):
        raise ArchiveError(f"{data_dir} is not empty: restore into a new directory")
    state = read_state(target)
    sequence, snapshot = choose_point(target, state, to_sequence, to_time_ms)
    base = snapshot.sequence if snapshot is not None else 0
    progress(f"restoring record {sequence} from the snapshot at {base}")
    make_dirs_durably(fs, data_dir)
    # The marker's name alone is the signal (a torn one still says "not ready"), so it is
    # created in place, not renamed in: no temporary name a crash could leave behind.
    file = fs.create(marker)
    try:
        file.write(MARKER_TEXT)
        file.fsync()  # the note is readable after a power loss
    finally:
        file.close()
    fs.fsync_dir(data_dir)  # the marker's name is durable before anything else is written
    crashpoints.hit("restore.marked")
    writes = _Writes(fs, data_dir)
    try:
        count = _build(target, state, writes, sequence, base, snapshot, progress)
        crashpoints.hit("restore.written")
        writes.sync()
    finally:
        writes.close()
    crashpoints.hit("restore.synced")
    fs.unlink(marker)  # the commit point: the data dir is complete and ready
    fs.fsync_dir(data_dir)  # the marker's removal survives a power loss
    placer = writes.placer
    progress(
        f"restored record {sequence}: {count} records after the snapshot, "
        f"{placer.placed} payloads ({placer.bytes} bytes)"
    )
    return RestoreResult(sequence, base, count, placer.placed, placer.bytes)


MARKER_TEXT = (
    b"A restore is building this data dir and has not finished: it is not ready.\n"
    b"Delete the directory and run python -m service restore again.\n"
)


def _build(
    target: ArchiveTarget,
    state: ArchiveState,
    writes: _Writes,
    sequence: int,
    base: int,
    snapshot: ArchivedSnapshot | None,
    progress: Progress,
) -> int:
    """Write the journal, payloads and secret (not synced); the records after ``base``."""
    fs, data_dir = writes.fs, writes.data_dir
    journal_dir = os.path.join(data_dir, JOURNAL_DIR)
    writes.mkdir(journal_dir)
    placer = writes.placer = _PayloadPlacer(target, writes, progress)
    if snapshot is not None:
        local = os.path.join(journal_dir, journal_snapshot_name(base))
        writes.copy(target.stream(snapshot.name), local)
        for_each_local_snapshot_payload(local, base, placer.want, fs)
    frames: list[bytes] = []
    count = 0
    for records in state.records:
        if records.last <= base or records.first > sequence:
            continue
        for record in _frames_of(target, records):
            if base < record.sequence <= sequence:
                frames.append(record.frame)
                count += 1
                ref = record_payload(record.event())
                if ref is not None:
                    placer.want(ref)
    if count != sequence - base:
        raise ArchiveError(f"records {base + 1}..{sequence} are not all in the archive")
    placer.flush()
    if frames:
        writes.copy([b"".join(frames)], os.path.join(journal_dir, segment_name(base + 1)))
    secret = target.read(layout.SECRET)
    writes.copy([secret], os.path.join(data_dir, SECRET_FILE), mode=0o600)
    return count


class _Writes:
    """What a restore wrote, made durable at once by ``sync`` (module docstring)."""

    def __init__(self, fs: FileSystem, data_dir: str) -> None:
        self.fs = fs
        self.data_dir = data_dir
        # Opened before the writes, so its sync reports any of their writeback errors.
        self._syncfs = fs.open_syncfs(data_dir)
        self._files: set[str] = set()
        self._directories: set[str] = {data_dir}
        self.placer: _PayloadPlacer

    def mkdir(self, path: str) -> None:
        """``path`` and its missing parents (under the data dir), synced with the rest."""
        missing = []
        current = path
        while not self.fs.exists(current):
            missing.append(current)
            current = os.path.dirname(current)
        for directory in reversed(missing):
            self.fs.mkdir(directory)
            self._directories.add(directory)
            self._directories.add(os.path.dirname(directory))

    def copy(self, chunks: Iterable[bytes], path: str, mode: int = 0o644) -> tuple[str, int]:
        """Write ``chunks`` as the new file ``path``; its SHA-256 and size."""
        self.mkdir(os.path.dirname(path))
        digest = hashlib.sha256()
        size = 0
        file = self.fs.create(path, mode=mode)
        self.wrote(path)
        try:
            for chunk in chunks:
                file.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        finally:
            file.close()
        return digest.hexdigest(), size

    def wrote(self, path: str) -> None:
        self._files.add(path)
        self._directories.add(os.path.dirname(path))

    def forget(self, path: str) -> None:
        self._files.discard(path)

    def sync(self) -> None:
        """Everything written durable, before the marker goes."""
        if self._syncfs is not None:
            self._syncfs.sync()  # one flush: every file and name written above
            return
        for path in sorted(self._files):
            self.fs.fsync_file(path)  # no trustworthy syncfs here: each file's bytes...
        for directory in sorted(self._directories, key=len, reverse=True):
            self.fs.fsync_dir(directory)  # ...and each name, deepest first

    def close(self) -> None:
        if self._syncfs is not None:
            self._syncfs.close()


class _PayloadPlacer:
    """Copies referenced payloads into the data dir in batches, each checked as written.

    A batch is fetched as one (``ArchiveTarget.stream_many``: one ``rclone copy`` for a
    remote) into a scratch directory beside the data dir, which the target empties again."""

    BATCH = 256
    BATCH_BYTES = 256 * 1024 * 1024
    """A batch is flushed at this many bytes too (the scratch copy of a remote's batch)."""

    def __init__(self, target: ArchiveTarget, writes: _Writes, progress: Progress) -> None:
        self._target = target
        self._writes = writes
        self._layout = Layout(writes.data_dir)
        self._progress = progress
        self._pending: dict[str, PayloadRef] = {}
        self._pending_bytes = 0
        self._done: set[str] = set()
        self.placed = 0
        self.quarantined = 0
        self.bytes = 0

    def want(self, ref: PayloadRef) -> None:
        if ref.payload_id in self._done:
            return
        if ref.payload_id not in self._pending:
            self._pending[ref.payload_id] = ref
            self._pending_bytes += ref.size
        if len(self._pending) >= self.BATCH or self._pending_bytes >= self.BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        refs = {layout.payload_name(ref.payload_id): ref for ref in self._pending.values()}
        data_dir = self._writes.data_dir.rstrip("/")
        scratch = os.path.join(
            os.path.dirname(data_dir), f".{os.path.basename(data_dir)}.archive-fetch"
        )
        # Closed at once, also when a payload fails its check: the target empties scratch.
        with contextlib.closing(self._target.stream_many(list(refs), scratch)) as batch:
            for name, chunks in batch:
                ref = refs[name]
                self._place(ref, chunks)
                self._done.add(ref.payload_id)
        self._pending.clear()
        self._pending_bytes = 0
        self._progress(f"payloads placed: {self.placed} ({self.bytes} bytes)")

    def _place(self, ref: PayloadRef, chunks: Iterator[bytes]) -> None:
        try:
            first = next(chunks, b"")
        except ArchiveError:
            if not self._lost(ref):
                raise
            self.quarantined += 1
            return
        chunks = itertools.chain((first,), chunks)
        located = parse_direct_id(ref.payload_id)
        if located is None:
            final = self._layout.payload_path(ref.payload_id)
            digest = self._writes.copy(chunks, final)
            if digest != (ref.sha256.lower(), ref.size):
                self._writes.fs.unlink(final)
                self._writes.forget(final)
                raise ArchiveError(f"payload {ref.payload_id} in the archive fails its SHA-256")
        else:
            data = b"".join(chunks)
            if (hashlib.sha256(data).hexdigest(), len(data)) != (ref.sha256.lower(), ref.size):
                raise ArchiveError(f"part {ref.payload_id} in the archive fails its SHA-256")
            upload_id, offset, _ = located
            self._write_region(upload_id, offset, data)
        self.placed += 1
        self.bytes += ref.size

    def _lost(self, ref: PayloadRef) -> bool:
        """A payload the primary had lost is quarantined here too (its reads answer 500 as
        they did there); False if the archive does not say it was lost."""
        names = {entry.name for entry in self._target.list(f"{layout.PAYLOADS}/lost")}
        if layout.lost_name(ref.payload_id) not in names:
            return False
        self._writes.copy([], os.path.join(self._layout.quarantine_dir, ref.payload_id))
        return True

    def _write_region(self, upload_id: str, offset: int, data: bytes) -> None:
        fs = self._writes.fs
        assembly = os.path.join(self._writes.data_dir, ASSEMBLY_DIR)
        self._writes.mkdir(assembly)
        path = direct_path(assembly, upload_id)
        file = fs.open_append(path) if fs.exists(path) else fs.create(path)
        self._writes.wrote(path)
        try:
            file.write_at(offset, data)
        finally:
            file.close()
