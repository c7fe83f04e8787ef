"""The engine of a worker process: reads the writer's index, commits through the writer.

A worker moves payload bytes itself (staging, hashing, fsync, promote, reads: the inherited
``PayloadStore`` and executor) and reads object versions straight from the shared LMDB index;
it never opens the journal. Its metadata commits go to the writer (``WriterLink``).

The rest of the state (buckets, users, keys, sessions, jobs, lifecycle, webhooks) and the
index's decoded-version cache are the writer's as of some sequence. They are dropped and read
again whenever the index's last applied sequence moved: checked at the first use of ``state``
in each request (``begin_request``) and after each commit of this worker, so a 200 from any
process is seen by the next request on every process. The check is one LMDB read (about
3 us); when the sequence moved, the versions cache is dropped and, if the stored rest changed,
it is decoded again (about 70 us for a small one). Usage and payload references are read from
the index as they are, never kept here.

Payloads are never unlinked here: one this worker promoted and could not commit is left to the
writer's orphan sweep (its grace period covers it), because a commit whose answer was lost may
still have named it.

Thread-safety: event-loop thread only, like ``Engine``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from typing import Any

from fsseam.fs import FileSystem
from service.config import Config
from service.engine.core import Engine
from service.index.lmdb_index import LmdbObjectIndex
from service.index.opening import INDEX_DIRNAME
from service.meta import MetaState, Outcome
from service.meta.snapshot import decode_image
from service.procs.notes import NotedKeyUsage
from service.procs.writer_link import WriterLink

log = logging.getLogger("service.procs")

QUARANTINE_RELOAD_SECONDS = 5.0
"""How often the writer's quarantine is read again from disk (the writer also tells of each
payload it quarantines as it does, over the commit socket; this catches what a restart of
either lost)."""


class WorkerEngine(Engine):
    """An ``Engine`` whose state is the writer's index and whose commits go to the writer."""

    commits_here = False

    def __init__(self, config: Config, link: WriterLink, *, fs: FileSystem | None = None) -> None:
        super().__init__(config, fs=fs)
        self._link = link
        self.key_usage = NotedKeyUsage(link)
        link.on_note = self._on_note
        self._seen = -1
        self._check_due = True
        self._current = MetaState()
        self._rest = b""
        self._reader: LmdbObjectIndex | None = None
        """The writer's index, read only (``Engine.index`` stays None: nothing here writes)."""

    @property
    def state(self) -> MetaState:
        """The state as of the index's last sequence (see the module docstring)."""
        if self._check_due:
            self._check_due = False
            self._refresh()
        return self._current

    @state.setter
    def state(self, value: MetaState) -> None:
        self._current = value

    def begin_request(self) -> None:
        """A request starts: its first read of ``state`` checks the index's sequence."""
        self._check_due = True

    def _refresh(self) -> None:
        index = self._reader
        if index is None:
            return
        sequence, _ = index.applied()
        # Payloads the writer removed meanwhile: let go of their kept descriptors.
        self.payload_cache.descriptors.note_changes(moved=sequence != self._seen)
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

    async def start(self) -> None:
        self._reader = LmdbObjectIndex(
            os.path.join(self.config.data_dir, INDEX_DIRNAME), readonly=True
        )
        self._refresh()
        await self._reload_quarantine()
        self.add_background_job(QUARANTINE_RELOAD_SECONDS, self._reload_quarantine)

    def _on_note(self, note: dict[str, Any]) -> None:
        """The writer quarantined payloads (its scrub): refuse them from now on."""
        self.quarantined.update(note.get("quarantined", ()))

    async def _reload_quarantine(self) -> None:
        await self._link.connect()
        self.quarantined = await self.run_blocking(self.integrity.quarantined_ids)

    async def commit(self, event: dict[str, Any]) -> Outcome:
        try:
            return await self._link.commit(event)
        finally:
            self._check_due = True

    def release_payloads(self, payload_ids: Iterable[str]) -> None:
        """Forget cached bodies; the files are the writer's to remove (see the docstring)."""
        self.payload_cache.discard(list(payload_ids))

    async def stop(self) -> None:
        self._stopping = True
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._link.close()
        if self._reader is not None:
            reader, self._reader = self._reader, None
            reader.close()
        self.executor.shutdown(wait=True)
