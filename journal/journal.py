"""The ``Journal``: an append-only, group-committed, snapshotting event log.

Lifecycle (like etcd's WAL): ``Journal.open`` validates the directory and cuts a torn tail
(``journal.recovery``); ``snapshot`` and ``replay()`` rebuild the caller's state; then
``append`` adds events and ``write_snapshot`` bounds the log; ``close`` flushes.

Group commit: ``append`` encodes the event, assigns the next sequence and queues it. One
flusher task takes everything queued, hands it to the executor as one write (plus one fsync
in strict mode), and while that runs the next batch accumulates. When the batch is done the
flusher calls ``listener`` for each record in sequence order and only then resolves the
waiting appends, so a caller's state is updated before its ``await`` resumes. After each
batch the flusher yields to the event loop once, so the appenders it just woke can queue
their next events into the same batch instead of trickling in one by one.

Fail-stop: if a write or fsync fails, every waiter of that batch and of the queued one gets
``JournalFailedError``, and so does every later append; ``failed`` turns true. The journal
never retries (see ``journal.writer``); reopening recovers from what is on disk.

Thread-safety: ``append``, ``write_snapshot`` and ``close`` must be called on one event
loop (the loop thread); file I/O runs in the executor. ``stats()`` and ``failed`` may be read
from any thread. ``open`` and ``replay()`` are synchronous and block: call them before
serving, or in an executor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from fsseam.fs import FileSystem, RealFileSystem
from journal import framing
from journal.errors import JournalClosedError, JournalError, JournalFailedError
from journal.model import JournalOptions, JournalStats, Record, new_record
from journal.recovery import Recovery, recover
from journal.segment import read_segment
from journal.snapshot import (
    TEMP_SUFFIX,
    Snapshot,
    list_snapshots,
    snapshot_name,
    write_snapshot_file,
)
from journal.writer import LogWriter

logger = logging.getLogger("journal")

_T = TypeVar("_T")
_DEFAULT_OPTIONS = JournalOptions()
_REAL_FS = RealFileSystem()


@dataclass(slots=True)
class _Pending:
    sequence: int
    event: dict[str, Any]
    body: bytes
    future: asyncio.Future[int]


class Journal:
    """An open journal directory. Create with ``Journal.open``."""

    snapshot: Snapshot | None
    """The latest valid snapshot found at open (None for a log without one)."""
    listener: Callable[[Record], None] | None
    """Called on the loop thread for each record once committed (fsynced in strict mode,
    written in balanced mode), in sequence order, before the matching ``append`` resumes, so
    state applied here follows journal order. If it raises, that append raises the same
    exception (the record stays in the log) and the error is logged."""
    batch_observer: Callable[[int, float], None] | None
    """Called on the loop thread after each group commit with (records, seconds the write
    and fsync took), for metrics. It must not raise."""
    retain_from: Callable[[], int] | None
    """The lowest sequence a reader of the log still needs (a shipper reading it back with
    ``journal.tail``, like a Postgres replication slot): a segment holding it or any later
    record is kept when a snapshot would otherwise remove it. Called on the journal's
    thread; it must be cheap and thread-safe (read an int)."""
    batch_listener: Callable[[int], None] | None
    """Called on the loop thread once ``listener`` has seen every record of a group commit,
    with the batch's last sequence, before any of its appends resumes: a state kept in a
    store commits one transaction per batch here. If it raises, the error is logged."""

    def __init__(
        self,
        directory: str,
        options: JournalOptions,
        fs: FileSystem,
        recovery: Recovery,
        writer: LogWriter,
    ) -> None:
        self.snapshot = recovery.snapshot
        self.listener = None
        self.batch_observer = None
        self.batch_listener = None
        self.retain_from = None
        self._directory = directory
        self._options = options
        self._fs = fs
        self._recovery = recovery
        self._writer = writer
        self._owns_executor = options.executor is None
        self._executor: concurrent.futures.Executor = (
            options.executor
            if options.executor is not None
            else concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal")
        )
        base = recovery.snapshot.sequence if recovery.snapshot is not None else 0
        self._base = base
        self._snapshot_sequence = base
        self._snapshot_at = recovery.snapshot.created_at if recovery.snapshot else None
        self._retained: tuple[int, ...] = (base,) if base else ()
        self._snapshot_bytes = recovery.snapshot_bytes
        self._replayed = recovery.last_sequence <= base
        self._replay_seconds: float | None = recovery.seconds if self._replayed else None
        self._next_sequence = recovery.last_sequence + 1
        self._acknowledged = recovery.last_sequence
        self._appends = 0
        self._batches = 0
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._closing = False
        self._snapshot_lock = asyncio.Lock()

    @classmethod
    def open(
        cls,
        directory: str,
        options: JournalOptions = _DEFAULT_OPTIONS,
        fs: FileSystem = _REAL_FS,
    ) -> Journal:
        """Open (creating if missing) and validate a journal directory.

        Blocks on file I/O. Raises ``JournalCorruptionError`` when records known durable are
        damaged and ``options.repair`` is false.
        """
        recovery = recover(fs, directory, options)
        writer = LogWriter.resume(fs, directory, options, recovery)
        return cls(directory, options, fs, recovery, writer)

    @property
    def failed(self) -> bool:
        """True once a write or fsync failed; the journal then refuses every append."""
        return self._failure is not None

    def replay(self) -> Iterator[Record]:
        """Stream the records after ``snapshot``, in order. Blocks on file I/O.

        Must be exhausted before the first ``append``. Memory does not grow with the log.
        """
        if self._next_sequence != self._recovery.last_sequence + 1:
            raise RuntimeError("replay() after append(): the log has moved on")
        return self._replay()

    def _replay(self) -> Iterator[Record]:
        started = time.perf_counter()
        base = self._base
        for segment in self._recovery.segments:
            if segment.last_sequence > base:
                yield from read_segment(
                    self._fs,
                    segment.path,
                    segment.first_sequence,
                    segment.last_sequence,
                    base,
                    self._options.max_record_bytes,
                )
        if not self._replayed:
            self._replayed = True
            self._replay_seconds = self._recovery.seconds + time.perf_counter() - started

    async def append(self, event: dict[str, Any]) -> int:
        """Journal ``event`` (a dict with a "type" key); return its sequence once committed.

        Committed means fsynced in strict mode and written to the OS in balanced mode; the
        listener has seen the record by then.
        """
        self._check_writable()
        if not self._replayed:
            raise RuntimeError("replay() must be exhausted before the first append()")
        body = framing.encode_event(event)
        if len(body) > self._options.max_record_bytes:
            raise ValueError(
                f"event of {len(body)} bytes exceeds max_record_bytes "
                f"({self._options.max_record_bytes})"
            )
        loop = asyncio.get_running_loop()
        sequence = self._next_sequence
        self._next_sequence += 1
        future: asyncio.Future[int] = loop.create_future()
        self._pending.append(_Pending(sequence, event, body, future))
        if self._flusher is None:
            # A task, not a direct call: it starts after every appender already woken has
            # queued its event, so they all share this batch.
            self._flusher = loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self._pending and self._failure is None:
                batch, self._pending = self._pending, []
                started = time.perf_counter()
                try:
                    await self._run(
                        self._writer.write_batch,
                        batch[0].sequence,
                        [pending.body for pending in batch],
                    )
                except Exception as exc:
                    self._fail(exc, batch)
                    return
                self._batches += 1
                self._appends += len(batch)
                self._acknowledged = batch[-1].sequence
                if self.batch_observer is not None:
                    self.batch_observer(len(batch), time.perf_counter() - started)
                self._deliver(batch)
                await asyncio.sleep(0)  # let the woken appenders join the next batch
        finally:
            self._flusher = None

    def _deliver(self, batch: list[_Pending]) -> None:
        listener = self.listener
        for pending in batch:
            future = pending.future
            if listener is not None:
                try:
                    listener(new_record(pending.sequence, pending.event))
                except Exception as exc:
                    logger.exception("listener failed on record %d", pending.sequence)
                    if not future.done():
                        future.set_exception(exc)
                    continue
            if not future.done():
                future.set_result(pending.sequence)
        if self.batch_listener is not None:
            try:
                self.batch_listener(batch[-1].sequence)
            except Exception:
                logger.exception("batch listener failed on batch ending %d", batch[-1].sequence)

    def _fail(self, exc: BaseException, batch: list[_Pending]) -> None:
        if self._failure is None:
            self._failure = exc
            logger.error("write failed, refusing further appends: %r", exc)
        waiters, self._pending = batch + self._pending, []
        for pending in waiters:
            if not pending.future.done():
                pending.future.set_exception(self._failed_error())

    def _failed_error(self) -> JournalFailedError:
        error = JournalFailedError(f"journal failed: {self._failure!r}")
        error.__cause__ = self._failure
        return error

    def _check_writable(self) -> None:
        if self._closing:
            raise JournalClosedError("journal is closed")
        if self._failure is not None:
            raise self._failed_error()

    async def sync(self) -> None:
        """Make every acknowledged record durable now (one fsync, if anything is unsynced).

        For balanced durability, before the caller acts on the strength of records the OS
        may still lose: deleting the payload files they released, say. A failed fsync is
        fail-stop like a failed append (``JournalFailedError``).
        """
        self._check_writable()
        if self._writer.synced_through >= self._acknowledged:
            return
        try:
            await self._run(self._writer.sync)
        except Exception as exc:
            self._fail(exc, [])
            raise self._failed_error() from exc

    async def write_snapshot(self, sequence: int, data: bytes | Iterable[bytes]) -> int:
        """Store ``data``, the caller's state with every record up to ``sequence`` applied:
        bytes, or chunks streamed to the file as the iterable yields them (on the journal's
        thread, never joined in memory). Returns the snapshot's crc (``Snapshot.crc``).

        ``sequence`` must be an acknowledged sequence, not below the current snapshot's.
        Once the new snapshot is durable, snapshots other than it and its predecessor are
        deleted, and so are segments wholly covered by the predecessor: the predecessor plus
        the log after it stay complete, so a damaged newest snapshot can fall back.
        """
        self._check_writable()
        if not self._replayed:
            raise RuntimeError("replay() must be exhausted before write_snapshot()")
        if not self._snapshot_sequence <= sequence <= self._acknowledged:
            raise ValueError(
                f"snapshot sequence {sequence} outside {self._snapshot_sequence}.."
                f"{self._acknowledged}"
            )
        async with self._snapshot_lock:
            if self._writer.synced_through < sequence:
                try:
                    await self._run(self._writer.sync)
                except Exception as exc:
                    self._fail(exc, [])
                    raise self._failed_error() from exc
            created_at = time.time()
            try:
                _, crc = await self._run(
                    write_snapshot_file, self._fs, self._directory, sequence, created_at, data
                )
            except Exception as exc:
                await self._run(self._discard_temp, sequence)
                raise JournalError(f"snapshot at {sequence} failed: {exc!r}") from exc
            previous = max((seq for seq in self._retained if seq < sequence), default=0)
            self._retained = (sequence, previous) if previous else (sequence,)
            self._snapshot_sequence = sequence
            self._snapshot_at = created_at
            self._snapshot_bytes = await self._run(self._cleanup, sequence, previous)
            return crc

    def _discard_temp(self, sequence: int) -> None:
        temp = os.path.join(self._directory, snapshot_name(sequence) + TEMP_SUFFIX)
        try:
            if self._fs.exists(temp):
                self._fs.unlink(temp)
        except Exception as exc:  # best effort: open removes stale temp files anyway
            logger.warning("could not remove %s: %r", temp, exc)

    def _cleanup(self, sequence: int, previous: int) -> int:
        """Drop snapshots other than the two retained, and segments covered by the older.

        Returns the bytes of the retained snapshot files.
        """
        kept = 0
        try:
            for other, path in list_snapshots(self._fs, self._directory):
                if other in (sequence, previous):
                    kept += self._fs.stat(path).size
                else:
                    self._fs.unlink(path)
            through = previous
            if self.retain_from is not None:
                through = min(through, self.retain_from() - 1)
            if through > 0:
                removed = self._writer.remove_covered(through)
                if removed:
                    logger.info("removed %d covered segments", len(removed))
        except Exception as exc:  # leftovers are harmless; the next snapshot retries
            logger.warning("cleanup after snapshot %d failed: %r", sequence, exc)
        return kept

    def stats(self) -> JournalStats:
        """A consistent-enough view of the counters (each field read atomically)."""
        return JournalStats(
            segments=self._writer.segment_count,
            bytes=self._writer.total_bytes + self._snapshot_bytes,
            last_sequence=self._acknowledged,
            last_snapshot_sequence=self._snapshot_sequence,
            last_snapshot_at=self._snapshot_at,
            replay_seconds=self._replay_seconds,
            appends=self._appends,
            batches=self._batches,
        )

    def close_unused(self) -> None:
        """Close a journal nothing was appended to, from any one thread (blocking): the
        caller opens it again (with other options) before serving."""
        self._writer.close()
        if self._owns_executor:
            self._executor.shutdown(wait=False)

    async def close(self) -> None:
        """Commit what is queued, fsync, and release the files and the owned executor."""
        if self._closing:
            return
        self._closing = True
        try:
            if self._flusher is not None:
                await asyncio.shield(self._flusher)
            async with self._snapshot_lock:  # a snapshot in progress still uses the writer
                try:
                    await self._run(self._writer.close)
                except Exception as exc:
                    self._fail(exc, [])
                    raise self._failed_error() from exc
        finally:
            if self._owns_executor:
                self._executor.shutdown(wait=False)

    async def _run(self, function: Callable[..., _T], *args: Any) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, function, *args)
