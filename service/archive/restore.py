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

A restore never writes into a data dir that holds anything; it fsyncs every file and
directory it wrote before it says it is done. ``--to-time T`` restores the state after the
last record committed at or before T (records carry their commit time, ``at``): the records
after the newest snapshot written at or before T are read until the first later one.

Thread-safety: blocking, single-threaded (a command-line tool).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from fsseam.durable import make_dirs_durably
from fsseam.fs import RealFileSystem
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
from service.storage.direct import direct_path, parse_direct_id
from service.storage.layout import ASSEMBLY_DIR, STAGING_DIR, Layout

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
) -> RestoreResult:
    """Build ``data_dir`` (absent or empty) from ``target`` (module docstring)."""
    if os.path.exists(data_dir) and os.listdir(data_dir):
        raise ArchiveError(f"{data_dir} is not empty: restore into a new directory")
    state = read_state(target)
    sequence, snapshot = choose_point(target, state, to_sequence, to_time_ms)
    base = snapshot.sequence if snapshot is not None else 0
    progress(f"restoring record {sequence} from the snapshot at {base}")
    fs = RealFileSystem()
    journal_dir = os.path.join(data_dir, JOURNAL_DIR)
    make_dirs_durably(fs, journal_dir)
    placer = _PayloadPlacer(target, data_dir, progress)
    if snapshot is not None:
        local = os.path.join(journal_dir, journal_snapshot_name(base))
        target.fetch(snapshot.name, local)
        for_each_local_snapshot_payload(local, base, placer.want)
        with open(local, "rb+") as written:
            os.fsync(written.fileno())  # the snapshot is durable before the restore says so
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
        _write_synced(os.path.join(journal_dir, segment_name(base + 1)), b"".join(frames))
    secret = target.read(layout.SECRET)
    _write_synced(os.path.join(data_dir, SECRET_FILE), secret, mode=0o600)
    for directory in (journal_dir, data_dir):
        fs.fsync_dir(directory)  # every name written above survives a power loss
    progress(
        f"restored record {sequence}: {count} records after the snapshot, "
        f"{placer.placed} payloads ({placer.bytes} bytes)"
    )
    return RestoreResult(sequence, base, count, placer.placed, placer.bytes)


class _PayloadPlacer:
    """Fetches referenced payloads into the data dir in batches, each verified first."""

    BATCH = 256

    def __init__(self, target: ArchiveTarget, data_dir: str, progress: Progress) -> None:
        self._target = target
        self._layout = Layout(data_dir)
        self._data_dir = data_dir
        self._progress = progress
        self._pending: dict[str, PayloadRef] = {}
        self._directories: set[str] = set()
        self.placed = 0
        self.quarantined = 0
        self.bytes = 0

    def want(self, ref: PayloadRef) -> None:
        self._pending[ref.payload_id] = ref
        if len(self._pending) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        fs = RealFileSystem()
        staging = os.path.join(self._data_dir, STAGING_DIR)
        make_dirs_durably(fs, staging)
        for ref in self._pending.values():
            self._place(ref, staging)
        self._pending.clear()
        for directory in sorted(self._directories):
            fs.fsync_dir(directory)  # the placed payloads' names are durable
        self._directories.clear()
        self._progress(f"payloads placed: {self.placed} ({self.bytes} bytes)")

    def _place(self, ref: PayloadRef, staging: str) -> None:
        located = parse_direct_id(ref.payload_id)
        if located is None:
            final = self._layout.payload_path(ref.payload_id)
            if os.path.exists(final):
                return
        with tempfile.NamedTemporaryFile(dir=staging, delete=False) as handle:
            temporary = handle.name
        try:
            try:
                self._target.fetch(layout.payload_name(ref.payload_id), temporary)
            except ArchiveError:
                if not self._lost(ref):
                    raise
                self.quarantined += 1
                return
            if _sha256_of(temporary) != (ref.sha256.lower(), ref.size):
                raise ArchiveError(f"payload {ref.payload_id} in the archive fails its SHA-256")
            if located is None:
                fs = RealFileSystem()
                make_dirs_durably(fs, os.path.dirname(final))
                with open(temporary, "rb+") as written:
                    os.fsync(written.fileno())  # the bytes are on disk before the name
                os.rename(temporary, final)  # whole or absent under its final name
                self._directories.add(os.path.dirname(final))
            else:
                upload_id, offset, _ = located
                self._write_region(upload_id, offset, temporary)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        self.placed += 1
        self.bytes += ref.size

    def _lost(self, ref: PayloadRef) -> bool:
        """A payload the primary had lost is quarantined here too (its reads answer 500 as
        they did there); False if the archive does not say it was lost."""
        names = {entry.name for entry in self._target.list(f"{layout.PAYLOADS}/lost")}
        if layout.lost_name(ref.payload_id) not in names:
            return False
        quarantine = self._layout.quarantine_dir
        make_dirs_durably(RealFileSystem(), quarantine)
        _write_synced(os.path.join(quarantine, ref.payload_id), b"")
        self._directories.add(quarantine)
        return True

    def _write_region(self, upload_id: str, offset: int, source: str) -> None:
        assembly = os.path.join(self._data_dir, ASSEMBLY_DIR)
        make_dirs_durably(RealFileSystem(), assembly)
        path = direct_path(assembly, upload_id)
        with open(source, "rb") as data:
            content = data.read()
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(descriptor, content, offset)
            os.fsync(descriptor)  # the part's bytes are durable before the restore says so
        finally:
            os.close(descriptor)
        self._directories.add(assembly)


def _sha256_of(path: str) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _write_synced(path: str, data: bytes, mode: int = 0o644) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.write(descriptor, data)
        os.fsync(descriptor)  # durable before the restore reports success
    finally:
        os.close(descriptor)
