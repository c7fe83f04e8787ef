"""The engine: journal + in-memory state + payload store, and the commit that binds them.

State changes only by applying a committed event: the journal calls ``_on_durable`` for
every record once it is durable, in sequence order, before the appending caller resumes;
the same ``MetaState.apply`` runs at startup replay. Payload files an event released
(overwritten or deleted objects, replaced parts) are removed after the commit, off the
event loop. Orphans left by a crash are collected at startup (nothing is in flight then)
and by the periodic sweep (with a grace period for in-flight PUTs).

A journal write or fsync error is fail-stop: the engine turns read-only, every later
mutation answers 503 ServiceUnavailable with Retry-After, and the next start's replay
decides whether the failed record survived. Until then nothing is deleted (no GC, no
release): the failed record may survive and name its payload.

Balanced durability adds two rules (``docs/durability.md``): a payload file is unlinked only
once the record that released it is durable (releases and the GC sync the journal first),
and the payloads a snapshot covers are fsynced before it is written. After an unclean
start the payloads named by records after the snapshot are verified and bad ones are
quarantined (``service.storage.integrity``); ``quarantined`` lists them for the readers.

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
from typing import Any, TypeVar

from fsseam import crashpoints
from fsseam.fs import FileSystem, RealFileSystem, make_dirs_durably
from journal import (
    Journal,
    JournalClosedError,
    JournalError,
    JournalFailedError,
    JournalOptions,
    Record,
)
from service.api_errors import ApiError
from service.config import Config
from service.events_feed import FLUSH_SECONDS, EventFeed
from service.meta import MetaState, Outcome, decode_snapshot, encode_snapshot, events, freeze
from service.storage import PayloadCache, PayloadIntegrity, PayloadStore

log = logging.getLogger("service.engine")

T = TypeVar("T")
PayloadRefs = dict[str, tuple[int, str]]
"""payload id -> (size, sha256) as the records that reference it state them."""

READ_ONLY_RETRY_AFTER = "30"


class Engine:
    """Owns the journal, the metadata state and the payload store of one data dir."""

    def __init__(
        self,
        config: Config,
        *,
        fs: FileSystem | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``fs`` and ``clock`` default to the real ones; crash tests pass a
        ``SimFileSystem`` and its manual clock, which the payload store's grace periods and
        staging TTL must read so that a test can age files."""
        self.config = config
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
        self.integrity = PayloadIntegrity(self.fs, self.store.layout)
        self.payload_cache = PayloadCache(config.small_object_cache_bytes)
        """Bodies of small payloads for GET (event-loop thread; see ``storage.cache``)."""
        self.quarantined: set[str] = set()
        """Payloads that failed verification after an unclean start: never served."""
        self.state = MetaState()
        self.events = EventFeed(
            self.fs,
            os.path.join(config.data_dir, "events"),
            segment_events=config.events_segment_events,
            retention_seconds=config.events_retention_seconds,
            retention_count=config.events_retention_count,
        )
        """Object events derived from the committed records (``service.events_feed``)."""
        self.journal: Journal | None = None
        self.read_only_reason: str | None = None
        self.started_at = time.time()
        self.replay_seconds = 0.0
        self._outcomes: dict[int, Outcome] = {}
        self._records_since_snapshot = 0
        self._last_snapshot_sequence = 0
        self._snapshot_lock = asyncio.Lock()
        self._background: list[asyncio.Task[None]] = []
        self._stopping = False
        self.uploads_completing: set[str] = set()
        """Multipart sessions whose join is running (parts and aborts wait for it)."""
        self._strict = config.durability == "strict"
        self._unsynced_payloads: set[str] = set()
        """Balanced: payloads named by records since the last snapshot (fsynced before it)."""
        self._release_queue: list[str] = []
        self._release_task: asyncio.Task[None] | None = None
        self._removals: set[asyncio.Future[int]] = set()

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Open and replay the journal, clean up after a crash, start background work."""
        started = time.perf_counter()
        journal, self.state, recent = await self.run_blocking(self._open_and_replay)
        self.journal = journal
        self.replay_seconds = time.perf_counter() - started
        self._last_snapshot_sequence = journal.stats().last_snapshot_sequence
        journal.listener = self._on_durable
        crashpoints.hit("engine.after_replay")
        self.quarantined = await self.run_blocking(self.integrity.quarantined_ids)
        await self.run_blocking(self.integrity.finish_quarantine, self.quarantined)
        referenced = self.state.referenced_payloads()
        if recent is not None:
            bad = await self.run_blocking(self._verify_recent, recent, referenced)
            self.quarantined |= bad
        removed_staging = await self.run_blocking(self.store.sweep_staging, self.config.staging_ttl)
        gc = await self.run_blocking(self.store.collect_garbage, referenced.__contains__, 0.0)
        await self._release_quarantine(referenced)
        if not self._strict:
            await self.run_blocking(self.integrity.mark_unsynced)
        elif recent is not None:
            await self.run_blocking(self.integrity.clear_unsynced_mark)
        log.info(
            "replayed journal to sequence %d in %.3f s; removed %d stale staging files "
            "and %d orphan payloads",
            journal.stats().last_sequence,
            self.replay_seconds,
            removed_staging,
            gc.removed,
        )
        self.add_background_job(self.config.gc_interval, self.collect_garbage)
        self.add_background_job(self.config.snapshot_interval, self.maybe_snapshot)
        self.add_background_job(FLUSH_SECONDS, lambda: self.events.flush(self.run_blocking))

    def add_background_job(self, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        """Run ``job`` every ``interval`` seconds until ``stop``; failures are logged."""
        self._background.append(asyncio.create_task(self._every(interval, job)))

    def _open_and_replay(self) -> tuple[Journal, MetaState, PayloadRefs | None]:
        """Open the journal and rebuild the state. After an unclean balanced run, also
        collect the payloads named by the records after the snapshot (they may be torn)."""
        options = JournalOptions(
            durability=self.config.durability,
            segment_bytes=self.config.journal_segment_bytes,
        )
        unclean = self.integrity.unsynced_marked()
        journal = Journal.open(self.config.journal_dir, options, self.fs)
        state = decode_snapshot(journal.snapshot.data) if journal.snapshot else MetaState()
        self.events.open(journal.snapshot.sequence if journal.snapshot else 0)
        recent: PayloadRefs | None = {} if unclean else None
        for record in journal.replay():
            self.events.observe(record.sequence, record.event, state.apply(record.event))
            if recent is not None and "payload_id" in record.event:
                event = record.event
                recent[event["payload_id"]] = (event["size"], event["sha256"])
        return journal, state, recent

    def _verify_recent(self, recent: PayloadRefs, referenced: set[str]) -> set[str]:
        """Quarantine the referenced payloads in ``recent`` whose bytes are not what their
        record says; fsync the good ones (the next snapshot will cover them). Blocking."""
        bad: set[str] = set()
        for payload_id, (size, sha256) in recent.items():
            if payload_id not in referenced or payload_id in self.quarantined:
                continue
            if not self.store.verify(payload_id, size, sha256):
                log.error("payload %s failed verification; quarantined", payload_id)
                self.integrity.quarantine(payload_id)
                bad.add(payload_id)
        self.integrity.sync_payloads(p for p in recent if p in referenced and p not in bad)
        return bad

    async def _release_quarantine(self, referenced: set[str]) -> None:
        """Forget quarantined payloads nothing references any more."""
        unreferenced = [p for p in self.quarantined if p not in referenced]
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
            if clean and not self._strict:
                # The final snapshot fsynced every payload it covers: the next start is clean.
                await self.run_blocking(self.integrity.clear_unsynced_mark)
        self.executor.shutdown(wait=True)

    async def _every(self, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except Exception:
                log.exception("background job %s failed", getattr(job, "__name__", job))

    # -- blocking work ----------------------------------------------------------------

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the engine's thread pool."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    # -- commit -----------------------------------------------------------------------

    def ensure_writable(self) -> None:
        """Refuse a mutation up front while the engine is read-only."""
        if self.read_only_reason is not None:
            raise ApiError(
                "ServiceUnavailable",
                "the server is read-only after a journal fault; restart it to recover",
                headers={"Retry-After": READ_ONLY_RETRY_AFTER},
            )

    async def commit(self, event: dict[str, Any]) -> Outcome:
        """Append ``event`` to the journal and return the outcome of applying it.

        Raises ApiError 503 when read-only, 500 when the commit failed (and the engine
        turns read-only, fail-stop: the record's fate is decided by the next replay).
        """
        self.ensure_writable()
        journal = self.journal
        if journal is None:
            raise ApiError(
                "ServiceUnavailable", "the server is starting", headers={"Retry-After": "1"}
            )
        try:
            sequence = await journal.append(event)
        except JournalClosedError:
            raise ApiError(
                "ServiceUnavailable", "the server is shutting down", headers={"Retry-After": "5"}
            ) from None
        except JournalFailedError as exc:
            self._enter_read_only(f"journal write failed: {exc}")
            if _disk_full(exc):
                raise ApiError(
                    "InsufficientStorage",
                    "the disk is full; the server is now read-only",
                    log_detail=str(exc),
                ) from None
            raise ApiError(
                "InternalError",
                "the metadata commit failed; the server is now read-only",
                log_detail=str(exc),
            ) from None
        outcome = self._outcomes.pop(sequence)
        self._records_since_snapshot += 1
        if self._records_since_snapshot >= self.config.snapshot_every:
            self._records_since_snapshot = 0
            asyncio.get_running_loop().create_task(self.maybe_snapshot())
        return outcome

    def _on_durable(self, record: Record) -> None:
        event = record.event
        outcome = self.state.apply(event)
        self._outcomes[record.sequence] = outcome
        self.events.observe(record.sequence, event, outcome)
        if not self._strict and outcome.ok and "payload_id" in event:
            self._unsynced_payloads.add(event["payload_id"])
        crashpoints.hit("engine.after_apply")
        if outcome.released_payloads:
            if event["type"] == events.UPLOAD_COMPLETED:
                crashpoints.hit("multipart.before_parts_removed")
            self.release_payloads(outcome.released_payloads)

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
            frozen = freeze(self.state)
            # Balanced: what the snapshot covers must be on disk before it replaces the log
            # (only records after the newest snapshot are verified after a power loss).
            unsynced, self._unsynced_payloads = self._unsynced_payloads, set()
            try:
                if unsynced:
                    await self.run_blocking(self.integrity.sync_payloads, unsynced)
                data = await self.run_blocking(encode_snapshot, frozen)
                # The events up to ``sequence`` must be on disk before the records that
                # would derive them again may go (``service.events_feed``).
                await self.events.flush(self.run_blocking, sync=True)
                await journal.write_snapshot(sequence, data)
            except BaseException as exc:
                self._unsynced_payloads |= unsynced
                if isinstance(exc, JournalFailedError):
                    self._enter_read_only(f"journal sync failed: {exc}")
                raise
            self._last_snapshot_sequence = sequence

    async def collect_garbage(self) -> None:
        """Delete payload files no record references, older than the grace period.

        Not while read-only: the in-memory state then lags the log (a failed record may
        survive the restart and name a file this pass would delete).
        """
        journal = self.journal
        if journal is None or self.read_only_reason is not None:
            return
        referenced = self.state.referenced_payloads()
        if not self._strict:
            try:
                # Records that dropped a reference must be durable before the file goes.
                await journal.sync()
            except JournalFailedError as exc:
                self._enter_read_only(f"journal sync failed: {exc}")
                raise
        await self.run_blocking(
            self.store.collect_garbage, referenced.__contains__, self.config.gc_grace
        )
        await self._release_quarantine(referenced)
        await self.run_blocking(self.store.sweep_staging, self.config.staging_ttl)


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
