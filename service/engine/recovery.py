"""The engine's start: open the journal, resume or rebuild the object index, replay the tail.

The journal is the source of truth; the object index (``service.index``) records the last
sequence it applied, so a start replays only the records after it. An index that cannot be
trusted (missing, damaged, stale, ahead of the journal, from another journal, or holding
records whose events the event log lost) is rebuilt from the newest readable snapshot and
the segments after it; a damaged snapshot found then reopens the journal checking every
snapshot, which falls back to the older one. The event log is cut at the replay point so
that replay derives every event after it again (``service.events.log``).

After an unclean balanced run, the records after the last checkpoint may name payloads that
never reached the disk: their ids come back in ``Recovered.recent`` for the engine to verify.

Blocking: the engine runs ``open_and_replay`` on its executor before it serves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from fsseam.fs import FileSystem
from journal import Journal, JournalOptions, SnapshotDamagedError
from service.config import Config
from service.engine.applier import Applier
from service.events.feed import EventFeed
from service.index.opening import (
    IndexMismatchError,
    event_crc,
    load_state,
    open_index,
    rebuild,
)
from service.index.protocol import IndexFactory, PersistentIndex
from service.meta import MetaState, decode_snapshot, records
from service.storage import PayloadIntegrity

log = logging.getLogger("service.engine")

PayloadRefs = dict[str, tuple[int, str]]
"""payload id -> (size, sha256) as the records that reference it state them."""

REPLAY_BATCH = 10_000
"""Records replayed per index transaction at startup."""
EVENT_SOURCES = frozenset({records.OBJECT_STORED, records.OBJECT_DELETED, records.UPLOAD_COMPLETED})
"""Records that may derive an object event (``service.events.feed``)."""


@dataclass
class Recovered:
    """What a start rebuilt: the open journal, the applier holding the state (and the index)
    that later commits go through, and after an unclean balanced run the payloads to verify
    (None after a clean stop)."""

    journal: Journal
    applier: Applier
    recent: PayloadRefs | None


def open_and_replay(
    config: Config,
    fs: FileSystem,
    feed: EventFeed,
    integrity: PayloadIntegrity,
    index_factory: IndexFactory | None,
    on_index: Callable[[PersistentIndex], None],
) -> Recovered:
    """Open the journal and rebuild the state: from the object index when it can be
    trusted, else from the journal's snapshot (``service.index.opening``). ``on_index``
    receives the opened index before anything is replayed into it (the engine closes it at
    stop, even after a start that failed). Without an ``index_factory`` the state lives in
    memory and is replayed from the snapshot."""
    options = JournalOptions(
        durability=config.durability,
        segment_bytes=config.journal_segment_bytes,
        # With the index, the snapshot is read only to rebuild it: its crc is checked then.
        verify_snapshot=index_factory is None,
    )
    # None: the last run stopped cleanly; else the records after this sequence may name
    # payloads that never reached the disk (the engine's last checkpoint).
    unclean = integrity.unsynced_checkpoint()
    journal = Journal.open(config.journal_dir, options, fs)
    feed.open(journal.snapshot.sequence if journal.snapshot else 0)
    if index_factory is None:
        state = decode_snapshot(journal.snapshot.data) if journal.snapshot else MetaState()
        feed.forget_after(journal.snapshot.sequence if journal.snapshot else 0)
        applier = Applier(state, None, feed)
        return Recovered(journal, applier, _replay(journal, applier, 0, None, unclean))
    index, reason = open_index(fs, config.data_dir, index_factory)
    on_index(index)
    try:
        state, applied, check = load_state(index, reason, journal)
        snapshot_sequence = journal.snapshot.sequence if journal.snapshot else 0
        feed.forget_after(max(applied, snapshot_sequence))
        applier = Applier(state, index, feed)
        return Recovered(journal, applier, _replay(journal, applier, applied, check, unclean))
    except (IndexMismatchError, SnapshotDamagedError) as exc:
        log.warning("rebuilding the index from the journal: %s", exc)
    try:
        state = rebuild(index, journal)
    except SnapshotDamagedError as exc:
        log.warning("%s; opening the journal again, checking every snapshot", exc)
        journal.close_unused()
        options = replace(options, verify_snapshot=True)
        journal = Journal.open(config.journal_dir, options, fs)
        state = rebuild(index, journal)
    base = journal.snapshot.sequence if journal.snapshot else 0
    feed.forget_after(base)
    applier = Applier(state, index, feed)
    return Recovered(journal, applier, _replay(journal, applier, base, None, unclean))


def _replay(
    journal: Journal,
    applier: Applier,
    applied: int,
    check: int | None,
    unclean: int | None,
) -> PayloadRefs | None:
    """Apply the records after ``applied`` (the one at ``applied`` must have CRC-32
    ``check``, if given) through ``applier``, ending an index batch every ``REPLAY_BATCH``
    records; after an unclean stop, collect the payloads named after the ``unclean``
    checkpoint."""
    recent: PayloadRefs | None = {} if unclean is not None else None
    verify_after = unclean or 0
    feed = applier.feed
    for record in journal.replay():
        event = record.event
        if recent is not None and "payload_id" in event and record.sequence > verify_after:
            recent[event["payload_id"]] = (event["size"], event["sha256"])
        if record.sequence <= applied:
            if record.sequence == applied and check is not None and event_crc(event) != check:
                raise IndexMismatchError(
                    f"the index's record {applied} is not this journal's (another journal?)"
                )
            if record.sequence > feed.last_sequence and event.get("type") in EVENT_SOURCES:
                # Its event may not have reached the event log before the crash, and only
                # applying the record derives it again.
                raise IndexMismatchError(
                    f"the event log ends before record {record.sequence}, which the index holds"
                )
            continue  # the index holds its effects already
        applier.apply(record.sequence, event)
        if record.sequence % REPLAY_BATCH == 0:
            applier.end_batch(record.sequence)
    applier.end_batch(journal.stats().last_sequence)
    return recent
