"""Reference counts of payload ids: a payload is released exactly when its last holder goes.

Versions and multipart parts hold payloads; the state's parts (``state``, ``upload_state``)
share one ``PayloadRefs`` so that a payload is released only when nothing at all holds it,
even if the engine ever shares one payload between records.

Thread-safety: like ``MetaState``, event-loop thread only.
"""

from __future__ import annotations

from service.meta.outcome import Outcome, rejected


class PayloadRefs:
    """payload id -> how many records hold it."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def ref(self, payload_id: str) -> None:
        self._counts[payload_id] = self._counts.get(payload_id, 0) + 1

    def unref(self, payload_id: str, released: list[str]) -> None:
        """Drop one hold; the id goes to ``released`` when it was the last."""
        count = self._counts[payload_id] - 1
        if count:
            self._counts[payload_id] = count
        else:
            del self._counts[payload_id]
            released.append(payload_id)

    def refuse(self, code: str, message: str, payload_id: str | None = None) -> Outcome:
        """A rejection; the event's own payload is released unless something holds it."""
        if payload_id is None or payload_id in self._counts:
            return rejected(code, message)
        return rejected(code, message, [payload_id])

    def ids(self) -> set[str]:
        """Every payload id held (a copy: safe to use off-loop)."""
        return set(self._counts)
