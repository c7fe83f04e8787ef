"""A standby's committer: its own journal and index, written only with the primary's records.

A standby is a journal owner like any primary (``JournalCommitter``: its journal, its
persistent index, the applier that live commits and replay share, snapshots, the GC), with
two differences. Before its journal opens, a fresh standby copies the primary's newest
snapshot and payloads (``service.replication.bootstrap``), so the journal opens at that
snapshot with the primary's sequence numbers. And it refuses every mutation
(``ReadOnlyStandby``); the only records it appends are the primary's, through
``apply_shipped``, which checks that each lands at the sequence it had on the primary (the
two journals are the same history, record for record). Once promoted
(``service.replication.promotion``) it is a primary's committer: ``promoted`` lifts the
refusal.

Thread-safety: event-loop thread; the bootstrap runs on the engine's executor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import httpx

from journal.errors import JournalError
from journal.tail import RawRecord
from service.archive.refs import PayloadRef
from service.common.api_errors import ServiceError
from service.engine.core import Engine, OwnState
from service.engine.journaled import JournalCommitter
from service.index.protocol import IndexFactory
from service.replication.bootstrap import PrimaryLink, bootstrap_if_needed
from service.replication.payloads import Fetched, PayloadFetcher, ReplicationError
from service.replication.reseed import discard_previous

log = logging.getLogger("service.replication")


class StandbyRefusal(ServiceError):
    """A mutation on a standby (the HTTP layer refuses writes before they get here)."""

    def __init__(self) -> None:
        super().__init__("ReadOnlyStandby", "this server is a standby: send writes to its primary")


class StandbyCommitter(JournalCommitter):
    """A journal owner that only appends what its primary committed (module docstring)."""

    def __init__(
        self, own: OwnState, primary: PrimaryLink, index_factory: IndexFactory | None = None
    ) -> None:
        super().__init__(own, index_factory)
        self.primary = primary
        self.bootstrapped_payloads = 0
        """Payloads the bootstrap of this start copied (0 when it had nothing to do)."""
        self.promoted = False
        """Set by the promotion once its epoch record is committed: writes are accepted."""

    async def start(self, engine: Engine) -> None:
        """Bootstrap a fresh data dir from the primary, then open the journal as any owner."""
        self.engine = engine
        pause = 1.0
        while True:
            try:
                copied = await engine.run_blocking(self.bootstrap, engine)
            except (httpx.HTTPError, ReplicationError, OSError, JournalError) as exc:
                # The primary is away or answered badly: a standby waits for it.
                log.error("bootstrap from %s failed (will retry): %s", self.primary.url, exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 30.0)
                continue
            break
        # The copy is durable: what a reseed moved aside goes (``service.replication.reseed``).
        await engine.run_blocking(discard_previous, engine.fs, engine.config.data_dir)
        self.bootstrapped_payloads = copied
        await super().start(engine)

    def bootstrap(self, engine: Engine) -> int:
        """Copy the primary into a fresh data dir (blocking); the payloads copied. The crash
        matrix's standby (``tests/crash/standbykit.py``) copies from an in-process primary."""
        return bootstrap_if_needed(engine, self.primary)

    def ensure_writable(self) -> None:
        if not self.promoted:
            raise StandbyRefusal()
        super().ensure_writable()

    async def apply_batch(
        self,
        shipped: list[RawRecord],
        refs: list[PayloadRef],
        inline: Mapping[str, bytes],
        fetcher: PayloadFetcher,
    ) -> Fetched:
        """The standby's apply of one batch of the primary's records (``refs``: the payloads
        they reference, ``inline``: the bytes the records answer carried): every payload
        written and verified (one executor job), then made durable together (the shared
        ``syncfs`` of the primary's strict small PUTs, ``Engine.payload_sync``, or the
        fetcher's own sync), then the records appended and applied, then the journal
        synced. A crash anywhere leaves a prefix of the primary's records, each with its
        payloads (payloads without a record are orphans the start's sweep removes)."""
        engine = self.engine
        group = engine.payload_sync if fetcher.durable_by_caller() else None
        ticket = group.ticket() if group is not None else 0
        fetched = await engine.run_blocking(fetcher.fetch, refs, inline, group is None)
        if group is not None:
            try:
                await group.sync(ticket)  # the batch's files and renames durable at once
            except OSError as exc:
                await engine.run_blocking(fetcher.forget, fetched.placed)
                raise ReplicationError(f"syncing the copied payloads failed: {exc}") from exc
            fetcher.stored(fetched)
        engine.quarantined.update(fetched.lost)
        await self.apply_shipped(shipped)
        await self.sync()  # balanced: the records durable; strict: synced already
        return fetched

    async def apply_shipped(self, shipped: list[RawRecord]) -> None:
        """Append and apply the primary's records, in order, as one group commit.

        Raises ``ReplicationError`` when they do not continue this journal."""
        if not shipped:
            return
        expected = self.last_sequence() + 1
        if shipped[0].sequence != expected:
            raise ReplicationError(
                f"the primary sent record {shipped[0].sequence}; this standby needs {expected}"
            )
        # Tasks started in order take consecutive sequences and share one batch.
        appends = [asyncio.ensure_future(self.append(each.event())) for each in shipped]
        await asyncio.gather(*appends)
        if self.last_sequence() != shipped[-1].sequence:
            raise ReplicationError(
                f"record {shipped[-1].sequence} landed at {self.last_sequence()} on the standby"
            )
