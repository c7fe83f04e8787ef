"""Shipping to the archive, on the primary: payloads first, then the records that reference
them, then the snapshots those records reach.

The order is the archive's promise: a records file is written only once every payload its
records reference is in the archive, and a snapshot only once the records it covers are. So
whatever a crash (of the primary or of the shipping) leaves in the archive, a restore to any
archived sequence finds every byte it needs. Shipping is idempotent: after a crash the
shipper lists the records it has, and ships again from there (a payload shipped twice is
the same file twice).

The primary keeps what the archive still needs, as a Postgres replication slot keeps WAL:
``held_from`` is the first sequence not yet archived; the journal keeps the segments holding
it (``Journal.retain_from``) and the engine keeps the payloads that records from it on
released, until the archive has passed them (``service.engine`` asks ``held_from``). Reads of
segments and payload files happen on the shipper's thread and never block the writer.

A fresh archive starts from a snapshot taken when shipping starts (its payloads shipped
first): that is the oldest point it can restore. Retention keeps every point of the last
``retention_days`` restorable: the newest snapshot at or before the window's start stays
(with the records and payloads after it), and only what is older goes (Litestream's lesson:
retention is computed from what a restore needs).

Crash points: ``archive.payloads_shipped`` (a batch's payloads in the archive, its records
file not yet), ``archive.records_shipped`` (the records file written, before snapshots).

Thread-safety: ``Archiver`` runs on the event loop; its ``_blocking`` parts on the executor
given, one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fsseam import crashpoints
from fsseam.fs import FileSystem, RealFileSystem
from journal.errors import JournalError, SnapshotDamagedError
from journal.snapshot import SnapshotReader, list_snapshots, load_snapshot
from journal.tail import LogTail, RecordsGoneError, split_frames
from service.archive import layout
from service.archive.refs import (
    PayloadRef,
    for_each_snapshot_payload,
    for_each_snapshot_payload_batch,
    record_payload,
)
from service.archive.targets import ArchiveError, ArchiveTarget
from service.common.timefmt import rfc3339_ms
from service.meta.snapshot import SnapshotFormatError
from service.storage.direct import parse_direct_id, read_region
from service.storage.layout import Layout

log = logging.getLogger("service.archive")

RECORDS_FILE_BYTES = 8 << 20
"""A records file holds at most about this many bytes of frames (at least one record)."""
PAYLOAD_BATCH = 256
"""Payloads shipped per target call (one ``rclone copy`` for a batch)."""
IDLE_SECONDS = 0.5
"""How often an idle shipper looks for new records: the archive's RPO when all is well."""
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)
PRUNE_SECONDS = 600.0


@dataclass(frozen=True)
class ArchiveSource:
    """What the shipper reads on the primary, handed in by the engine."""

    fs: FileSystem
    data_dir: str
    journal_dir: str
    max_record_bytes: int
    durable: Callable[[], Awaitable[int]]
    """The journal's last sequence a power loss cannot take back (balanced mode syncs the
    journal first): the archive never holds a record the primary could lose."""
    snapshot_now: Callable[[], Awaitable[int]]
    """Write a snapshot of the current state; its sequence (0 for an empty journal)."""
    server_id: Callable[[], str | None]
    secret_path: str
    direct_file: Callable[[str], str]
    """The file holding an upload's parts written in place (``service.storage.direct``)."""


@dataclass(frozen=True, slots=True)
class ArchivedSnapshot:
    sequence: int
    created_ms: int
    name: str


def snapshot_file_name(sequence: int, created_ms: int) -> str:
    """An archived snapshot's name carries its time, so retention reads no file:
    ``snapshots/snapshot-<sequence>-<unix ms>.snap``."""
    return layout.snapshot_name(sequence).removesuffix(".snap") + f"-{created_ms:013d}.snap"


def parse_snapshot_file(name: str) -> ArchivedSnapshot | None:
    base = name.rsplit("/", 1)[-1]
    head, _, tail = base.removesuffix(".snap").rpartition("-")
    sequence = layout.parse_snapshot_name(f"{layout.SNAPSHOTS}/{head}.snap")
    if sequence is None or not base.endswith(".snap") or len(tail) != 13 or not tail.isdigit():
        return None
    return ArchivedSnapshot(sequence, int(tail), name)


@dataclass(slots=True)
class ArchiveState:
    """What the archive holds, read from its listing (records and snapshots only)."""

    records: list[layout.RecordsFile]
    snapshots: list[ArchivedSnapshot]
    manifest: dict[str, Any] | None

    @property
    def base(self) -> int | None:
        """Where the archive's chain starts: 0 when its records start at 1 (the empty
        state), else its oldest snapshot; None for an empty archive."""
        if self.records and self.records[0].first == 1:
            return 0
        if self.snapshots:
            return self.snapshots[0].sequence
        return None

    @property
    def end(self) -> int | None:
        """The last sequence reachable from ``base`` without a gap; None if empty."""
        base = self.base
        if base is None:
            return None
        reached = base
        for records in self.records:
            if records.last <= reached:
                continue
            if records.first > reached + 1:
                break
            reached = records.last
        return reached


