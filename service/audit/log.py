"""The audit log as one serving process appends to it: one hash chain, written in groups.

Every serving process keeps an ``AuditLog`` of the same data dir and appends its own
requests' records (``service.audit.shared``: the processes take turns at the chain's end
under a lock, so there is one chain with one gapless ``sequence``). ``append`` queues a
record's fields on the event loop, and the records of one loop turn go to the log's own
thread together (``service.audit.writer_thread``); one write and, in strict durability, one
fsync there carry every record handed over meanwhile, as the journal's group commit does,
and the thread takes the next batch as soon as one is on disk (batches are written in
order; a batch is sealed under the lock, so this process's records keep the order of its
calls). Strict: the caller awaits the future ``append`` returns, which resolves once its
record is on disk, and only then answers its request. Balanced: the lines go to the OS
soon (gathered for ``BALANCED_GATHER_SECONDS``, so that a batch carries many), without an
fsync.

A failed write or fsync is fail-stop, as the journal's: the records of that batch and every
later ``append`` raise ``AuditUnavailableError`` (503) until a restart, which cuts any torn
line and continues the chain after the last whole record; the other processes stop taking
records too (the chain may lack what this one wrote). An fsync is never retried (its failure
may have dropped the pages it was to write).

Retention: ``prune`` removes whole segments older than ``retention_seconds`` after writing
the signed anchor of the log that remains (``service.audit.segments``). ``verify`` checks
the chain from the anchor (or the genesis) to the last record, and that the last one on
disk is the last one any process appended. ``page`` reads records after a sequence, filtered.

Thread-safety: ``append``, ``flush``, ``prune``, ``close`` on the event-loop thread; the
file work runs on the log's thread (writes, prunes; ``_write_batch`` there, ``_settle`` back
on the loop) or the given executor (reads). Prunes run in one process (the writer's), under
the chain's lock.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import os
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from fsseam.fs import FileSystem
from service.audit.record import ChainChecker, Prepared, Verification, parse_line, prepare
from service.audit.segments import (
    AUDIT_DIRNAME,
    Anchor,
    Tail,
    lines_of,
    list_segments,
    read_all,
    read_anchor,
    records_of,
    write_anchor,
)
from service.audit.shared import SharedChain, cut_record
from service.audit.writer_thread import GroupCommitThread
from service.common.api_errors import ApiError
from service.common.timefmt import now_ms, rfc3339_ms

log = logging.getLogger("service.audit")

T = TypeVar("T")
DEFAULT_SEGMENT_BYTES = 16 * 1024 * 1024
SCAN_BUDGET = 100_000
"""Records a page reads at most past its ``since`` before it answers (a filter that matches
rarely then answers a short page and a cursor to go on from)."""
FIRST_LINE_BYTES = 64 * 1024
MAX_PAGE = 1000
"""The most records one page of ``GET /system/audit`` holds."""
DEFAULT_PAGE = 100
BALANCED_GATHER_SECONDS = 0.01
"""How long balanced durability gathers records before handing them to the log's thread."""
MAX_SEQUENCE = 10**18 - 1
"""The largest ``since`` a page accepts."""


class AuditUnavailableError(ApiError):
    """The audit log cannot take records (a write or fsync failed): 503 until a restart."""

    def __init__(self) -> None:
        super().__init__(
            "ServiceUnavailable",
            "the audit log cannot record requests; the server needs a restart",
            retry_after=5,
        )


_Entry = tuple[Prepared, str, "asyncio.Future[int] | None"]
"""A queued record (prepared on the event loop), its UTC day, and the future of a strict
append awaiting the write."""


