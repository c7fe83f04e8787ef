"""The engine: journal + in-memory state + payload store, and the commit that binds them.

State changes only by applying a committed event: the journal calls ``_on_durable`` for
every record once it is durable, in sequence order, before the appending caller resumes;
the same ``MetaState.apply`` runs at startup replay. Payload files an event released
(overwritten or deleted objects, replaced parts) are removed after the commit, off the
event loop. Orphans left by a crash are collected at startup (nothing is in flight then)
and by the periodic sweep (with a grace period for in-flight PUTs).

A journal write or fsync error is fail-stop: the engine turns read-only, every later
mutation raises ``ReadOnlyError`` (with a retry hint, which the HTTP layer sends as 503
with Retry-After; ``service.engine.errors``), and the next start's replay decides whether
the failed record survived. Until then nothing is deleted (no GC, no
release): the failed record may survive and name its payload.

Balanced durability adds two rules (``docs/durability.md``): a payload file is unlinked only
once the record that released it is durable (releases and the GC sync the journal first),
and the payloads a snapshot covers are fsynced before it is written; every
``CHECKPOINT_SECONDS`` a checkpoint fsyncs those named since the last one and records the
sequence they reach. After an unclean start the payloads named by records after that
checkpoint (and the snapshot) are verified and bad ones are quarantined
(``service.storage.integrity``); ``quarantined`` lists them for the readers.

Thread-safety: all methods run on the event-loop thread; blocking work goes to
``self.executor``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from fsseam import crashpoints
from fsseam.fs import FileSystem, RealFileSystem, make_dirs_durably
from journal import (
    Journal,
    JournalClosedError,
    JournalError,
    JournalFailedError,
    Record,
)
from service.config import Config
from service.engine.errors import (
    CommitFailedError,
    NotServingError,
    ReadOnlyError,
    StorageFullError,
)
from service.engine.key_usage import KeyUsage
from service.engine.recovery import PayloadRefs, open_and_replay
from service.events.feed import FLUSH_SECONDS, EventFeed
from service.index.lmdb_index import LmdbObjectIndex
from service.index.opening import close_index, event_crc, rest_of
from service.index.protocol import IndexFactory, PersistentIndex
from service.meta import MetaState, Outcome, events, freeze, iter_snapshot
from service.storage import PayloadCache, PayloadIntegrity, PayloadStore
from service.storage.groupsync import GroupSync
from service.storage.hop_batch import HopBatch

log = logging.getLogger("service.engine")

T = TypeVar("T")


class Engine:
    """Owns the journal, the metadata state and the payload store of one data dir."""

    commits_here = True
    """False in a worker of several serving processes, whose commits go to the writer."""

    def __init__(
        self,
        config: Config,
        *,
        fs: FileSystem | None = None,
        clock: Callable[[], float] = time.time,
        index_factory: IndexFactory | None = None,
    ) -> None:
        """``fs`` and ``clock`` default to the real ones; crash tests pass a
        ``SimFileSystem`` and its manual clock, which the payload store's grace periods and
        staging TTL must read so that a test can age files, and a simulated index
        (``index_factory``; LMDB on a real disk; none on another file system: the
        versions then stay in memory)."""
        self.config = config
        self._clock = clock
        self.fs: FileSystem = fs or RealFileSystem()
        # Created durably before anything goes into it: a power loss must not take the
        # data directory's own entry, and with it every synced file inside.
        make_dirs_durably(self.fs, config.data_dir)
        self.executor = ThreadPoolExecutor(
            max_workers=max(8, (os.cpu_count() or 2) * 4), thread_name_prefix="blocking"
        )
        self.store = PayloadStore(
            config.data_dir,
            fs=self.fs,
            durability=config.durability,
            clock=clock,
        )
        strict, fs_sync = config.durability == "strict", self.store.fs_sync
        self.payload_sync = (
            GroupSync(fs_sync, self.run_blocking) if strict and fs_sync is not None else None
        )
        """Strict small PUTs' shared file-system sync (``service.storage.groupsync``)."""
        self.small_writes = HopBatch(self.executor)
        """Small PUTs' file work that never waits for the disk, one hop per loop iteration
        (``service.storage.hop_batch``)."""
        self.integrity = PayloadIntegrity(self.fs, self.store.layout, None if strict else fs_sync)
        self.payload_cache = PayloadCache(config.small_object_cache_bytes)
        """Bodies of small payloads for GET (event-loop thread; see ``storage.cache``)."""
        self.quarantined: set[str] = set()
        """Payloads that failed verification after an unclean start: never served."""
        self.state = MetaState()
        self.index: PersistentIndex | None = None
        """The persistent object index: ``service.index.opening``."""
        if index_factory is None and isinstance(self.fs, RealFileSystem):
            index_factory = LmdbObjectIndex
        self._index_factory = index_factory
        self._rest_changed = False
        self._last_event: dict[str, Any] = {}
        self.key_usage = KeyUsage()
        """Access keys' uses not yet journaled (``service.engine.key_usage``)."""
        self.events = EventFeed(
            self.fs,
            os.path.join(config.data_dir, "events"),
            segment_events=config.events_segment_events,
            retention_seconds=config.events_retention_seconds,
            retention_count=config.events_retention_count,
        )
        """Object events derived from the committed records (``service.events.feed``)."""
        self.journal: Journal | None = None
        self.read_only_reason: str | None = None
        self.started_at = time.time()
        self.replay_seconds = 0.0
        self._outcomes: dict[int, Outcome] = {}
        self._records_since_snapshot = 0
        self._last_snapshot_sequence = 0
        self._snapshot_lock = asyncio.Lock()
        self.gc_observer: Callable[[Literal["payload", "staging"], int], None] | None = None
        """Told of every finished sweep (kind, files removed), for the metrics."""
        self.snapshot_observer: Callable[[float], None] | None = None
        """Told how long each written snapshot took (seconds), for the metrics."""
        self._background: list[asyncio.Task[None]] = []
        self._stopping = False
        self.uploads_completing: set[str] = set()
        """Multipart sessions whose join is running (parts and aborts wait for it)."""
        self._strict = config.durability == "strict"
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
        processes may be promoting payloads (``service.procs``)."""

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Open and replay the journal, clean up after a crash, start background work."""
        started = time.perf_counter()
        journal, self.state, recent = await self.run_blocking(self._open_and_replay)
        self.journal = journal
        self.replay_seconds = time.perf_counter() - started
        self._last_snapshot_sequence = journal.stats().last_snapshot_sequence
        journal.listener = self._on_durable
        journal.batch_listener = self._on_batch_durable
        crashpoints.hit("engine.after_replay")
        self.quarantined = await self.run_blocking(self.integrity.quarantined_ids)
        await self.run_blocking(self.integrity.finish_quarantine, self.quarantined)
        if recent is not None:
            recent = {p: facts for p, facts in recent.items() if self.state.holds_payload(p)}
            bad = await self.run_blocking(self._verify_recent, recent)
            self.quarantined |= bad
        removed_staging = await self.run_blocking(self.store.sweep_staging, self.config.staging_ttl)
        self._observe_gc("staging", removed_staging)
        await self._release_quarantine()
        if not self._strict:
            # Everything named so far is on disk: verified and synced just now, or covered
            # by the last checkpoint, the snapshot or a clean stop.
            await self.run_blocking(self.integrity.mark_unsynced, journal.stats().last_sequence)
            self.add_background_job(CHECKPOINT_SECONDS, self.checkpoint)
        elif recent is not None:
            await self.run_blocking(self.integrity.clear_unsynced_mark)
        log.info(
            "replayed journal to sequence %d in %.3f s; removed %d stale staging files",
            journal.stats().last_sequence,
            self.replay_seconds,
            removed_staging,
        )
        # Orphans a crash left: a walk of every payload file, so after the start (it
        # would scale with the data), collecting only files older than this start.
        self.start_sweep = asyncio.create_task(self._sweep_after_start(self._clock()))
        self._background.append(self.start_sweep)
        self.add_background_job(self.config.gc_interval, self.collect_garbage)
        self.add_background_job(self.config.snapshot_interval, self.maybe_snapshot)
        self.add_background_job(FLUSH_SECONDS, lambda: self.events.flush(self.run_blocking))

    def add_background_job(self, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        """Run ``job`` every ``interval`` seconds until ``stop``; failures are logged."""
        self._background.append(asyncio.create_task(self._every(interval, job)))

    def _open_and_replay(self) -> tuple[Journal, MetaState, PayloadRefs | None]:
        """``service.engine.recovery``; the index is kept as soon as it is open."""

        def keep(index: PersistentIndex) -> None:
            self.index = index

        recovered = open_and_replay(
            self.config, self.fs, self.events, self.integrity, self._index_factory, keep
        )
        return recovered.journal, recovered.state, recovered.recent

    def _verify_recent(self, recent: PayloadRefs) -> set[str]:
        """Quarantine the (referenced) payloads in ``recent`` whose bytes are not what their
        record says; fsync the good ones (the next snapshot will cover them). Blocking."""
        bad: set[str] = set()
        for payload_id, (size, sha256) in recent.items():
            if payload_id in self.quarantined:
                continue
            if not self.store.verify(payload_id, size, sha256):
                log.error("payload %s failed verification; quarantined", payload_id)
                self.integrity.quarantine(payload_id)
                bad.add(payload_id)
        self.integrity.sync_payloads(p for p in recent if p not in bad)
        return bad

    async def _sweep_after_start(self, started: float) -> None:
        """Remove the payload files no record references that are older than the start
        (nothing was in flight then; a newer file may be a PUT's between promote and
        commit)."""
        try:
            # A file newer than the start is kept (``now - mtime < grace``); with no time
            # gone by (a simulated clock), a grace of 0 collects every unreferenced file.
            await self._collect_payloads(max(self._clock() - started, self.startup_gc_grace))
        except (JournalError, OSError) as exc:
            log.error("the sweep of orphan payloads after the start failed: %s", exc)

    async def _release_quarantine(self) -> None:
        """Forget quarantined payloads nothing references any more."""
        unreferenced = [p for p in self.quarantined if not self.state.holds_payload(p)]
        if unreferenced:
            await self.run_blocking(self.integrity.release_quarantined, unreferenced)
            self.quarantined.difference_update(unreferenced)

    async def stop(self) -> None:
        """Stop background work, write a final snapshot and close the journal."""
        self._stopping = True
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.flush_releases()
        if self.journal is not None:
            clean = not self.journal.failed
            if clean:
                try:
                    await self.snapshot()
                except (JournalError, OSError):
                    log.exception("final snapshot failed")
                    clean = False
            await self.journal.close()
            try:
                await self.events.flush(self.run_blocking, sync=True)
            except OSError:
                log.exception("writing the event log failed (the next start derives it again)")
            self.events.close()
            if self.index is not None:
                index, self.index = self.index, None
                await self.run_blocking(close_index, self.fs, self.config.data_dir, index)
            if clean and not self._strict:
                # The final snapshot fsynced every payload it covers: the next start is clean.
                await self.run_blocking(self.integrity.clear_unsynced_mark)
        self.executor.shutdown(wait=True)
        if self.store.fs_sync is not None:
            self.store.fs_sync.close()

    async def _every(self, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except Exception:
                log.exception("background job %s failed", getattr(job, "__name__", job))

    def key_last_used(self, access_key_id: str) -> int | None:
        """The key's last use (ms), journaled or only noted; None if never used."""
        return self.key_usage.last_used(self.state, access_key_id)

    # -- blocking work ----------------------------------------------------------------

    def begin_request(self) -> None:
        """The next read of ``state`` must see every commit answered so far: always so here
        (a worker checks the shared index again)."""

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the engine's thread pool."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    # -- commit -----------------------------------------------------------------------

    def ensure_writable(self) -> None:
        """Refuse a mutation up front while the engine is read-only (``ReadOnlyError``)."""
        if self.read_only_reason is not None:
            raise ReadOnlyError()

    async def commit(self, event: dict[str, Any]) -> Outcome:
        """Append ``event`` to the journal and return the outcome of applying it.

        Raises ``ReadOnlyError`` when read-only, ``NotServingError`` while starting or
        stopping, and ``StorageFullError`` / ``CommitFailedError`` when the commit failed
        (the engine then turns read-only, fail-stop: the record's fate is decided by the
        next replay). See ``service.engine.errors``.
        """
        self.ensure_writable()
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
        if self._records_since_snapshot >= self.config.snapshot_every:
            self._records_since_snapshot = 0
            asyncio.get_running_loop().create_task(self.maybe_snapshot())
        return outcome

    def _on_durable(self, record: Record) -> None:
        event = record.event
        index = self.index
        if index is not None and not index.in_batch:
            index.begin()
        outcome = self.state.apply(event)
        self._last_event = event
        if event.get("type") not in _OBJECT_EVENTS or not outcome.ok:
            self._rest_changed = True
        self._outcomes[record.sequence] = outcome
        self.events.observe(record.sequence, event, outcome)
        if not self._strict and outcome.ok and "payload_id" in event:
            self._unsynced_payloads.add(event["payload_id"])
        crashpoints.hit("engine.after_apply")
        if outcome.released_payloads:
            if event["type"] == events.UPLOAD_COMPLETED:
                crashpoints.hit("multipart.before_parts_removed")
            self.release_payloads(outcome.released_payloads)

    def _on_batch_durable(self, sequence: int) -> None:
        """One index transaction per journal batch, with the batch's last sequence."""
        index = self.index
        if index is not None and index.in_batch:
            rest = rest_of(self.state) if self._rest_changed else None
            self._rest_changed = False
            self.events.write_pending()
            index.commit(sequence, event_crc(self._last_event), rest)

    def _enter_read_only(self, reason: str) -> None:
        if self.read_only_reason is None:
            log.error("entering read-only mode: %s", reason)
            self.read_only_reason = reason

    def release_payloads(self, payload_ids: Iterable[str]) -> None:
        """Remove payload files nothing references any more, off the event loop.

        Strict: at once (the releasing record is durable). Balanced: after a journal sync,
        or a power loss could revive the record's predecessor pointing at a deleted file.
        """
        ids = list(payload_ids)
        if not ids:
            return
        self.payload_cache.discard(ids)
        crashpoints.hit("engine.before_release")
        loop = asyncio.get_running_loop()
        if self._strict:
            future = loop.run_in_executor(self.executor, self.store.remove, ids)
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
                await self.run_blocking(self.store.remove, ids)
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
                frozen, stored = freeze(self.state), None
            else:
                frozen, stored = self.state.freeze(objects=False), index.reader()
            # Balanced: what the snapshot covers must be on disk before it replaces the log
            # (only records after the newest snapshot are verified after a power loss).
            unsynced, self._unsynced_payloads = self._unsynced_payloads, set()
            try:
                if unsynced:
                    await self.run_blocking(self.integrity.sync_payloads, unsynced)
                # The events up to ``sequence`` must be on disk before the records that
                # would derive them again may go (``service.events.feed``).
                await self.events.flush(self.run_blocking, sync=True)
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
        async with self._snapshot_lock:  # a snapshot syncs the same set
            sequence = journal.stats().last_sequence
            unsynced, self._unsynced_payloads = self._unsynced_payloads, set()
            try:
                await self.run_blocking(self.integrity.sync_payloads, unsynced)
                await self.run_blocking(self.integrity.mark_unsynced, sequence)
            except BaseException:
                self._unsynced_payloads |= unsynced
                raise

    async def collect_garbage(self) -> None:
        """Delete payload files no record references, older than the grace period.

        Not while read-only: the in-memory state then lags the log (a failed record may
        survive the restart and name a file this pass would delete).
        """
        if self.journal is None or self.read_only_reason is not None:
            return
        await self._collect_payloads(self.config.gc_grace)
        removed = await self.run_blocking(self.store.sweep_staging, self.config.staging_ttl)
        self._observe_gc("staging", removed)

    async def _collect_payloads(self, grace: float) -> None:
        """One pass over the payload files: remove those no record holds, older than
        ``grace`` seconds. The holder is taken first (what is held now), then the journal
        is synced, so every record that dropped a reference is durable before the file
        goes; a payload committed meanwhile is younger than the grace."""
        journal = self.journal
        if journal is None or self.read_only_reason is not None:
            return
        holder = self.state.payload_holder()
        open_uploads = {session.upload_id for session in self.state.uploads()}
        try:
            if not self._strict:
                try:
                    await journal.sync()
                except JournalFailedError as exc:
                    self._enter_read_only(f"journal sync failed: {exc}")
                    raise
            gc = await self.run_blocking(self.store.collect_garbage, holder, grace)
        finally:
            holder.close()
        # Files of multipart parts written in place whose upload closed before the sync
        # (a crash between the closing record and the removal; ``storage.direct``).
        await self.run_blocking(self.store.sweep_direct, open_uploads, grace)
        self._observe_gc("payload", gc.removed)
        await self._release_quarantine()

    def _observe_gc(self, kind: Literal["payload", "staging"], removed: int) -> None:
        if self.gc_observer is not None:
            self.gc_observer(kind, removed)


CHECKPOINT_SECONDS = 5.0
"""Balanced: how often the payloads written since the last checkpoint are fsynced."""
_OBJECT_EVENTS = frozenset({events.OBJECT_STORED, events.OBJECT_DELETED})
"""Events whose effects lie wholly in the object index (when accepted)."""


def _disk_full(exc: BaseException) -> bool:
    """Whether ENOSPC is somewhere in ``exc``'s chain of causes."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
            return True
        cause = cause.__cause__
    return False


def install_crash_hook(spec: str | None) -> None:
    """Arm a named crash point: ``name`` or ``name:N`` SIGKILLs this process at the Nth hit.

    Test-only (``SERVICE_CRASH_POINT``): lets the crash tests kill a real server at an exact
    point of its write path.
    """
    if not spec:
        return
    name, _, count_text = spec.partition(":")
    remaining = [int(count_text) if count_text else 1]

    def hook(point: str) -> None:
        if point != name:
            return
        remaining[0] -= 1
        if remaining[0] <= 0:
            os.kill(os.getpid(), signal.SIGKILL)

    crashpoints.set_hook(hook)
