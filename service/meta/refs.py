"""Reference counts of payload ids: a payload is released exactly when its last holder goes.

Versions and multipart parts hold payloads; the state's parts (``state``, ``upload_state``)
share one ``PayloadRefs`` so that a payload is released only when nothing at all holds it,
even if the engine ever shares one payload between records.

The counts live where the object versions live (``RefCounts``: a dict in memory, a table
of the persistent index), so that a start never recounts them and the GC asks the store
whether a payload is referenced instead of copying every id.

Thread-safety: like ``MetaState``, event-loop thread only.
"""

from __future__ import annotations

from typing import Protocol

from service.meta.outcome import Outcome, rejected


class RefCounts(Protocol):
    """Where the counts are kept: 0 means "not held" (and is not stored)."""

    def ref_count(self, payload_id: str) -> int: ...
    def set_ref_count(self, payload_id: str, count: int) -> None: ...


class PayloadRefs:
    """payload id -> how many records hold it, kept in ``counts``."""

    def __init__(self, counts: RefCounts) -> None:
        self._counts = counts

    def ref(self, payload_id: str) -> None:
        self._counts.set_ref_count(payload_id, self._counts.ref_count(payload_id) + 1)

    def unref(self, payload_id: str, released: list[str]) -> None:
        """Drop one hold; the id goes to ``released`` when it was the last."""
        count = self._counts.ref_count(payload_id) - 1
        self._counts.set_ref_count(payload_id, max(count, 0))
        if count <= 0:
            released.append(payload_id)

    def refuse(self, code: str, message: str, payload_id: str | None = None) -> Outcome:
        """A rejection; the event's own payload is released unless something holds it."""
        if payload_id is None or self._counts.ref_count(payload_id) > 0:
            return rejected(code, message)
        return rejected(code, message, [payload_id])
