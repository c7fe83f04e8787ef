"""A standby following its primary: fetch records, fetch their payloads, append, apply.

One loop on the standby's journal owner asks the primary for the records after its own last
one (a long poll: the answer comes as soon as the primary commits, in batches), fetches and
verifies every payload they reference (``service.replication.payloads``), and only then
appends them to its own journal, which applies them (``StandbyCommitter.apply_shipped``). So
a record is in the standby's journal only once every byte it points to is durable here, and
the next request's ``from`` (its last sequence + 1) tells the primary what it holds.

A cut connection, a primary that restarts, or any unusable answer is retried after a pause
(1 s, growing to 10 s); the position is the journal's own, so a restart of the standby
resumes exactly where it stopped. A primary that no longer holds the next record (410
RecordsGone: the standby was away longer than the primary kept records for it), is behind
this standby (409), is another server (``X-Server-Id``), is of an older epoch or has a
history this standby diverged from (``service.replication.epochs``) stops the loop: the standby
keeps serving what it has and says, in ``last_error`` and ``/health``, that it must
bootstrap again (stop it, empty its data dir, start it).

Lag, as ``GET /api/v1/replication`` reports it: ``records``, the primary's newest record
(as last heard) minus the last one applied here; ``seconds``, 0 while this standby held
every record the primary had at its last answer (heard within a poll's wait), else the time
since it last did; ``bytes``, the frames and payloads of the batch being fetched.

Thread-safety: event-loop thread; payloads are fetched on the engine's executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from journal.errors import JournalError
from journal.tail import FramesDamagedError, RawRecord, split_frames
from service.archive.refs import PayloadRef, record_payload
from service.engine.core import Engine
from service.replication.bootstrap import PrimaryLink
from service.replication.committer import StandbyCommitter
from service.replication.epochs import answer_refusal
from service.replication.payloads import PayloadFetcher, ReplicationError
from service.replication.source import HttpSource
from service.replication.wire import (
    CONFIRM_PATH,
    HEADER_FRAMES_BYTES,
    HEADER_LAST,
    HEADER_PRIMARY_SEQUENCE,
    HEADER_SERVER_ID,
    HEADER_STANDBY_LAG_BYTES,
    MAX_RECORD_BYTES,
    RECORDS_PATH,
    server_identity,
    unpack_inline,
)

log = logging.getLogger("service.replication")

POLL_WAIT_SECONDS = 10.0
"""How long one records request waits on the primary for a new record."""
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0)


class RecordsGone(Exception):
    """The primary cannot continue this standby's journal (it no longer holds the next
    record, or it is another server): bootstrap again."""


class _Batch(list[RawRecord]):
    """A records answer's records, with the payloads they reference and the inline bytes."""

    def __init__(
        self, records: list[RawRecord], refs: list[PayloadRef], inline: dict[str, bytes]
    ) -> None:
        super().__init__(records)
        self.refs = refs
        self.inline = inline

    def extend_with(self, later: _Batch) -> None:
        """The records of the answer that came next (they follow these, gapless)."""
        self.extend(later)
        self.refs.extend(later.refs)
        self.inline.update(later.inline)

    def size(self) -> int:
        """Its frames' and inline payloads' bytes."""
        return sum(len(record.frame) for record in self) + sum(map(len, self.inline.values()))


MAX_PENDING_BYTES = 64 * 1024 * 1024
"""Received and not yet applied: the receiver waits beyond this (frames and inline bytes)."""


class _Pending:
    """What the receiver got while the applier was busy: one batch, the answers that came
    meanwhile joined into it, so that the next apply (one payload sync, one journal sync,
    one confirmation) carries all of them. Handing over each answer as it came gave the
    second batch of the pipeline only what the primary had committed the moment the
    previous one was received: 5 records a batch under a sync load of 64 writers
    (docs/benchmarks.md, "Sync replication's rate, stop 35")."""

    def __init__(self) -> None:
        self.batch: _Batch | None = None
        self.bytes = 0
        """``batch``'s size (each answer's counted once, as it joins)."""
        self.failure: BaseException | None = None
        self.changed = asyncio.Event()

    def add(self, batch: _Batch) -> None:
        self.bytes += batch.size()
        if self.batch is None:
            self.batch = batch
        else:
            self.batch.extend_with(batch)
        self.changed.set()

    def fail(self, failure: BaseException) -> None:
        self.failure = failure
        self.changed.set()

    async def room(self) -> None:
        """Wait while what is pending is over ``MAX_PENDING_BYTES``."""
        while self.bytes > MAX_PENDING_BYTES:
            self.changed.clear()
            await self.changed.wait()

    async def take(self) -> _Batch:
        """Everything received so far (waiting for something); raises the receiver's error
        once what came before it was taken."""
        while self.batch is None:
            if self.failure is not None:
                raise self.failure
            self.changed.clear()
            await self.changed.wait()
        batch, self.batch, self.bytes = self.batch, None, 0
        self.changed.set()  # room for the receiver
        return batch


