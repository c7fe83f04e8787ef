"""The payloads quarantined after failing verification: never served, never joined.

A start after an unclean balanced run verifies the payloads named since the last checkpoint
(``service.engine.journaled``) and the scrub re-reads every stored version
(``service.upkeep.scrub``); each payload found bad is moved aside on disk
(``service.storage.integrity``) and added here. Readers check membership before serving a
version. A role may listen to additions: the writer tells its workers of each one, so no
process serves the payload from the next request on.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any


class Quarantine(AbstractSet[str]):
    """The quarantined payload ids, and who is told of each one added."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self.listeners: list[Callable[[list[str]], None]] = []
        """Told of every id newly added (not of ``replace``)."""

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> AbstractSet[Any]:
        return set(it)  # set operations give plain sets

    def __contains__(self, payload_id: object) -> bool:
        return payload_id in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, payload_id: str) -> None:
        """Quarantine one payload."""
        self.update((payload_id,))

    def update(self, payload_ids: Iterable[str]) -> None:
        """Quarantine ``payload_ids``; the listeners hear of those not quarantined yet."""
        added = [each for each in payload_ids if each not in self._ids]
        if not added:
            return
        self._ids.update(added)
        for listener in self.listeners:
            listener(added)

    def replace(self, payload_ids: Iterable[str]) -> None:
        """What the disk says is quarantined now (a start, a worker reading it again)."""
        self._ids = set(payload_ids)

    def forget(self, payload_ids: Iterable[str]) -> None:
        """Payloads nothing references any more: their quarantine is over."""
        self._ids.difference_update(payload_ids)
