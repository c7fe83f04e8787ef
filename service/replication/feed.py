"""The primary's side of replication: what standbys read, and where each one is.

A standby reads the primary's newest snapshot (to start), then the journal's frames from its
position on, and the payloads those records reference (``service.replication.wire``). The
feed serves those reads off the event loop (a ``LogTail`` per standby on the executor, so
following the newest records reads only the new bytes) and never blocks a write: the journal
is only read beside its writer, and a long poll waits on the journal's batch signal
(``JournalCommitter.on_batch``), not on a timer.

Each standby holds a position in the committer's ``ReaderHolds``, like a Postgres
replication slot: the journal keeps the segments from its position on and the payloads
that records from there released, until it has passed them. A position is what the standby
confirmed (a records request from N confirms every record before N); a standby not heard
from for ``FORGET_SECONDS`` is forgotten (its slot dropped, so a dead standby cannot fill
the primary's disk), and comes back by bootstrapping again if its records are gone.
Positions live in memory: after the primary's restart a standby registers again at its
next request (the start's orphan sweep does not wait for it; a payload the sweep removed is
answered 404 and the standby quarantines it, as a restore does a lost one).

Thread-safety: event-loop thread; the ``_read_*`` functions run on the engine's executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fsseam.fs import ReadableFile
from journal.snapshot import list_snapshots
from journal.tail import LogTail, RawRecord, RecordsGoneError
from service.archive.refs import record_payload
from service.auth.server_secret import SERVER_SECRET_FILENAME
from service.common.timefmt import rfc3339_ms
from service.engine.core import Engine
from service.engine.journaled import JournalCommitter
from service.replication.sync import ConfirmationWaiters
from service.replication.wire import (
    BATCH_BYTES,
    INLINE_BATCH_BYTES,
    INLINE_MAX_BYTES,
    MAX_RECORD_BYTES,
    MAX_WAIT_SECONDS,
)
from service.storage.direct import parse_direct_id

__all__ = ["Frames", "RecordsGoneError", "ReplicationFeed", "StandbySlot"]

FORGET_SECONDS = 3600.0
"""A standby silent this long loses its slot (the primary stops keeping records for it)."""
CONNECTED_SECONDS = 60.0
"""A standby heard from within this long is listed as connected."""


@dataclass
class StandbySlot:
    """One standby, as the primary knows it."""

    standby_id: str
    address: str
    connected_since_ms: int
    confirmed_sequence: int
    last_seen: float
    """Monotonic time of its last request."""
    caught_up_at: float
    """Wall time at which it last confirmed every record the primary had."""
    lag_bytes: int = 0
    url: str | None = None
    """Where the standby serves its own payloads (``service.replication.repair``)."""
    authorization: str | None = None
    """The credentials it presented, which its own copy of the users accepts too."""
    tail: LogTail | None = None
    reading: asyncio.Lock = field(default_factory=asyncio.Lock)

    def held_from(self) -> int:
        return self.confirmed_sequence + 1


@dataclass(frozen=True)
class Frames:
    """A records answer: frames ``first..last`` (none when ``last < first``)."""

    first: int
    last: int
    primary_sequence: int
    data: bytes
    inline: list[tuple[str, bytes]] = field(default_factory=list)
    """Small payloads the frames reference (``wire.INLINE_MAX_BYTES``), when asked for."""


BOOTSTRAP_SNAPSHOT_BEHIND = 1_000
"""A bootstrap copies from a snapshot at most this many records behind the journal's end:
a newer one is written first. The payloads of the records after a snapshot come one batch of
records at a time (a sync and a journal append each) as the standby follows; those of the
snapshot come in bulk, many requests in flight and a few syncs in all (``bootstrap``)."""


class ReplicationFeed:
    """What the primary serves its standbys (module docstring)."""

    def __init__(
        self, engine: Engine, committer: JournalCommitter, clock: Callable[[], float] = time.time
    ) -> None:
        self._engine = engine
        self._committer = committer
        self._clock = clock
        self._journal_dir = engine.config.journal_dir
        self.slots: dict[str, StandbySlot] = {}
        self.waiters: ConfirmationWaiters | None = None
        """Sync mode: the writes waiting for a standby (``service.replication.sync``)."""
        self._batch = asyncio.Event()
        self._stopping = False
        """The server is stopping: a long poll answers at once instead of holding the
        stop for its whole wait (``stop_waiting``)."""
        committer.on_batch.append(self._on_batch)

    def _on_batch(self) -> None:
        """A group commit: wake every long poll (a fresh event for the next ones)."""
        batch, self._batch = self._batch, asyncio.Event()
        batch.set()

    def stop_waiting(self) -> None:
        """The server stops: every long poll, waiting or to come, answers now with what
        it has (the standby asks again, of the next primary or of this one restarted)."""
        self._stopping = True
        self._on_batch()

    # -- positions ------------------------------------------------------------------

    def note(
        self,
        standby_id: str,
        address: str,
        confirmed: int,
        lag_bytes: int,
        *,
        durable: bool = True,
    ) -> StandbySlot:
        """A request from ``standby_id``, which holds every record up to ``confirmed``
        (``durable=False``: will hold, once its bootstrap is done; its slot keeps what it
        needs from there, but it confirms no write of a sync primary).

        Raises ``ValueError`` for a position past this primary's newest record (a standby of
        another history: it confirms nothing here)."""
        newest = self._committer.last_sequence()
        if confirmed > newest:
            raise ValueError(
                f"the standby holds records up to {confirmed}; this primary's newest is {newest}"
            )
        now = time.monotonic()
        slot = self.slots.get(standby_id)
        if slot is None or now - slot.last_seen > CONNECTED_SECONDS:
            connected = int(self._clock() * 1000)
        else:
            connected = slot.connected_since_ms
        if slot is None:
            slot = StandbySlot(standby_id, address, connected, confirmed, now, self._clock())
            self.slots[standby_id] = slot
            holds = self._committer.holds
            holds.add(self._reader_name(standby_id), slot.held_from)
            holds.settle(self._reader_name(standby_id))
        slot.address = address
        slot.connected_since_ms = connected
        slot.last_seen = now
        slot.lag_bytes = lag_bytes
        if confirmed >= newest:
            slot.caught_up_at = self._clock()
        if confirmed != slot.confirmed_sequence:
            slot.confirmed_sequence = confirmed
            self._engine.release_payloads(self._committer.holds.due())
        if self.waiters is not None and durable:
            self.waiters.confirm(confirmed)
        return slot

    def wait_for_standbys(self, timeout: float) -> None:
        """Sync mode from now on: every commit waits until a standby confirms it."""
        self.waiters = ConfirmationWaiters(timeout)
        self._committer.confirmation = self.waiters.wait

    @staticmethod
    def _reader_name(standby_id: str) -> str:
        return "standby:" + standby_id

    def forget_silent(self) -> None:
        """Drop the slots of standbys silent for ``FORGET_SECONDS`` (a background job)."""
        now = time.monotonic()
        for standby_id, slot in list(self.slots.items()):
            if now - slot.last_seen > FORGET_SECONDS and not slot.reading.locked():
                del self.slots[standby_id]
                self._committer.holds.remove(self._reader_name(standby_id))
                if slot.tail is not None:
                    slot.tail.close()
        self._engine.release_payloads(self._committer.holds.due())

    def close(self) -> None:
        for slot in self.slots.values():
            if slot.tail is not None:
                slot.tail.close()

    def status(self) -> list[dict[str, Any]]:
        """The contract's ``standbys`` of ``GET /api/v1/replication``."""
        last = self._committer.last_sequence()
        now, wall = time.monotonic(), self._clock()
        out = []
        for slot in sorted(self.slots.values(), key=lambda each: each.standby_id):
            behind = max(0, last - slot.confirmed_sequence)
            out.append(
                {
                    "id": slot.standby_id,
                    "address": slot.address,
                    "confirmed_sequence": slot.confirmed_sequence,
                    "lag": {
                        "records": behind,
                        "seconds": round(max(0.0, wall - slot.caught_up_at), 3) if behind else 0.0,
                        "bytes": slot.lag_bytes,
                    },
                    "connected_since": rfc3339_ms(slot.connected_since_ms),
                    "connected": now - slot.last_seen <= CONNECTED_SECONDS,
                }
            )
        return out

    # -- reads ----------------------------------------------------------------------

    async def durable(self) -> int:
        """The newest record a power loss cannot take back (balanced: sync the journal
        first), so a standby never holds a record the primary could lose."""
        journal = self._committer.journal
        if journal is None:
            return 0
        last = journal.stats().last_sequence
        if self._engine.config.durability != "strict":
            await journal.sync()
        return last

    async def records(
        self, slot: StandbySlot, first: int, wait: float, *, inline: bool = False
    ) -> Frames:
        """Frames from ``first`` on, waiting up to ``wait`` seconds for one to commit;
        ``inline``: with the bytes of the small payloads they reference, read in the same
        executor job (a payload no longer held, or quarantined, is left to a fetch by id).

        Raises ``RecordsGoneError`` when ``first`` left the log, ``ValueError`` when the
        standby is ahead of this primary (it followed another history)."""
        deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT_SECONDS)
        while True:
            batch = self._batch
            last = await self.durable()
            if first > last + 1:
                raise ValueError(
                    f"the standby asks for record {first} but this primary's newest is {last}"
                )
            if first <= last:
                break
            left = deadline - time.monotonic()
            if left <= 0 or self._stopping:
                return Frames(first, first - 1, last, b"")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(batch.wait(), left)
        async with slot.reading:
            if slot.tail is None:
                slot.tail = LogTail(self._engine.fs, self._journal_dir, MAX_RECORD_BYTES)
            tail = slot.tail
            frames, payloads = await self._engine.run_blocking(
                _read_batch, self._engine, tail, first, last, inline
            )
        data = b"".join(frame.frame for frame in frames)
        quarantined = self._engine.quarantined
        kept = [entry for entry in payloads if entry[0] not in quarantined]
        return Frames(first, frames[-1].sequence, last, data, kept)

    async def newest_snapshot(self) -> tuple[int, ReadableFile | None]:
        """The newest snapshot's sequence and its file, open (so the journal may remove it
        meanwhile). A primary with records but no snapshot, or whose newest snapshot is more
        than ``BOOTSTRAP_SNAPSHOT_BEHIND`` records behind, writes one first (as a Postgres
        base backup starts with a checkpoint). ``(0, None)`` for an empty journal."""
        engine = self._engine
        found = await engine.run_blocking(list_snapshots, engine.fs, self._journal_dir)
        newest = found[0][0] if found else 0  # newest first
        last = self._committer.last_sequence()
        if last > 0 and (not found or last - newest > BOOTSTRAP_SNAPSHOT_BEHIND):
            await self._committer.snapshot()
            found = await engine.run_blocking(list_snapshots, engine.fs, self._journal_dir)
        if not found:
            return 0, None
        for sequence, path in found:
            try:
                return sequence, await engine.run_blocking(engine.fs.open_read, path)
            except FileNotFoundError:
                continue  # removed by a newer snapshot meanwhile: take the next
        return await self.newest_snapshot()

    def secret_path(self) -> str:
        return os.path.join(self._engine.config.data_dir, SERVER_SECRET_FILENAME)


def _read_batch(
    engine: Engine, tail: LogTail, first: int, last: int, inline: bool
) -> tuple[list[RawRecord], list[tuple[str, bytes]]]:
    """A batch of frames and, ``inline``, the small payloads they reference (executor)."""
    frames = tail.read(first, last, BATCH_BYTES)
    payloads: list[tuple[str, bytes]] = []
    if not inline:
        return frames, payloads
    budget = INLINE_BATCH_BYTES
    for frame in frames:
        ref = record_payload(frame.event())
        if ref is None or ref.size > INLINE_MAX_BYTES or ref.size > budget:
            continue
        if parse_direct_id(ref.payload_id) is not None:
            continue  # a part written in place: fetched by id (its region of the upload)
        try:
            source = engine.store.open_payload(ref.payload_id)
        except FileNotFoundError:
            continue  # released by a later record: the standby's fetch by id says so
        try:
            data = source.read(ref.size + 1)
        finally:
            source.close()
        if len(data) == ref.size:
            payloads.append((ref.payload_id, data))
            budget -= ref.size
    return frames, payloads
