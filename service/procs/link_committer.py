"""A worker's committer: its mutations go to the writer over the local socket.

A worker moves payload bytes itself (staging, hashing, fsync, promote, reads: the engine's
payload side and executor); its metadata commits go to the writer (``WriterLink``), which
commits them with its own committer (``service.procs.writer_service``): ``MetaState.apply``
re-checks every condition there, and the writer's refusals come back as the engine's errors.
After each commit the state is looked at again (``SharedIndexState``): the writer answers
only once the index holds the record.

Payloads are never unlinked here: one this worker promoted and could not commit is left to
the writer's orphan sweep (its grace period covers it), because a commit whose answer was
lost may still have named it. The writer's quarantine is read from disk at start and every
``QUARANTINE_RELOAD_SECONDS``, and the writer tells of each payload it quarantines as it does
(a note on the link).

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from typing import Any

from journal import JournalStats
from service.engine.core import Engine
from service.meta import Outcome
from service.procs.shared_state import SharedIndexState
from service.procs.writer_link import WriterLink

QUARANTINE_RELOAD_SECONDS = 5.0
"""How often the writer's quarantine is read again from disk (the writer also tells of each
payload it quarantines as it does, over the commit socket; this catches what a restart of
either lost)."""


class LinkCommitter:
    """``service.engine.core.Committer`` of a worker: commits through the writer."""

    replay_seconds = 0.0
    """Nothing replays here."""
    engine: Engine
    """Set at ``start``."""

    def __init__(self, link: WriterLink, shared: SharedIndexState) -> None:
        self._link = link
        self._shared = shared

    @property
    def read_only_reason(self) -> str | None:
        """None: the writer refuses what it cannot commit, with each commit."""
        return None

    async def start(self, engine: Engine) -> None:
        self.engine = engine
        self._link.on_note = self._on_note
        await self._reload_quarantine()
        engine.add_background_job(QUARANTINE_RELOAD_SECONDS, self._reload_quarantine)

    async def stop(self) -> None:
        await self._link.close()

    async def commit(self, event: dict[str, Any]) -> Outcome:
        try:
            return await self._link.commit(event)
        finally:
            self._shared.begin_request()  # read what the writer applied for it

    def ensure_writable(self) -> None:
        """The writer decides, with each commit."""

    def release(self, payload_ids: list[str]) -> None:
        """The files are the writer's to remove (see the module docstring)."""

    def last_sequence(self) -> int:
        return self._shared.sequence()

    async def sync(self) -> None:
        """The records are the writer's to sync."""

    def journal_stats(self) -> JournalStats | None:
        return None  # the journal is the writer's

    def _on_note(self, note: dict[str, Any]) -> None:
        """The writer quarantined payloads (its scrub): refuse them from now on."""
        self.engine.quarantined.update(note.get("quarantined", ()))

    async def _reload_quarantine(self) -> None:
        engine = self.engine
        await self._link.connect()
        engine.quarantined.replace(await engine.run_blocking(engine.integrity.quarantined_ids))
