"""The committer of the process that writes the journal: append, apply, and the journal's care.

``JournalCommitter`` (``service.engine.core.Committer``) owns the journal, the persistent
index and the applier (``service.engine.applier``) of this data dir. A commit appends the
event; the journal calls the listener for every record once it is durable, in sequence
order, before the appending caller resumes, and the applier applies it to the state
(``OwnState``), the index and the event feed; the same applier runs at startup replay
(``service.engine.recovery``). Orphans left by a crash are collected after the start
(nothing is in flight then) and by the periodic sweep (with a grace period for in-flight
PUTs).

A journal write or fsync error is fail-stop: the committer turns read-only, every later
mutation raises ``ReadOnlyError`` (with a retry hint, which the HTTP layer sends as 503
with Retry-After; ``service.engine.errors``), and the next start's replay decides whether
the failed record survived. Until then nothing is deleted (no GC, no release): the failed
record may survive and name its payload.

Balanced durability adds two rules (``docs/durability.md``): a payload file is unlinked only
once the record that released it is durable (releases and the GC sync the journal first),
and the payloads a snapshot covers are fsynced before it is written; every
``CHECKPOINT_SECONDS`` a checkpoint fsyncs those named since the last one and records the
sequence they reach. After an unclean start the payloads named by records after that
checkpoint (and the snapshot) are verified and bad ones are quarantined
(``service.storage.integrity``).

Thread-safety: event-loop thread only; blocking work goes to the engine's executor.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fsseam import crashpoints
from fsseam.fs import FileSystem, RealFileSystem
from journal import (
    Journal,
    JournalClosedError,
    JournalError,
    JournalFailedError,
    JournalStats,
    Record,
)
from service.config import Config
from service.engine.applier import Applier
from service.engine.core import Engine, OwnState
from service.engine.errors import (
    CommitFailedError,
    NotServingError,
    ReadOnlyError,
    StorageFullError,
)
from service.engine.holds import ReaderHolds
from service.engine.recovery import PayloadRefs, Recovered, open_and_replay
from service.events.feed import FLUSH_SECONDS
from service.index.lmdb_index import LmdbObjectIndex
from service.index.opening import close_index
from service.index.protocol import IndexFactory, PersistentIndex
from service.meta import Outcome, freeze, iter_snapshot, records

log = logging.getLogger("service.engine")


CHECKPOINT_SECONDS = 5.0
"""Balanced: how often the payloads written since the last checkpoint are fsynced."""


class JournalCommitter:
    """Commits to this process's journal and applies into ``own``; see the module
    docstring."""

    engine: Engine
    """Set at ``start``."""
    applier: Applier
    """Set at ``start``, once replay made it."""

    def __init__(self, own: OwnState, index_factory: IndexFactory | None = None) -> None:
        """``index_factory``: the persistent index (None: LMDB on a real disk, none on
        another file system, whose versions then stay in memory; crash tests pass a
        simulated one)."""
        self.own = own
        self._index_factory = index_factory
        self.journal: Journal | None = None
        """Open from ``start`` on."""
        self.index: PersistentIndex | None = None
        """The persistent object index (``service.index.opening``), opened at ``start``."""
        self.replay_seconds = 0.0
        self._read_only_reason: str | None = None
        self._outcomes: dict[int, Outcome] = {}
        self._records_since_snapshot = 0
        self._last_snapshot_sequence = 0
        self._snapshot_lock = asyncio.Lock()
        self._unsynced_payloads: set[str] = set()
        """Balanced: payloads named by records since the last checkpoint or snapshot (fsynced
        by the next one)."""
        self._release_queue: list[str] = []
        self._release_task: asyncio.Task[None] | None = None
        self._removals: set[asyncio.Future[int]] = set()
        self.start_sweep: asyncio.Task[None] | None = None
        """The pass that removes the orphans a crash left, started after the start."""
        self.startup_gc_grace = 0.0
        """Age below which the start's orphan sweep keeps a payload even if older than the
        start: 0 when nothing was in flight at the start; the GC's grace when worker
        processes may be promoting payloads (the writer's role sets it)."""
        self.batch_observer: Callable[[int, float], None] | None = None
        """Told of every group commit (records, seconds its write and fsync took)."""
        self.gc_observer: Callable[[Literal["payload", "staging"], int], None] | None = None
        """Told of every finished sweep (kind, files removed), for the metrics."""
        self.snapshot_observer: Callable[[float], None] | None = None
        """Told how long each written snapshot took (seconds), for the metrics."""
        self.holds = ReaderHolds()
        """What the journal's readers (the archive) still need (``service.engine.holds``):
        segments the journal keeps, released payloads it removes only once they are passed."""
        self.on_batch: list[Callable[[], None]] = []
        """Called after each group commit (a reader of the journal wakes)."""
        self.confirmation: Callable[[int], Awaitable[None]] | None = None
        """Sync replication: awaited with each committed record's sequence before the commit
        returns (``service.replication.sync``); it raises when no standby confirmed in time."""

    @property
    def read_only_reason(self) -> str | None:
        return self._read_only_reason

    @property
    def _strict(self) -> bool:
        return self.engine.config.durability == "strict"

    def last_sequence(self) -> int:
        return self.journal.stats().last_sequence if self.journal is not None else 0

    def journal_stats(self) -> JournalStats | None:
        return self.journal.stats() if self.journal is not None else None

    async def sync(self) -> None:
        """Balanced: sync the journal (strict: every commit was synced already)."""
        if not self._strict and self.journal is not None:
            await self.journal.sync()

    # -- lifecycle --------------------------------------------------------------------

    async def start(self, engine: Engine) -> None:
        """Open and replay the journal, clean up after a crash, start background work."""
        self.engine = engine
        config = engine.config
        if self._index_factory is None and isinstance(engine.fs, RealFileSystem):
            self._index_factory = LmdbObjectIndex
        started = time.perf_counter()
        recovered = await engine.run_blocking(self._open_and_replay, config, engine.fs)
        journal, self.applier = recovered.journal, recovered.applier
        self.own.state = recovered.applier.state
        self.journal = journal
        self.replay_seconds = time.perf_counter() - started
        self._last_snapshot_sequence = journal.stats().last_snapshot_sequence
        journal.listener = self._on_durable
        journal.batch_listener = self._on_batch_durable
        journal.batch_observer = self.batch_observer
        journal.retain_from = self.holds.retain_from
        crashpoints.hit("engine.after_replay")
        quarantined = engine.quarantined
        quarantined.replace(await engine.run_blocking(engine.integrity.quarantined_ids))
        await engine.run_blocking(engine.integrity.finish_quarantine, set(quarantined))
        recent = recovered.recent
        if recent is not None:
            state = self.own.state
            recent = {p: facts for p, facts in recent.items() if state.holds_payload(p)}
            quarantined.update(await engine.run_blocking(self._verify_recent, recent))
        removed_staging = await engine.run_blocking(engine.store.sweep_staging, config.staging_ttl)
        self._observe_gc("staging", removed_staging)
        await self._release_quarantine()
        if not self._strict:
            # Everything named so far is on disk: verified and synced just now, or covered
            # by the last checkpoint, the snapshot or a clean stop.
            await engine.run_blocking(engine.integrity.mark_unsynced, journal.stats().last_sequence)
            engine.add_background_job(CHECKPOINT_SECONDS, self.checkpoint)
        elif recent is not None:
            await engine.run_blocking(engine.integrity.clear_unsynced_mark)
        log.info(
            "replayed journal to sequence %d in %.3f s; removed %d stale staging files",
            journal.stats().last_sequence,
            self.replay_seconds,
            removed_staging,
        )
        # Orphans a crash left: a walk of every payload file, so after the start (it
        # would scale with the data), collecting only files older than this start.
        self.start_sweep = asyncio.create_task(self._sweep_after_start(engine.clock()))
        engine.add_background_task(self.start_sweep)
        engine.add_background_job(config.gc_interval, self.collect_garbage)
        engine.add_background_job(config.snapshot_interval, self.maybe_snapshot)
        engine.add_background_job(FLUSH_SECONDS, lambda: engine.events.flush(engine.run_blocking))

    def _open_and_replay(self, config: Config, fs: FileSystem) -> Recovered:
        """``service.engine.recovery``; the index is kept as soon as it is open."""

        def keep(index: PersistentIndex) -> None:
            self.index = index

        engine = self.engine
        return open_and_replay(
            config, fs, engine.events, engine.integrity, self._index_factory, keep
        )

    def _verify_recent(self, recent: PayloadRefs) -> set[str]:
        """The (referenced) payloads in ``recent`` whose bytes are not what their record
        says, moved aside; the good ones fsynced (the next snapshot will cover them).
        Blocking."""
        engine = self.engine
        bad: set[str] = set()
        for payload_id, (size, sha256) in recent.items():
            if payload_id in engine.quarantined:
                continue
            if not engine.store.verify(payload_id, size, sha256):
                log.error("payload %s failed verification; quarantined", payload_id)
                engine.integrity.quarantine(payload_id)
                bad.add(payload_id)
        engine.integrity.sync_payloads(p for p in recent if p not in bad)
        return bad

    async def _sweep_after_start(self, started: float) -> None:
        """Remove the payload files no record references that are older than the start
        (nothing was in flight then; a newer file may be a PUT's between promote and
        commit)."""
        try:
            await self.holds.settled()  # a reader's unshipped payloads may be orphans now
            # A file newer than the start is kept (``now - mtime < grace``), and so is one
            # whose mtime the kernel's coarse clock put just before the start (a PUT right
            # after it, between promote and commit, was collected). With no time gone by (a
            # simulated clock, exact mtimes) a grace of 0 collects every unreferenced file.
            slack = self.engine.fs.timestamp_slack
            grace = max(self.engine.clock() - started + slack, self.startup_gc_grace)
            await self._collect_payloads(grace)
        except (JournalError, OSError) as exc:
            log.error("the sweep of orphan payloads after the start failed: %s", exc)

    async def _release_quarantine(self) -> None:
        """Forget quarantined payloads nothing references any more."""
        engine, state = self.engine, self.own.state
        unreferenced = [p for p in engine.quarantined if not state.holds_payload(p)]
        if unreferenced:
            await engine.run_blocking(engine.integrity.release_quarantined, unreferenced)
            engine.quarantined.forget(unreferenced)

    async def stop(self) -> None:
        """Write a final snapshot and close the journal, the event log and the index."""
        await self.flush_releases()
        journal = self.journal
        if journal is None:
            return
        engine = self.engine
        clean = not journal.failed
        if clean:
            try:
                await self.snapshot()
            except (JournalError, OSError):
                log.exception("final snapshot failed")
                clean = False
        await journal.close()
        try:
            await engine.events.flush(engine.run_blocking, sync=True)
        except OSError:
            log.exception("writing the event log failed (the next start derives it again)")
        engine.events.close()
        if self.index is not None:
            index, self.index = self.index, None
            await engine.run_blocking(close_index, engine.fs, engine.config.data_dir, index)
        if clean and not self._strict:
            # The final snapshot fsynced every payload it covers: the next start is clean.
            await engine.run_blocking(engine.integrity.clear_unsynced_mark)

    # -- commit -----------------------------------------------------------------------

    def ensure_writable(self) -> None:
        if self._read_only_reason is not None:
            raise ReadOnlyError()

    async def commit(self, event: dict[str, Any]) -> Outcome:
        """Append ``event`` to the journal and return the outcome of applying it."""
        self.ensure_writable()
        return await self.append(event)

    async def append(self, event: dict[str, Any]) -> Outcome:
        """``commit`` past the writability check: a standby's committer, which refuses every
        mutation, appends the primary's records through here
        (``service.replication.committer``)."""
        if self._read_only_reason is not None:
            raise ReadOnlyError()
        journal = self.journal
        if journal is None:
            raise NotServingError("the server is starting", retry_after=1)
        try:
            sequence = await journal.append(event)
        except JournalClosedError:
            raise NotServingError("the server is shutting down", retry_after=5) from None
        except JournalFailedError as exc:
            self._enter_read_only(f"journal write failed: {exc}")
            if _disk_full(exc):
                raise StorageFullError(str(exc)) from None
            raise CommitFailedError(str(exc)) from None
        outcome = self._outcomes.pop(sequence)
        self._records_since_snapshot += 1
        if self._records_since_snapshot >= self.engine.config.snapshot_every:
            self._records_since_snapshot = 0
            asyncio.get_running_loop().create_task(self.maybe_snapshot())
        if self.confirmation is not None:
            await self.confirmation(sequence)
        return outcome

    def _on_durable(self, record: Record) -> None:
        event = record.event
        outcome = self.applier.apply(record.sequence, event)
        self._outcomes[record.sequence] = outcome
        if not self._strict and outcome.ok and "payload_id" in event:
            self._unsynced_payloads.add(event["payload_id"])
        crashpoints.hit("engine.after_apply")
        released = outcome.released_payloads
        if released:
            if event["type"] == records.UPLOAD_COMPLETED:
                crashpoints.hit("multipart.before_parts_removed")
            self.engine.release_payloads(self.holds.release(record.sequence, released))

    def _on_batch_durable(self, sequence: int) -> None:
        """One index transaction per journal batch, with the batch's last sequence."""
        self.applier.end_batch(sequence)
        for wake in self.on_batch:
            wake()

    def _enter_read_only(self, reason: str) -> None:
        if self._read_only_reason is None:
            log.error("entering read-only mode: %s", reason)
            self._read_only_reason = reason

    def release(self, payload_ids: list[str]) -> None:
        """Remove payload files nothing references any more, off the event loop.

        Strict: at once (the releasing record is durable). Balanced: after a journal sync,
        or a power loss could revive the record's predecessor pointing at a deleted file.
        """
        ids = payload_ids
        crashpoints.hit("engine.before_release")
        loop = asyncio.get_running_loop()
        if self._strict:
            future = loop.run_in_executor(self.engine.executor, self.engine.store.remove, ids)
            self._removals.add(future)
            future.add_done_callback(self._removal_done)
            return
        self._release_queue.extend(ids)
        if self._release_task is None or self._release_task.done():
            self._release_task = loop.create_task(self._release_after_sync())

    async def _release_after_sync(self) -> None:
        """Balanced: sync the journal once for everything queued, then unlink it."""
        while self._release_queue and self.journal is not None:
            ids, self._release_queue = self._release_queue, []
            try:
                await self.journal.sync()
            except JournalError as exc:
                # The records stay unsynced: keep the files; the next start's GC decides.
                self._enter_read_only(f"journal sync failed: {exc}")
                return
            try:
                await self.engine.run_blocking(self.engine.store.remove, ids)
            except OSError as exc:
                log.error("removing released payloads failed (the GC will retry): %s", exc)

    def _removal_done(self, future: asyncio.Future[int]) -> None:
        self._removals.discard(future)
        exc = future.exception()
        if exc is not None:
            log.error("removing released payloads failed (the GC will retry): %s", exc)

    async def flush_releases(self) -> None:
        """Wait until every release started so far has removed its files (or failed)."""
        pending: list[asyncio.Future[Any]] = list(self._removals)
        if self._release_task is not None:
            pending.append(self._release_task)
        await asyncio.gather(*pending, return_exceptions=True)

    # -- snapshots and GC -------------------------------------------------------------

    async def maybe_snapshot(self) -> None:
        """Snapshot when records were appended since the last one."""
        if self.journal is None or self.journal.failed:
            return
        if self.journal.stats().last_sequence > self._last_snapshot_sequence:
            await self.snapshot()

    async def snapshot(self) -> None:
        """Write the state at the last applied sequence as a snapshot."""
        journal = self.journal
        if journal is None:
            return
        engine = self.engine
        async with self._snapshot_lock:
            sequence = journal.stats().last_sequence
            if sequence <= self._last_snapshot_sequence:
                return
            started = time.perf_counter()
            # The image and the index's read transaction are taken together, on the loop,
            # between batches: both are the state at ``sequence``. The objects are then
            # encoded from the read transaction on a thread, never decoded into memory.
            index = self.index
            if index is None:
                frozen, stored = freeze(self.own.state), None
            else:
                frozen, stored = self.own.state.freeze(objects=False), index.reader()
            # Balanced: what the snapshot covers must be on disk before it replaces the log
            # (only records after the newest snapshot are verified after a power loss).
            unsynced, self._unsynced_payloads = self._unsynced_payloads, set()
            try:
                if unsynced:
                    await engine.run_blocking(engine.integrity.sync_payloads, unsynced)
                # The events up to ``sequence`` must be on disk before the records that
                # would derive them again may go (``service.events.feed``).
                await engine.events.flush(engine.run_blocking, sync=True)
                # Encoded as the journal writes it, chunk by chunk, on its thread.
                crc = await journal.write_snapshot(sequence, iter_snapshot(frozen, stored))
                if index is not None and self.index is index:
                    # So that a start resuming at this snapshot knows it is this index's.
                    index.record_snapshot(sequence, crc)
            except BaseException as exc:
                self._unsynced_payloads |= unsynced
                if isinstance(exc, JournalFailedError):
                    self._enter_read_only(f"journal sync failed: {exc}")
                raise
            finally:
                if stored is not None:
                    stored.close()
            self._last_snapshot_sequence = sequence
            if self.snapshot_observer is not None:
                self.snapshot_observer(time.perf_counter() - started)

    async def checkpoint(self) -> None:
        """Balanced: fsync the payloads named since the last checkpoint, then record in the
        marker the sequence they reach, so that a start after a power loss verifies only the
        payloads named after it (seconds of writes, not everything since the snapshot)."""
        journal = self.journal
        if self._strict or journal is None or journal.failed or not self._unsynced_payloads:
            return
        engine = self.engine
        async with self._snapshot_lock:  # a snapshot syncs the same set
            sequence = journal.stats().last_sequence
            unsynced, self._unsynced_payloads = self._unsynced_payloads, set()
            try:
                await engine.run_blocking(engine.integrity.sync_payloads, unsynced)
                await engine.run_blocking(engine.integrity.mark_unsynced, sequence)
            except BaseException:
                self._unsynced_payloads |= unsynced
                raise

    async def collect_garbage(self) -> None:
        """Delete payload files no record references, older than the grace period.

        Not while read-only: the in-memory state then lags the log (a failed record may
        survive the restart and name a file this pass would delete).
        """
        if self.journal is None or self._read_only_reason is not None:
            return
        engine = self.engine
        await self._collect_payloads(engine.config.gc_grace)
        removed = await engine.run_blocking(engine.store.sweep_staging, engine.config.staging_ttl)
        self._observe_gc("staging", removed)

    async def _collect_payloads(self, grace: float) -> None:
        """One pass over the payload files: remove those no record holds, older than
        ``grace`` seconds. The holder is taken first (what is held now), then the journal
        is synced, so every record that dropped a reference is durable before the file
        goes; a payload committed meanwhile is younger than the grace."""
        journal = self.journal
        if journal is None or self._read_only_reason is not None:
            return
        if self.holds.floor() == 0:
            return  # a reader's position is not known yet: any orphan may be its
        engine, state = self.engine, self.own.state
        holder = self.holds.also_holding(state.payload_holder())
        open_uploads = {session.upload_id for session in state.uploads()}
        try:
            if not self._strict:
                try:
                    await journal.sync()
                except JournalFailedError as exc:
                    self._enter_read_only(f"journal sync failed: {exc}")
                    raise
            gc = await engine.run_blocking(engine.store.collect_garbage, holder, grace)
        finally:
            holder.close()
        # Files of multipart parts written in place whose upload closed before the sync
        # (a crash between the closing record and the removal; ``storage.direct``).
        await engine.run_blocking(engine.store.sweep_direct, open_uploads, grace)
        self._observe_gc("payload", gc.removed)
        await self._release_quarantine()

    async def clear_stale_readers(self) -> None:
        """Free the index's reader slots of processes that died mid-read (serving processes
        read the index too: ``service.procs.shared_state``)."""
        index = self.index
        if index is not None:
            cleared = await self.engine.run_blocking(index.clear_stale_readers)
            if cleared:
                log.info("cleared %d stale index reader slots", cleared)

    def _observe_gc(self, kind: Literal["payload", "staging"], removed: int) -> None:
        if self.gc_observer is not None:
            self.gc_observer(kind, removed)


def _disk_full(exc: BaseException) -> bool:
    """Whether ENOSPC is somewhere in ``exc``'s chain of causes."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
            return True
        cause = cause.__cause__
    return False


def journaled_engine(
    config: Config,
    *,
    fs: FileSystem | None = None,
    clock: Callable[[], float] = time.time,
    index_factory: IndexFactory | None = None,
) -> tuple[Engine, JournalCommitter]:
    """An engine that writes its own journal (``JournalCommitter`` over ``OwnState``), and its
    committer: what tools, benches and tests run in-process (a server's roles assemble
    theirs in ``service.roles``)."""
    own = OwnState()
    committer = JournalCommitter(own, index_factory)
    return Engine(config, committer, own, fs=fs, clock=clock), committer
