"""A worker's state source: the writer's index, read-only, looked at again in each request.

A worker reads object versions straight from the shared LMDB index (readers in other
processes see a consistent MVCC snapshot, without locks); it never opens the journal.

The rest of the state (buckets, users, keys, sessions, jobs, lifecycle, webhooks) and the
index's decoded-version cache are the writer's as of some sequence. They are dropped and read
again whenever the index's last applied sequence moved: checked at the first read of the
state in each request (``begin_request`` marks it due; ``service.procs.fresh_state`` calls
it as each request starts) and after each commit of this worker, so a 200 from any process
is seen by the next request on every process. The check is one LMDB read (about 3 us); when
the sequence moved, the versions cache is dropped and, if the stored rest changed, it is
decoded again (about 70 us for a small one). Usage and payload references are read from the
index as they are, never kept here. A per-request check was chosen over an invalidation
message from the writer: a message can arrive after the next request on another connection,
the check cannot.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import os

from service.engine.core import Engine
from service.index.lmdb_index import LmdbObjectIndex
from service.index.opening import INDEX_DIRNAME
from service.meta import MetaState
from service.meta.snapshot import decode_image
from service.storage.descriptors import OpenPayloads


class SharedIndexState:
    """``service.engine.core.StateSource``: the state as of the index's last sequence."""

    def __init__(self) -> None:
        self._seen = -1
        self._check_due = True
        self._current = MetaState()
        self._rest = b""
        self._reader: LmdbObjectIndex | None = None
        """The writer's index, read only; open from ``start`` to ``stop``."""
        self._descriptors: OpenPayloads | None = None

    def current(self) -> MetaState:
        if self._check_due:
            self._check_due = False
            self._refresh()
        return self._current

    def begin_request(self) -> None:
        """A request starts: its first read of the state checks the index's sequence."""
        self._check_due = True

    def sequence(self) -> int:
        """The last sequence the writer's index applied, as this process last read it."""
        return max(self._seen, 0)

    async def start(self, engine: Engine) -> None:
        self._descriptors = engine.payload_cache.descriptors
        self._reader = LmdbObjectIndex(
            os.path.join(engine.config.data_dir, INDEX_DIRNAME), readonly=True
        )
        self._refresh()

    async def stop(self) -> None:
        if self._reader is not None:
            reader, self._reader = self._reader, None
            reader.close()

    def _refresh(self) -> None:
        index, descriptors = self._reader, self._descriptors
        if index is None or descriptors is None:
            return  # not started, or stopped
        sequence, _ = index.applied()
        # Payloads the writer removed meanwhile: let go of their kept descriptors.
        descriptors.note_changes(moved=sequence != self._seen)
        if sequence == self._seen:
            return
        rest = index.rest()
        if rest is None:
            return
        index.drop_cache()
        if rest != self._rest:  # most batches (object writes) leave the rest as it was
            self._current = MetaState.reopen(decode_image(rest), index)
            self._rest = rest
        self._seen = sequence
