"""What a worker notes to the writer instead of keeping: key uses and request figures.

The writer answers ``system/performance`` and the access keys' ``last_used_at`` for the whole
service (workers forward those routes, ``service.procs.forward``), so a worker's observations
go to it over the commit socket as notes (``WriterLink.note_*``), batched per loop iteration.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from service.engine.key_usage import KeyUsage
from service.observability import PerformanceRecorder
from service.procs.writer_link import WriterLink


class NotedKeyUsage(KeyUsage):
    """Uses told to the writer, which keeps every process's and journals them."""

    def __init__(self, link: WriterLink) -> None:
        super().__init__()
        self._link = link

    def touch(self, access_key_id: str, at_ms: int) -> None:
        self._link.note_use(access_key_id, at_ms)


class NotedPerformance(PerformanceRecorder):
    """PUT and GET figures told to the writer's recorder."""

    def __init__(self, link: WriterLink) -> None:
        super().__init__()
        self._link = link

    def record_put(
        self,
        size_bytes: int,
        stage_write_s: float,
        flush_s: float,
        promote_s: float,
        journal_commit_s: float,
        total_s: float,
    ) -> None:
        self._link.note_put(
            [size_bytes, stage_write_s, flush_s, promote_s, journal_commit_s, total_s]
        )

    def record_stored(self, count: int, size_bytes: int) -> None:
        self._link.note_stored([count, size_bytes])

    def record_get(self, size_bytes: int, first_byte_s: float, total_s: float) -> None:
        self._link.note_get([size_bytes, first_byte_s, total_s])
