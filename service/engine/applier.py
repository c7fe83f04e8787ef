"""The one way a committed record reaches the state: ``Applier``, used by every commit and
by replay, so run time and a start cannot diverge.

A record is applied to the ``MetaState`` (``MetaState.apply``, which re-checks every
condition), to the persistent index in the same step (one LMDB write transaction per batch
of records, begun by the first record of the batch), and to the event feed, which derives
the record's object event, if any. ``end_batch`` commits the index transaction with the
batch's last sequence and the CRC-32 of its last event (the "consistent index",
``service.index.opening``), and with the rest of the state (buckets, users, sessions: small)
only when a record of the batch may have changed it: an accepted object write (or a
version's retention or legal hold) changes the object index alone; and with the newest
record time (``latest_at``, the object lock's clock rule).

The live commit path (``service.engine.journaled``) calls ``apply`` from the journal's
listener and ``end_batch`` from its batch listener, before any waiter of the batch resumes;
replay (``service.engine.recovery``) calls them record by record, ending a batch every
``REPLAY_BATCH`` records and at the end.

Thread-safety: one thread at a time (the event loop at run time, the executor at start).
"""

from __future__ import annotations

from typing import Any

from service.events.feed import EventFeed
from service.index.opening import event_crc, rest_of
from service.index.protocol import PersistentIndex
from service.meta import MetaState, Outcome, records

OBJECT_EVENTS = frozenset(
    {
        records.OBJECT_STORED,
        records.OBJECT_DELETED,
        records.OBJECT_RETENTION_SET,
        records.OBJECT_LEGAL_HOLD_SET,
    }
)
"""Records whose effects lie wholly in the object index (when accepted)."""


class Applier:
    """Applies committed records to ``state``, ``index`` (None: versions in memory) and
    ``feed``; see the module docstring."""

    def __init__(self, state: MetaState, index: PersistentIndex | None, feed: EventFeed) -> None:
        self.state = state
        self.index = index
        self.feed = feed
        self._rest_changed = False
        self._last: dict[str, Any] | None = None
        """The batch's last event (its CRC-32 goes with the batch's sequence)."""

    def apply(self, sequence: int, event: dict[str, Any]) -> Outcome:
        """Apply the record ``sequence`` holding ``event``; what applying it did."""
        index = self.index
        if index is not None and not index.in_batch:
            index.begin()
        outcome = self.state.apply(event)
        self._last = event
        if event.get("type") not in OBJECT_EVENTS or not outcome.ok:
            self._rest_changed = True
        self.feed.observe(sequence, event, outcome, self.state.bucket_id_of)
        return outcome

    def end_batch(self, sequence: int) -> None:
        """Commit the batch's index transaction at ``sequence`` (its last record's)."""
        index = self.index
        if index is None or not index.in_batch or self._last is None:
            return
        rest = rest_of(self.state) if self._rest_changed else None
        self._rest_changed = False
        self.feed.write_pending()
        latest = self.state.locks.latest_at  # the object lock's clock rule, exact at a start
        index.commit(sequence, event_crc(self._last), rest, latest)
