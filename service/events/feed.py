"""Object events, derived from committed journal records, kept for readers to resume from.

Every record the engine applies passes through ``observe`` with its outcome, in journal
order, both at startup replay and at run time; an accepted ``ObjectStored`` or
``UploadCompleted`` is an ``object.created``, an accepted ``ObjectDeleted`` an
``object.deleted`` (the version is gone), ``object.delete_marker_created`` (a marker was
added) or ``object.version_deleted`` (a DELETE named a version id). The event's ``sequence``
is its record's, and ``event_id`` is made from it, so it is stable across redeliveries and
restarts. A bucket deleted with ``force`` yields no per-object events (docs/events.md).

Every event names its bucket's identity (``bucket_id``), and readers ask for one bucket's
events by identity (``service.events.scope``): a bucket deleted and created again under its
name never sees the other's events.

Readers (the SSE stream, webhooks) ask for events after a sequence, one bounded slice at a
time: a read looks at no more than ``SCAN_LIMIT`` events and returns no more than its
``limit`` (``SLICE_EVENTS`` by default), so no reader holds the event loop for long however
far behind it is. The newest ``RECENT`` are answered from memory, older ones from the event
log's files (``service.events.log``): read, parsed and filtered on the executor, never on
the loop. Lines go to the files every ``FLUSH_SECONDS`` (a background job) and are fsynced
before every snapshot (``sync``); at start the events of replayed records past the log's end
are derived again, so none is lost to a crash.

Retention: a file of the log goes once all its events are older than
``events_retention_seconds`` AND more than ``events_retention_count`` newer events exist,
unless a webhook has not delivered it (for at most ``webhook_hold_seconds``). Asking for
events after a sequence the log no longer covers answers 410 EventsExpired.

Thread-safety: ``open`` and the ``observe`` calls of the replay run before serving (on an
executor thread); everything else on the event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from typing import Any

from fsseam.fs import FileSystem
from service.common.timefmt import rfc3339_ms
from service.events.log import EventLog
from service.events.scope import BucketScope, FeedEvent, encode, parse_line
from service.events.turns import ReplayTurns
from service.meta import ObjectVersion, Outcome, records

log = logging.getLogger("service.events")

RECENT = 10_000
"""Newest events kept in memory (beyond them, readers go to the files)."""
FLUSH_SECONDS = 0.2
SCAN_LIMIT = 2_048
"""Most events one read looks at (a bucket filter may keep few of them)."""
SLICE_EVENTS = 256
"""Most events one read returns unless the reader asks for fewer (or more, up to
``SCAN_LIMIT``): a stream sends one slice per turn (``service.events.turns``)."""

__all__ = ["EVENT_TYPES", "SLICE_EVENTS", "BucketScope", "EventFeed", "FeedEvent", "derive"]

CREATED = "object.created"
DELETED = "object.deleted"
MARKER_CREATED = "object.delete_marker_created"
VERSION_DELETED = "object.version_deleted"
EVENT_TYPES = (CREATED, DELETED, MARKER_CREATED, VERSION_DELETED)


def derive(
    sequence: int,
    event: Mapping[str, Any],
    outcome: Outcome,
    bucket_id_of: Callable[[str], str | None],
) -> dict[str, Any] | None:
    """The object event a committed record made, or None (not an object change, refused).

    ``bucket_id_of`` names the identity of a bucket in the state the record was applied to
    (an accepted object change implies its bucket exists there)."""
    kind = event.get("type")
    version = outcome.value
    if not outcome.ok or not isinstance(version, ObjectVersion):
        return None
    if kind in (records.OBJECT_STORED, records.UPLOAD_COMPLETED):
        event_type = CREATED
    elif kind == records.OBJECT_DELETED:
        if event.get("version_id") is not None:
            event_type = VERSION_DELETED
        elif version.is_delete_marker:
            event_type = MARKER_CREATED
        else:
            event_type = DELETED
    else:
        return None
    at = event.get("at")
    return {
        "event_id": f"ev_{sequence:016x}",
        "sequence": sequence,
        "type": event_type,
        "bucket": version.bucket,
        "bucket_id": bucket_id_of(version.bucket) or "",
        "key": version.key,
        "version_id": version.version_id,
        "size_bytes": version.size,
        "etag": version.sha256 or None,
        "time": rfc3339_ms(at if isinstance(at, int) else 0),
    }


class EventFeed:
    """Derives, keeps and serves the object events of one data dir."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        *,
        segment_events: int,
        retention_seconds: float,
        retention_count: int,
        recent: int = RECENT,
    ) -> None:
        self._log = EventLog(fs, directory, segment_events)
        self._recent_limit = recent
        self._retention_ms = round(retention_seconds * 1000)
        self._retention_count = retention_count
        self._recent: deque[FeedEvent] = deque()
        self._unwritten: list[tuple[int, int, bytes]] = []
        self._written_through = 0
        self._last_sequence = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._lock: asyncio.Lock | None = None
        self._writing: tuple[list[tuple[int, int, bytes]], asyncio.Future[Any]] | None = None
        """The lines being written and the executor's future for them."""
        self._retention_seen = 0
        """``_written_through`` when retention last ran (``write_pending`` writes lines
        without it)."""
        self._io = threading.Lock()
        """Serialises the log's file work: the executor's ``_write`` and ``write_pending``."""
        self.hold: Callable[[], int | None] = lambda: None
        """The lowest sequence a reader (a lagging webhook) still needs, or None."""
        self.listeners: list[Callable[[FeedEvent], None]] = []
        """Called with each new event (on the loop thread, after it joined the feed)."""
        self.derived = 0
        """Events derived since start (replayed ones included)."""
        self.turns = ReplayTurns()
        """The turns streams take to send their slices (``service.events.turns``)."""

    # -- start and observe ---------------------------------------------------------------

    def open(self, start_after: int) -> None:
        """Load the log (blocking); a new log covers the sequences after ``start_after``."""
        self._log.open(start_after)
        self._written_through = self._last_sequence = self._log.last_sequence

    def forget_after(self, sequence: int) -> None:
        """Drop the logged events after ``sequence``: the start replays every record after
        it, deriving them again (blocking; before serving)."""
        self._log.forget_after(sequence)
        self._written_through = self._last_sequence = self._log.last_sequence

    def observe(
        self,
        sequence: int,
        event: Mapping[str, Any],
        outcome: Outcome,
        bucket_id_of: Callable[[str], str | None],
    ) -> None:
        """Note the event a committed record made, if any (records in journal order, each
        once applied to the state whose ``bucket_id_of`` is given)."""
        if sequence <= self._last_sequence:
            return
        doc = derive(sequence, event, outcome, bucket_id_of)
        if doc is None:
            return
        body = encode(doc)
        at = event.get("at")
        self._unwritten.append((sequence, at if isinstance(at, int) else 0, body))
        item = FeedEvent(sequence, doc["bucket"], doc["bucket_id"], doc["key"], doc["type"], body)
        self._recent.append(item)
        self._last_sequence = sequence
        for listener in self.listeners:
            listener(item)
        self.derived += 1
        self._trim()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _trim(self) -> None:
        """Keep ``RECENT`` events in memory, never dropping one not yet in the files."""
        recent = self._recent
        while len(recent) > self._recent_limit and recent[0].sequence <= self._written_through:
            recent.popleft()

    # -- files ---------------------------------------------------------------------------

    def _flush_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def flush(self, run: Callable[..., Awaitable[Any]], *, sync: bool = False) -> None:
        """Write what is pending to the files (``run`` puts blocking work on the executor);
        with ``sync``, fsync them too. Then apply retention."""
        if self._log.stopped:
            self._unwritten = []  # the next start derives them again (``EventLog.append``)
            return
        if not self._unwritten and not sync and self._written_through == self._retention_seen:
            return  # nothing to write, and retention saw every line already written
        self._retention_seen = self._written_through
        async with self._flush_lock():
            await self._finish_write()
            lines, self._unwritten = self._unwritten, []
            self._writing = (
                lines,
                asyncio.ensure_future(run(self._write, lines, sync, self.hold())),
            )
            await self._finish_write()

    async def _finish_write(self) -> None:
        """Wait for the write in flight. A flush cancelled meanwhile (a stopping background
        job) leaves it running in its thread: the next flush waits for it here first, so
        two writes never run at once."""
        if self._writing is None:
            return
        lines, future = self._writing
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():
                raise  # still running: the next flush finishes it
            self._writing = None
            self._unwritten[:0] = lines
            raise
        except BaseException:
            self._writing = None
            self._unwritten[:0] = lines  # written again later (lines already written are skipped)
            raise
        self._writing = None
        if lines:
            self._written_through = max(self._written_through, lines[-1][0])
        self._trim()

    def _write(self, lines: list[tuple[int, int, bytes]], sync: bool, hold: int | None) -> None:
        with self._io:
            if lines:
                self._log.append(lines)
            if sync:
                self._log.sync()
            now = round(time.time() * 1000)
            self._log.drop_old(now, self._retention_ms, self._retention_count, hold)

    def write_pending(self) -> None:
        """Append every event not yet in the files, now, on the calling thread (no fsync).

        The engine calls it before the object index commits a batch. A start replays only
        the records after the index's sequence, so an event the log lacked when the process
        died could never be derived again; written first, it survives any process crash
        (a machine crash rebuilds the index and replays everything after the snapshot).
        Lines of a flush in flight are written too (the log skips what it already has), so
        no older line can land after a newer one. A write that fails is left pending: the
        start then finds the log behind the index and rebuilds.
        """
        if self._log.stopped:
            self._unwritten = []  # the next start derives them again (``EventLog.append``)
            return
        pending = (self._writing[0] if self._writing is not None else []) + self._unwritten
        if not pending:
            return
        try:
            with self._io:
                self._log.append(pending)
        except OSError:
            log.exception("writing the event log failed (the next start derives it again)")
            return
        self._unwritten = []
        self._written_through = max(self._written_through, pending[-1][0])
        self._trim()

    def close(self) -> None:
        self._log.close()

    # -- read ----------------------------------------------------------------------------

    @property
    def covered_after(self) -> int:
        """Readers may resume after any sequence at or above this; below it is expired."""
        return self._log.covered_after

    @property
    def last_sequence(self) -> int:
        """The newest event's sequence (or where the log starts, before any)."""
        return self._last_sequence

    def retained(self) -> int:
        """Events in the files and pending for them."""
        return self._log.event_count() + len(self._unwritten)

    async def read(
        self,
        after: int,
        executor: Executor,
        scope: BucketScope | None = None,
        limit: int = SLICE_EVENTS,
    ) -> tuple[list[FeedEvent], int]:
        """One slice: events after ``after`` (of ``scope``'s bucket only, when given), at
        most ``limit``, from at most ``SCAN_LIMIT`` looked at, and the sequence the read got
        through (the next ``after``). Raises ``LookupError`` when ``after`` is below
        ``covered_after`` (the events are gone).

        From memory when it holds the next event, else from the files on ``executor``
        (up to where memory starts: every event before the first one in memory is
        written)."""
        if after < self.covered_after:
            raise LookupError(after)
        first_recent = self._recent[0].sequence if self._recent else None
        if first_recent is not None and after + 1 >= first_recent:
            return self._read_recent(after, scope, limit)
        ceiling = first_recent - 1 if first_recent is not None else self._written_through
        loop = asyncio.get_running_loop()
        found, through = await loop.run_in_executor(
            executor, self._read_files, after, ceiling, scope, limit
        )
        if after < self.covered_after:
            raise LookupError(after)  # retention dropped them while we read
        return found, through

    def _read_recent(
        self, after: int, scope: BucketScope | None, limit: int
    ) -> tuple[list[FeedEvent], int]:
        recent = self._recent
        start = _first_after(recent, after)
        found: list[FeedEvent] = []
        through = after
        for index in range(start, min(len(recent), start + SCAN_LIMIT)):
            item = recent[index]
            through = item.sequence
            if scope is None or scope.holds(item):
                found.append(item)
                if len(found) >= limit:
                    break
        return found, through

    def _read_files(
        self, after: int, ceiling: int, scope: BucketScope | None, limit: int
    ) -> tuple[list[FeedEvent], int]:
        """The file half of ``read`` (blocking: on the executor). Lines of an older log
        get the identity ``scope`` claims them for (``service.events.scope``)."""
        lines = self._log.read(after, SCAN_LIMIT, ceiling)
        found: list[FeedEvent] = []
        through = after
        for sequence, line in lines:
            through = sequence
            try:
                item = parse_line(line, scope)
            except (ValueError, KeyError, TypeError):
                log.error("event log: the line of sequence %d is damaged; skipped", sequence)
                continue
            if scope is None or scope.holds(item):
                found.append(item)
                if len(found) >= limit:
                    return found, through
        if len(lines) < SCAN_LIMIT:
            through = max(through, ceiling)  # every line up to the ceiling was looked at
        return found, through

    async def wait(self, after: int, timeout: float) -> None:
        """Return once an event after ``after`` exists, or ``timeout`` seconds passed."""
        if self._last_sequence > after:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            pass
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)


def _first_after(recent: deque[FeedEvent], after: int) -> int:
    """The index of the first event of ``recent`` with a sequence above ``after``."""
    low, high = 0, len(recent)
    while low < high:
        middle = (low + high) // 2
        if recent[middle].sequence <= after:
            low = middle + 1
        else:
            high = middle
    return low
