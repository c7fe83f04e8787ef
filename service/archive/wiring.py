"""The archive wired to a journal owner: the source the shipper reads, and the holds that
keep for it what it has not shipped yet (``service.engine.holds``, kept by the committer).

The shipper (``service.archive.shipper``) is a part of the roles that own the journal
(``service.roles.journal_owner``), made before the engine starts so that the journal keeps
every segment and the start's orphan sweep waits until it knows its position. It is woken
when a batch commits (``JournalCommitter.on_batch``), and tells the committer when it has
passed records, so that payloads those records released can go (``ReaderHolds.due``).

Thread-safety: event-loop thread.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from journal.snapshot import list_snapshots
from journal.tail import LogTail
from service.archive.refs import record_payload
from service.archive.shipper import Archiver, ArchiveSource
from service.archive.targets import open_target
from service.auth.server_secret import SERVER_SECRET_FILENAME
from service.engine.holds import ReaderHolds

if TYPE_CHECKING:
    from service.engine.core import Engine
    from service.engine.journaled import JournalCommitter

READER = "archive"


def make_archiver(engine: Engine, committer: JournalCommitter, spec: str) -> Archiver:
    """An archiver of ``engine``'s data dir to ``spec`` (``SERVICE_ARCHIVE``), registered with
    ``committer`` as a reader of its journal whose holds count from now on."""
    config = engine.config
    journal_dir = os.path.join(config.data_dir, "journal")
    holds = committer.holds

    async def snapshot_now() -> int:
        await committer.snapshot()
        found = await engine.run_blocking(list_snapshots, engine.fs, journal_dir)
        return found[0][0] if found else 0  # newest first

    async def durable() -> int:
        journal = committer.journal
        if journal is None:
            return 0
        last = journal.stats().last_sequence
        if config.durability != "strict":
            await journal.sync()  # balanced: ship only what a power loss cannot take back
        return last

    source = ArchiveSource(
        fs=engine.fs,
        data_dir=config.data_dir,
        journal_dir=journal_dir,
        max_record_bytes=MAX_RECORD_BYTES,
        durable=durable,
        snapshot_now=snapshot_now,
        server_id=lambda: engine.state.server_id,
        secret_path=os.path.join(config.data_dir, SERVER_SECRET_FILENAME),
        direct_file=engine.store.direct_file,
    )
    archiver = Archiver(
        open_target(spec, engine.fs),
        source,
        engine.run_blocking,
        config.archive_retention_days,
        engine.clock,
        on_begun=lambda first, last: _pin_unshipped(engine, holds, journal_dir, first, last),
        on_advance=lambda: engine.release_payloads(holds.due()),
    )
    holds.add(READER, archiver.held_from)
    committer.on_batch.append(archiver.wake.set)
    return archiver


async def _pin_unshipped(
    engine: Engine, holds: ReaderHolds, journal_dir: str, first: int, last: int
) -> None:
    """Protect the payloads records ``first..last`` (not shipped yet) reference: after a crash
    they may be orphans on disk that the sweep would take. Then the holds are settled."""
    if first <= last:

        def refs() -> list[str]:
            tail = LogTail(engine.fs, journal_dir, MAX_RECORD_BYTES)
            found: list[str] = []
            try:
                sequence = first
                while sequence <= last:
                    frames = tail.read(sequence, last)
                    for frame in frames:
                        ref = record_payload(frame.event())
                        if ref is not None:
                            found.append(ref.payload_id)
                    sequence = frames[-1].sequence + 1
            finally:
                tail.close()
            return found

        holds.pin(last, await engine.run_blocking(refs))
    holds.settle(READER)


MAX_RECORD_BYTES = 16 * 1024 * 1024
