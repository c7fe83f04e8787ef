"""What the primary keeps for the readers that follow its journal (the continuous archive,
and standbys): the journal segments from their position on, and the payload files that
records from there on released or referenced, until every reader has passed them. Like a
Postgres replication slot, which keeps WAL for a standby that is behind.

A reader is a function giving the first sequence it still needs (``held_from``). Until every
reader has learnt its position (``settled``), nothing is let go: the journal keeps every
segment and the start's orphan sweep waits, because a payload an unarchived record names may
be lying there as an orphan after a crash.

- ``release(sequence, ids)``: the payloads a record released; those a reader still needs are
  kept, the rest returned for removal now. ``due()`` hands back the kept ones whose record
  every reader has passed.
- ``pin(sequence, ids)``: payloads found referenced by records a reader has not yet passed,
  at its start (they may be orphans now): protected from the GC, never removed by us.
- ``holds(payload_id)``: whether the GC must keep a file.

Thread-safety: event-loop thread, except ``retain_from`` and ``holds``, which read plain
values and may be called from the journal's thread and the GC's.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable, Iterable

from service.meta.object_index import PayloadHolder

_EVERYTHING = 0
"""``retain_from`` before every reader is settled: keep every segment."""


class ReaderHolds:
    """The union of what the journal's readers still need (module docstring)."""

    def __init__(self) -> None:
        self._readers: dict[str, Callable[[], int]] = {}
        self._unsettled: set[str] = set()
        self._released: deque[tuple[int, list[str]]] = deque()
        self._pinned: deque[tuple[int, list[str]]] = deque()
        self._kept: Counter[str] = Counter()
        self._settled = asyncio.Event()
        self._settled.set()

    def add(self, name: str, held_from: Callable[[], int]) -> None:
        """A reader whose position is not known yet (call ``settle`` once it is)."""
        self._readers[name] = held_from
        self._unsettled.add(name)
        self._settled.clear()

    def settle(self, name: str) -> None:
        self._unsettled.discard(name)
        if not self._unsettled:
            self._settled.set()

    def remove(self, name: str) -> None:
        self._readers.pop(name, None)
        self.settle(name)

    async def settled(self) -> None:
        await self._settled.wait()

    def floor(self) -> int | None:
        """The first sequence some reader still needs; None without readers."""
        if not self._readers:
            return None
        if self._unsettled:
            return _EVERYTHING
        return min(held_from() for held_from in self._readers.values())

    def retain_from(self) -> int:
        """For ``Journal.retain_from``: keep segments from here on."""
        floor = self.floor()
        return 1 << 62 if floor is None else floor

    def release(self, sequence: int, payload_ids: Iterable[str]) -> list[str]:
        """Of the payloads record ``sequence`` released, those that may go now."""
        ids = list(payload_ids)
        floor = self.floor()
        if floor is None or floor > sequence or not ids:
            return ids
        self._released.append((sequence, ids))
        self._kept.update(ids)
        return []

    def pin(self, sequence: int, payload_ids: Iterable[str]) -> None:
        ids = list(payload_ids)
        if ids:
            self._pinned.append((sequence, ids))
            self._kept.update(ids)

    def due(self) -> list[str]:
        """Kept payloads every reader has passed: remove them now. Unpins likewise."""
        floor = self.floor()
        if floor is None:
            floor = 1 << 62
        out: list[str] = []
        while self._released and self._released[0][0] < floor:
            ids = self._released.popleft()[1]
            self._kept.subtract(ids)
            out.extend(ids)
        unpinned: list[str] = []
        while self._pinned and self._pinned[0][0] < floor:
            ids = self._pinned.popleft()[1]
            self._kept.subtract(ids)
            unpinned.extend(ids)
        for payload_id in (*out, *unpinned):
            if self._kept.get(payload_id, 0) <= 0:
                self._kept.pop(payload_id, None)
        return out

    def holds(self, payload_id: str) -> bool:
        return self._kept.get(payload_id, 0) > 0

    def also_holding(self, holder: PayloadHolder) -> PayloadHolder:
        """``holder`` (the state's, for a GC pass) that also keeps what readers need."""
        return _HeldToo(holder, self)


class _HeldToo:
    def __init__(self, holder: PayloadHolder, holds: ReaderHolds) -> None:
        self._holder = holder
        self._holds = holds

    def __call__(self, payload_id: str) -> bool:
        return self._holder(payload_id) or self._holds.holds(payload_id)

    def close(self) -> None:
        self._holder.close()