def read_state(target: ArchiveTarget) -> ArchiveState:
    records = sorted(
        found
        for entry in target.list(layout.RECORDS)
        if (found := layout.parse_records_name(entry.name)) is not None
    )
    snapshots = sorted(
        (
            snapshot
            for entry in target.list(layout.SNAPSHOTS)
            if (snapshot := parse_snapshot_file(entry.name)) is not None
        ),
        key=lambda snapshot: snapshot.sequence,
    )
    manifest = None
    if any(entry.name == layout.MANIFEST for entry in target.list("")):
        manifest = json.loads(target.read(layout.MANIFEST))
    return ArchiveState(records, snapshots, manifest)


class Archiver:
    """Ships one primary's journal and payloads to ``target`` (module docstring)."""

    def __init__(
        self,
        target: ArchiveTarget,
        source: ArchiveSource,
        run_blocking: Callable[..., Awaitable[Any]],
        retention_days: float,
        clock: Callable[[], float] = time.time,
        *,
        on_begun: Callable[[int, int], Awaitable[None]] | None = None,
        on_advance: Callable[[], None] | None = None,
    ) -> None:
        """``on_begun(first, last)``: told which acknowledged records are not archived yet
        once the archive's end is known; ``on_advance``: told after records were shipped."""
        self.target = target
        self._source = source
        self._run_blocking = run_blocking
        self._retention_seconds = retention_days * 86400.0
        self._clock = clock
        self._layout = Layout(source.data_dir)
        self._tail = LogTail(source.fs, source.journal_dir, source.max_record_bytes)
        self.archived_sequence = 0
        """Every record up to here, and what it references, is in the archive."""
        self._started = False
        self._on_begun = on_begun
        self._on_advance = on_advance
        self._shipped_snapshots: set[int] = set()
        self._base = 0
        """The archive's first snapshot (0: its records start at the first): an older one
        is not shipped (its payloads are not in the archive)."""
        self.oldest_restorable_ms: int | None = None
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_prune = 0.0
        self.shipped_records = 0
        """Records shipped since the start (a counter for the metrics)."""
        self.rebased = False
        """Set when the archive had to start again from a new snapshot (a journal that no
        longer holds the record after the archive's end)."""
        self.wake = asyncio.Event()
        """Set by the engine after a commit, so shipping need not wait for its next poll."""

    # -- what the engine asks ------------------------------------------------------------

    def held_from(self) -> int:
        """The first sequence the archive still needs (keep its segment and payloads)."""
        return self.archived_sequence + 1

    def status(self) -> dict[str, Any]:
        """The contract's ``archive`` object of ``GET /api/v1/replication``."""
        return {
            "target": self.target.description,
            "archived_sequence": self.archived_sequence,
            "oldest_restorable_at": (
                None if self.oldest_restorable_ms is None else rfc3339_ms(self.oldest_restorable_ms)
            ),
            "last_error": self.last_error,
        }

    # -- running --------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._tail.close()

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                if not self._started:
                    await self.begin()
                shipped = await self.ship_once()
                self.last_error = None
                failures = 0
            except (ArchiveError, OSError, JournalError, ValueError) as exc:
                self.last_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                log.error("archive shipping failed (will retry): %s", self.last_error)
                await asyncio.sleep(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])
                failures += 1
                continue
            if not shipped:
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), IDLE_SECONDS)

    async def begin(self) -> None:
        """Read what the archive holds; for an empty one, ship a first snapshot (its
        payloads first)."""
        state = await self._run_blocking(read_state, self.target)
        server_id = self._source.server_id()
        if state.manifest is not None and state.manifest.get("server_id") not in (None, server_id):
            raise ArchiveError(
                f"{self.target.description} holds the archive of server "
                f"{state.manifest.get('server_id')}, not of this one ({server_id})"
            )
        end = state.end
        durable = await self._source.durable()
        if end is not None and end <= durable:
            await self._run_blocking(self._check_same_history, state, end)
        if end is not None and end > durable:
            raise ArchiveError(
                f"the archive {self.target.description} is ahead of this data dir (record "
                f"{end} > {durable}): it was written by a newer copy of this server; restore "
                "from it, or point SERVICE_ARCHIVE elsewhere"
            )
        if end is not None and await self._can_follow(end, durable):
            self.archived_sequence = end
        else:
            if end is not None:
                self.rebased = True
                log.error(
                    "the archive ends at record %s, which this journal no longer holds: "
                    "starting it again from a new snapshot",
                    end,
                )
            self.archived_sequence = await self._ship_base()
            state = await self._run_blocking(read_state, self.target)
        self._shipped_snapshots = {snapshot.sequence for snapshot in state.snapshots}
        self._base = state.base or 0
        self._note_oldest(state)
        await self._run_blocking(self._write_manifest_and_secret, server_id)
        if self._on_begun is not None:
            await self._on_begun(self.archived_sequence + 1, durable)
        self._started = True

    def _check_same_history(self, state: ArchiveState, end: int) -> None:
        """Refuse an archive whose last record is not this journal's record of the same
        sequence: another server's history (a second primary pointed at the same place), to
        which this one's records must never be appended. Where this journal no longer holds
        that record (a snapshot covered it), there is nothing to compare. Blocking."""
        try:
            mine = self._tail.read(end, end)
        except RecordsGoneError:
            return
        holder = next((each for each in state.records if each.last == end), None)
        if not mine or mine[0].sequence != end or holder is None:
            return  # (an archive that ends at its base snapshot: no record to compare)
        if not self.target.read(holder.name).endswith(mine[0].frame):
            raise ArchiveError(
                f"{self.target.description} holds another history: its record {end} is not "
                "this server's record of that sequence (another primary archives there); "
                "point SERVICE_ARCHIVE elsewhere"
            )

    async def _can_follow(self, end: int, durable: int) -> bool:
        if end >= durable:
            return True
        try:
            await self._run_blocking(self._tail.read, end + 1, end + 1)
        except RecordsGoneError:
            return False
        return True

    async def _ship_base(self) -> int:
        sequence = await self._source.snapshot_now()
        if sequence == 0:
            return 0
        await self._run_blocking(self._ship_snapshot_with_payloads, sequence)
        return sequence

    def _write_manifest_and_secret(self, server_id: str | None) -> None:
        manifest = {"format": layout.FORMAT, "server_id": server_id}
        self.target.put_bytes(layout.MANIFEST, json.dumps(manifest).encode())
        fs = self._source.fs
        if fs.exists(self._source.secret_path):
            source = fs.open_read(self._source.secret_path)
            try:
                secret = source.read()
            finally:
                source.close()
            self.target.put_bytes(layout.SECRET, secret)

    def _note_oldest(self, state: ArchiveState) -> None:
        if state.snapshots:
            self.oldest_restorable_ms = state.snapshots[0].created_ms
        elif self.oldest_restorable_ms is None:
            self.oldest_restorable_ms = int(self._clock() * 1000)

    async def ship_once(self) -> bool:
        """Ship what was committed since the last call; True if anything was shipped."""
        durable = await self._source.durable()
        shipped = False
        if durable > self.archived_sequence:
            reached = await self._run_blocking(
                self._ship_records, self.archived_sequence + 1, durable
            )
            self.shipped_records += reached - self.archived_sequence
            self.archived_sequence = reached
            shipped = True
            if self._on_advance is not None:
                self._on_advance()
        for sequence, path in await self._run_blocking(
            list_snapshots, self._source.fs, self._source.journal_dir
        ):
            # A snapshot older than the archive's base has no payloads here: never shipped.
            due = self._base <= sequence <= self.archived_sequence
            due = due and sequence not in self._shipped_snapshots
            if due and await self._run_blocking(self._ship_snapshot_file, sequence, path):
                shipped = True
        if self._clock() - self._last_prune >= PRUNE_SECONDS:
            self._last_prune = self._clock()
            await self.prune()
        return shipped

    # -- blocking work (executor) --------------------------------------------------------

    def _ship_records(self, first: int, last: int) -> int:
        frames = self._tail.read(first, last, RECORDS_FILE_BYTES)
        refs = [ref for frame in frames if (ref := record_payload(frame.event())) is not None]
        self._ship_payloads(refs)
        crashpoints.hit("archive.payloads_shipped")
        end = frames[-1].sequence
        self.target.put_bytes(
            layout.records_name(first, end), b"".join(frame.frame for frame in frames)
        )
        crashpoints.hit("archive.records_shipped")
        return end

    def _ship_payloads(self, refs: list[PayloadRef]) -> None:
        files: list[str] = []
        for ref in refs:
            located = parse_direct_id(ref.payload_id)
            if located is None:
                path = self._layout.payload_path(ref.payload_id)
                if not self._source.fs.exists(path):
                    self._mark_lost(ref)
                    continue
                files.append(os.path.relpath(path, self._source.data_dir))
            else:
                upload_id, offset, size = located
                try:
                    region = read_region(
                        self._source.fs, self._source.direct_file(upload_id), offset, size
                    )
                    data = b"".join(bytes(window) for window in region)
                except FileNotFoundError:
                    # A part written in place whose upload closed (completed or aborted)
                    # before it was shipped: its file is gone, and with it the part.
                    self._mark_lost(ref)
                    continue
                if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
                    # The same part number uploaded again (or being uploaded) wrote over
                    # this region: the bytes this record names are gone, never archived
                    # under its id as if they were its own.
                    self._mark_lost(ref)
                    continue
                self.target.put_bytes(layout.payload_name(ref.payload_id), data)
            if len(files) >= PAYLOAD_BATCH:
                self.target.put_files(self._source.data_dir, files)
                files = []
        self.target.put_files(self._source.data_dir, files)

    def _mark_lost(self, ref: PayloadRef) -> None:
        """The primary no longer has a payload a record to ship names: lost to a balanced
        power cut (then quarantined here too), a record that was refused and whose payload
        went with it, or a part written in place of an upload that closed before the part
        was shipped or whose region the same part number, sent again, wrote over. The
        archive says so, and a restore quarantines it."""
        log.warning("payload %s is not in the data dir: archived as lost", ref.payload_id)
        reason = {"payload_id": ref.payload_id, "size": ref.size, "sha256": ref.sha256}
        self.target.put_bytes(layout.lost_name(ref.payload_id), json.dumps(reason).encode())

    def _ship_snapshot_with_payloads(self, sequence: int) -> None:
        path = os.path.join(self._source.journal_dir, f"snapshot-{sequence:020d}.snap")
        snapshot = load_snapshot(self._source.fs, path, sequence, verify=False)
        if snapshot is None:
            raise ArchiveError(f"snapshot {sequence} could not be read")
        for_each_snapshot_payload_batch(snapshot, PAYLOAD_BATCH, self._ship_payloads)
        self._ship_snapshot_file(sequence, path)

    def _ship_snapshot_file(self, sequence: int, path: str) -> bool:
        """Copy one journal snapshot file; False if the journal removed it meanwhile."""
        try:
            snapshot = load_snapshot(self._source.fs, path, sequence, verify=False)
        except FileNotFoundError:
            return False
        if snapshot is None:
            return False
        name = snapshot_file_name(sequence, int(snapshot.created_at * 1000))
        try:
            self.target.put_file(path, name)
        except FileNotFoundError:
            return False
        self._shipped_snapshots.add(sequence)
        return True

    # -- retention ------------------------------------------------------------------------

    async def prune(self) -> None:
        """Drop what no point of the retention window needs (module docstring)."""
        await self._run_blocking(self._prune, self._clock())

    def _prune(self, now: float) -> None:
        state = read_state(self.target)
        window_start_ms = int((now - self._retention_seconds) * 1000)
        older = [s for s in state.snapshots if s.created_ms <= window_start_ms]
        if not older:
            self._note_oldest(state)
            return
        base = older[-1]
        doomed = [s.name for s in state.snapshots if s.sequence < base.sequence]
        doomed += [r.name for r in state.records if r.last <= base.sequence]
        if not doomed:
            self._note_oldest(state)
            return
        after = [r for r in state.records if r.last > base.sequence]
        needed = self._needed_payloads(base, after)
        for entry in self.target.list(layout.PAYLOADS):
            payload_id = entry.name.rsplit("/", 1)[-1]
            if payload_id not in needed:
                doomed.append(entry.name)
        self.target.delete(doomed)
        log.info("archive retention removed %d files before record %d", len(doomed), base.sequence)
        self.oldest_restorable_ms = base.created_ms

    def _needed_payloads(
        self, base: ArchivedSnapshot, records: list[layout.RecordsFile]
    ) -> set[str]:
        needed: set[str] = set()
        with tempfile.TemporaryDirectory(prefix="archive-prune-") as scratch:
            local = os.path.join(scratch, "snapshot")
            self.target.fetch(base.name, local)
            for_each_local_snapshot_payload(
                local, base.sequence, lambda ref: needed.add(ref.payload_id)
            )
        for each in records:
            frames = split_frames(
                self.target.read(each.name), each.first, self._source.max_record_bytes
            )
            for frame in frames:
                ref = record_payload(frame.event())
                if ref is not None:
                    needed.add(ref.payload_id)
        return needed


def for_each_local_snapshot_payload(
    path: str, sequence: int, on_ref: Callable[[PayloadRef], None], fs: FileSystem | None = None
) -> None:
    """``for_each_snapshot_payload`` of a snapshot file on ``fs`` (the real disk), crc checked."""
    snapshot = load_snapshot(fs or RealFileSystem(), path, sequence, verify=False)
    if snapshot is None:
        raise ArchiveError(f"snapshot {sequence} in the archive is damaged (bad header)")
    reader = SnapshotReader(snapshot)
    try:
        for_each_snapshot_payload(reader, on_ref)
        reader.check()
    except (SnapshotDamagedError, SnapshotFormatError) as exc:
        raise ArchiveError(f"snapshot {sequence} in the archive is damaged: {exc}") from None
    finally:
        reader.close()