class Follower:
    """Follows the primary into the standby's journal (module docstring)."""

    def __init__(
        self,
        engine: Engine,
        committer: StandbyCommitter,
        primary: PrimaryLink,
        server_secret: bytes,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``server_secret``: this standby's (copied from its primary at the bootstrap)."""
        self._engine = engine
        self._identity = server_identity(server_secret)
        self._committer = committer
        self.primary = primary
        self._clock = clock
        self.primary_sequence = committer.last_sequence()
        """The primary's newest record, as it said in its last answer."""
        self.caught_up_at = clock()
        """When this standby last held every record the primary had."""
        self.heard_at = 0.0
        """Monotonic time of the primary's last answer (0: none since the start)."""
        self.last_error: str | None = None
        self.needs_bootstrap = False
        self.pending_bytes = 0
        self.durable_sequence = committer.last_sequence()
        """The newest record durable here (what the requests confirm to the primary)."""
        self.applied_records = 0
        self.fetched_payloads = 0
        self.fetched_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._fetch_client: httpx.Client | None = None

    # -- what the status reads ----------------------------------------------------------

    @property
    def applied_sequence(self) -> int:
        return self._committer.last_sequence()

    def lag(self) -> dict[str, Any]:
        applied = self.applied_sequence
        records = max(0, self.primary_sequence - applied)
        fresh = self.heard_at and time.monotonic() - self.heard_at <= POLL_WAIT_SECONDS + 5.0
        seconds = 0.0 if records == 0 and fresh else max(0.0, self._clock() - self.caught_up_at)
        return {"records": records, "seconds": round(seconds, 3), "bytes": self.pending_bytes}

    def degraded_reason(self, max_lag: float) -> str | None:
        """Why ``/health`` says degraded, or None."""
        if self.needs_bootstrap:
            return f"this standby must bootstrap again: {self.last_error}"
        seconds = float(self.lag()["seconds"])
        if seconds > max_lag:
            detail = f" ({self.last_error})" if self.last_error else ""
            return f"replication lag {seconds:.0f} s exceeds {max_lag:g} s{detail}"
        return None

    # -- running -------------------------------------------------------------------------

    def start(self) -> None:
        logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per long poll
        self._client = self.primary.async_client()
        self._fetch_client = self.primary.sync_client()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._client is not None:
            await self._client.aclose()
        if self._fetch_client is not None:
            self._fetch_client.close()

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._follow()
            except RecordsGone as exc:
                self.needs_bootstrap = True
                self.last_error = str(exc)
                log.error("replication stopped: %s", exc)
                return
            except (httpx.HTTPError, ReplicationError, FramesDamagedError, JournalError) as exc:
                self.last_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.heard_at = 0.0  # out of touch: the lag counts from the last catch-up
                log.warning("following %s failed (will retry): %s", self.primary.url, exc)
                pause = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                await asyncio.sleep(pause)
            else:
                failures = 0

    async def _follow(self) -> None:
        """Receive while the last batch is applied (``_Pending``: what comes meanwhile is
        the next batch, whole), apply each, and confirm it the moment it is durable;
        returns never, raises what stops it (the retry starts again from the journal's
        last record)."""
        pending = _Pending()
        receiver = asyncio.get_running_loop().create_task(self._receive(pending))
        try:
            while True:
                await self._apply(await pending.take())
        finally:
            receiver.cancel()
            await asyncio.gather(receiver, return_exceptions=True)

    async def _receive(self, pending: _Pending) -> None:
        try:
            first = self.applied_sequence + 1
            while True:
                await pending.room()
                batch = await self.receive(first)
                if batch is not None:
                    pending.add(batch)
                    first = batch[-1].sequence + 1
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the applier, which raises it
            pending.fail(exc)

    async def receive(self, first: int) -> _Batch | None:
        """One records request from ``first`` on (a long poll): its records and inline
        payloads, or None when none came."""
        assert self._client is not None
        answer = await self._client.get(
            RECORDS_PATH,
            params={
                "from": first,
                "wait": int(POLL_WAIT_SECONDS),
                "inline": 1,
                "confirmed": self.durable_sequence,
            },
            headers={HEADER_STANDBY_LAG_BYTES: str(self.pending_bytes)},
        )
        if answer.status_code == 200 and answer.headers.get(HEADER_SERVER_ID) != self._identity:
            raise RecordsGone(
                f"{self.primary.url} is another server than the one whose data this standby "
                "holds (its signing secret differs)"
            )
        own = self._engine.state.epoch_history()
        refused = answer_refusal(own, self.applied_sequence, answer.headers, self.primary.url)
        same_server = answer.headers.get(HEADER_SERVER_ID) in (None, self._identity)
        if refused is not None and same_server:  # an older epoch, a divergence (``epochs``)
            raise RecordsGone(refused)
        if answer.status_code == 410:
            raise RecordsGone(_message(answer))
        if answer.status_code == 409:
            # The primary is behind this standby: it only ships durable records, so this is
            # another history (another server, or one restored from an older point).
            raise RecordsGone(f"{_message(answer)}: it is not the history this standby holds")
        if answer.status_code != 200:
            raise ReplicationError(f"the primary answered {answer.status_code}: {_message(answer)}")
        self.heard_at = time.monotonic()
        self.last_error = None  # the primary answered: whatever cut an earlier poll is past
        self.primary_sequence = int(answer.headers[HEADER_PRIMARY_SEQUENCE])
        last = int(answer.headers[HEADER_LAST])
        if last < first:
            if self.applied_sequence >= self.primary_sequence:
                self.caught_up_at = self._clock()
            return None
        frames, inline = _split_answer(answer)
        shipped = split_frames(frames, first, MAX_RECORD_BYTES)
        refs = [ref for each in shipped if (ref := record_payload(each.event())) is not None]
        self.pending_bytes = len(frames) + sum(ref.size for ref in refs)
        return _Batch(shipped, refs, inline)

    async def _apply(self, batch: _Batch) -> None:
        """A batch's payloads stored and durable, then its records appended and durable,
        then confirmed to the primary at once (a sync primary acknowledges its writes on
        that confirmation, not at this standby's next long poll)."""
        assert self._fetch_client is not None
        fetcher = PayloadFetcher(self._engine, HttpSource(self._fetch_client))
        fetched = await self._committer.apply_batch(batch, batch.refs, batch.inline, fetcher)
        self.fetched_payloads += fetched.payloads
        self.fetched_bytes += fetched.bytes
        self.durable_sequence = batch[-1].sequence
        self.applied_records += len(batch)
        self.pending_bytes = 0
        if self.applied_sequence >= self.primary_sequence:
            self.caught_up_at = self._clock()
        await self._confirm()

    async def _confirm(self) -> None:
        assert self._client is not None
        answer = await self._client.get(CONFIRM_PATH, params={"sequence": self.durable_sequence})
        if answer.status_code != 204:
            raise ReplicationError(f"the primary answered {answer.status_code}: {_message(answer)}")


def _split_answer(answer: httpx.Response) -> tuple[bytes, dict[str, bytes]]:
    """A records answer's frames and its inline payloads (``wire.HEADER_FRAMES_BYTES``)."""
    body = answer.content
    raw = answer.headers.get(HEADER_FRAMES_BYTES)
    if raw is None:
        return body, {}
    if not raw.isdigit() or int(raw) > len(body):
        raise ReplicationError(f"{HEADER_FRAMES_BYTES} {raw[:20]!r} does not fit the answer")
    end = int(raw)
    try:
        return body[:end], unpack_inline(body[end:])
    except ValueError as exc:
        raise ReplicationError(f"the inline payloads are malformed: {exc}") from None


def _message(answer: httpx.Response) -> str:
    with contextlib.suppress(ValueError, KeyError, TypeError):
        return str(answer.json()["error"]["message"])
    return answer.reason_phrase