class AuditLog:
    """The audit log of a data dir, as one process appends to it (see the module
    docstring)."""

    def __init__(
        self,
        fs: FileSystem,
        data_dir: str,
        *,
        secret: bytes,
        strict: bool,
        retention_seconds: float,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        readers: Executor | None = None,
    ) -> None:
        self.fs = fs
        self.directory = os.path.join(data_dir, AUDIT_DIRNAME)
        self._secret = secret
        self._strict = strict
        self.retention_seconds = retention_seconds
        self._segment_bytes = segment_bytes
        self._thread = GroupCommitThread(self._write_batch, self._settle, name="audit")
        self._readers = readers
        self._writer: SharedChain | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop ``open`` ran on, where records are appended."""
        self._queued: list[_Entry] | None = None
        """This loop iteration's records, handed to the thread at its end."""
        self._failure: BaseException | None = None
        """Set on the log's thread when a write or fsync failed."""
        self._closed = False
        self.appended = 0
        """Records appended since the start (for the metrics)."""

    @property
    def failed(self) -> bool:
        """A write or fsync failed: no more records until a restart."""
        return self._failure is not None

    async def stopped(self) -> bool:
        """Whether this log or another serving process's failed: no records until a
        restart (for ``/health``)."""
        if self._failure is not None or self._writer is None:
            return self._failure is not None
        return await self._on_thread(self._writer.stopped)

    @property
    def last_sequence(self) -> int:
        """The chain's last sequence as this process last saw it: after the open, the
        chain's end; after a write, this process's last record or later (0: none yet)."""
        return self._writer.last_sequence if self._writer is not None else 0

    async def open(self) -> None:
        """Find the end of the chain (cutting a torn line) before the first ``append``."""
        writer = SharedChain(self.fs, self.directory, self._secret)
        tail: Tail = await self._on_thread(writer.open)
        self._writer = writer
        # Kept, not looked up per record: ``asyncio.get_running_loop`` is a system call
        # (``getpid``) each time.
        self._loop = asyncio.get_running_loop()
        if tail.cut_lines:
            log.error(
                "cut %d bytes (%d lines) off the audit log's end, kept aside as .broken: the "
                "writes a crash left unfinished, or damage",
                tail.cut_bytes,
                tail.cut_lines,
            )
            wait = self.append(cut_record(tail.cut_bytes))
            if wait is not None:
                await wait
            await self.flush()

    async def _on_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await self._thread.run(function, *args)

    async def _on_reader(self, function: Callable[..., T], *args: Any) -> T:
        if self._readers is None:
            return await self._on_thread(function, *args)
        return await asyncio.get_running_loop().run_in_executor(self._readers, function, *args)

    # -- appending -------------------------------------------------------------------------

    def append(self, fields: dict[str, Any]) -> asyncio.Future[int] | None:
        """Queue ``fields`` as a record of this process's next batch (sealed when the batch
        is written, under the chain's lock); strict: a future resolved with its sequence
        once it is on disk (``AuditUnavailableError`` if it cannot be)."""
        loop = self._loop
        if self._failure is not None or loop is None or self._closed:
            raise AuditUnavailableError()  # closed: a request that outlived the stop's grace
        self.appended += 1
        future: asyncio.Future[int] | None = None
        if self._strict:
            future = loop.create_future()
        queued = self._queued
        if queued is None:
            queued = self._queued = []
            if self._strict:
                # At the end of this loop iteration: the requests answered in it queue
                # theirs first, so they share one write and one fsync.
                loop.call_soon(self._hand_over)
            else:
                # No one waits: gather for a few milliseconds, so that a batch's fixed cost
                # (the lock, the head, the write) is shared by many records.
                loop.call_later(BALANCED_GATHER_SECONDS, self._hand_over)
        # Prepared here, not on the log's thread: Python work there competes for the GIL
        # with the busy event loop, and cost several times its own time per record.
        queued.append((prepare(fields), str(fields.get("time", ""))[:10], future))
        return future

    def _hand_over(self) -> None:
        queued, self._queued = self._queued, None
        if queued and self._loop is not None:
            self._thread.hand_over(queued, self._loop)

    def _write_batch(self, batch: list[_Entry]) -> int | None:
        """Write a batch (on the log's thread): the first record's sequence; -1 when it
        failed; None when no one waits for the outcome (balanced)."""
        waited = self._strict
        if self._failure is not None:
            return -1 if waited else None
        writer = self._writer
        assert writer is not None
        try:
            first = writer.write(
                [prepared for prepared, _, _ in batch],
                batch[0][1],
                sync=self._strict,
                roll_bytes=self._segment_bytes,
            )
        except Exception as exc:
            self._failure = exc
            log.error("writing the audit log failed, refusing further records: %r", exc)
            return -1 if waited else None
        return first if waited else None

    def _settle(self, batch: list[_Entry], first: int) -> None:
        """Resolve the waiting appends of a written batch (on the event loop)."""
        for index, (_, _, waiter) in enumerate(batch):
            if waiter is None or waiter.done():
                continue
            if first < 0:
                waiter.set_exception(AuditUnavailableError())
            else:
                waiter.set_result(first + index)

    async def flush(self) -> None:
        """Wait until every record appended so far was written (and, strict, synced)."""
        if self._closed:
            return
        self._hand_over()
        await self._on_thread(_nothing)

    async def close(self) -> None:
        """Write what is queued, close the segment and the log's thread."""
        await self.flush()
        self._closed = True
        if self._writer is not None:
            await self._on_thread(self._writer.close)
        self._thread.shutdown(wait=True)  # at once: nothing is left to do

    # -- retention -------------------------------------------------------------------------

    async def prune(self) -> int:
        """Remove the segments whose every record is older than the retention (on the
        log's thread, between writes); how many were removed."""
        cutoff = rfc3339_ms(now_ms() - round(self.retention_seconds * 1000))
        assert self._writer is not None, "open first"
        removed: int = await self._on_thread(
            self._writer.locked,
            prune_segments,
            self.fs,
            self.directory,
            self._secret,
            cutoff,
            rfc3339_ms(now_ms()),
        )
        if removed:
            log.info("removed %d audit segments older than %s", removed, cutoff)
        return removed

    # -- reading ---------------------------------------------------------------------------

    async def verify(self) -> Verification:
        """Check the whole chain on disk (written records; a batch being written is waited
        for) and that it ends with the last record appended."""
        await self.flush()
        assert self._writer is not None, "open first"
        expected_last = await self._on_thread(self._writer.chain_end)
        result: Verification = await self._on_reader(
            verify_chain, self.fs, self.directory, self._secret
        )
        last = result.last_sequence or 0
        if result.ok and last < expected_last:
            result.ok = False
            result.first_bad_sequence = last + 1
            result.problem = f"the log ends at record {last}; {expected_last} were written"
        return result

    async def page(
        self, since: int, limit: int, bucket: str | None, user_id: str | None
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Records after ``since`` (at most ``limit``), filtered; and the sequence to go on
        after, or None when the end of the log was reached. This process's records
        gathered so far are written first (a reader sees its own requests)."""
        await self.flush()
        return await self._on_reader(
            read_page, self.fs, self.directory, self._secret, since, limit, bucket, user_id
        )


# -- blocking work ----------------------------------------------------------------------------


def _nothing() -> None:
    """A job whose end says the records handed over before it were written."""


def _first_record(fs: FileSystem, path: str) -> dict[str, Any] | None:
    file = fs.open_read(path)
    try:
        head = file.read(FIRST_LINE_BYTES)
    finally:
        file.close()
    end = head.find(b"\n")
    if end < 0:
        head = read_all(fs, path)
        end = head.find(b"\n")
    return parse_line(head[:end]) if end >= 0 else None


def prune_segments(fs: FileSystem, directory: str, secret: bytes, cutoff: str, now: str) -> int:
    """Remove the segments (never the newest) whose records all precede ``cutoff`` (an
    RFC 3339 time) or the anchor, writing the anchor of what remains first. Nothing goes
    while the log's start is not intact (the anchor's signature bad, records missing before
    the oldest segment): a new signed anchor would launder the edit that verification
    reports. Blocking."""
    anchor, signed = read_anchor(fs, directory, secret)
    segments = list_segments(fs, directory)
    if not signed or (segments and segments[0][0] > anchor.sequence):
        log.warning("the audit log's start is not intact (verify names it): not pruning")
        return 0
    removable: list[str] = []
    keep: dict[str, Any] | None = None
    for (_, path), (next_first, next_path) in itertools.pairwise(segments):
        following = _first_record(fs, next_path)
        if following is None:
            break
        if next_first > anchor.sequence and str(following.get("time", "")) >= cutoff:
            break
        removable.append(path)
        keep = following
    if not removable or keep is None:
        return 0
    if keep["sequence"] > anchor.sequence:
        write_anchor(fs, directory, secret, Anchor(keep["sequence"], str(keep["prev"]), now))
    for path in removable:
        fs.unlink(path)
    fs.fsync_dir(directory)  # the removals, so a restart does not find them again
    return len(removable)


def verify_chain(fs: FileSystem, directory: str, secret: bytes) -> Verification:
    """Check every record from the anchor on. Blocking."""
    anchor, signed = read_anchor(fs, directory, secret)
    checker = ChainChecker(anchor.sequence, anchor.prev)
    if not signed:
        checker.result.ok = False
        checker.result.first_bad_sequence = anchor.sequence
        checker.result.problem = "the anchor of the pruned log is not signed by this server"
        return checker.result
    for _, path in list_segments(fs, directory):
        for record in records_of(fs, path):
            if record is not None and record["sequence"] < anchor.sequence:
                continue  # a segment a prune was about to remove
            if not checker.feed(record):
                return checker.result
    return checker.result


def read_page(
    fs: FileSystem,
    directory: str,
    secret: bytes,
    since: int,
    limit: int,
    bucket: str | None,
    user_id: str | None,
) -> tuple[list[dict[str, Any]], int | None]:
    """Records after ``since`` matching the filters; see ``AuditLog.page``. Blocking."""
    anchor, _ = read_anchor(fs, directory, secret)
    start = max(since + 1, anchor.sequence)
    segments = list_segments(fs, directory)
    firsts = [first for first, _ in segments]
    index = max(bisect.bisect_right(firsts, start) - 1, 0)
    found: list[dict[str, Any]] = []
    scanned = 0
    for _, path in segments[index:]:
        for _, line in lines_of(read_all(fs, path)):
            record = parse_line(line)
            if record is None or record["sequence"] < start:
                continue
            scanned += 1
            principal = record.get("principal") or {}
            if (bucket is None or record.get("bucket") == bucket) and (
                user_id is None or principal.get("user_id") == user_id
            ):
                found.append(record)
            if len(found) >= limit or scanned >= SCAN_BUDGET:
                return found, int(record["sequence"])
    return found, None
