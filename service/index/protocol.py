"""What the engine asks of a persistent index, whatever holds it.

``PersistentIndex`` is the object store the state applies into (``ObjectStore``) plus the
checkpoint around it: one write transaction per journal batch, the sequence (and CRC-32)
of the last event applied, the newest event time applied (the object lock's clock rule,
``service.meta.lock_state``), the rest of the state, the snapshot it was current at, a layout
mark, and an explicit sync. ``service.index.lmdb_index.LmdbObjectIndex`` is the real one;
the crash tests' simulated disk cannot hold LMDB's memory map, so they run a simulated
index over the simulated files whose durable image is what its last sync made durable
(``tests/crash/simindex.py``).

Thread-safety: as each implementation says (one writer; readers on any thread).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from service.meta.object_index import ObjectStore


class IndexUnreadableError(Exception):
    """The index's files cannot be opened (a start then wipes and rebuilds them)."""


class StoredRowsReader(Protocol):
    """A read-only view of the committed versions, for a snapshot encoded on a thread."""

    def count(self, bucket: str) -> int: ...
    def rows(self, bucket: str) -> Iterator[tuple[str, bytes]]: ...
    def close(self) -> None: ...


class PersistentIndex(ObjectStore, Protocol):
    """An ``ObjectStore`` that outlives the process, checkpointing the journal's apply."""

    def begin(self) -> None: ...
    @property
    def in_batch(self) -> bool: ...
    def commit(
        self, sequence: int, crc: int, rest: bytes | None = None, latest_at: int | None = None
    ) -> None: ...
    def rest(self) -> bytes | None: ...
    def latest_at(self) -> int: ...
    def wipe(self) -> None: ...
    def format(self) -> bytes | None: ...
    def sync(self) -> None: ...
    def applied(self) -> tuple[int, int]: ...
    def record_snapshot(self, sequence: int, crc: int) -> None: ...
    def snapshot_mark(self) -> tuple[int, int]: ...
    def reader(self) -> StoredRowsReader: ...
    def clear_stale_readers(self) -> int: ...
    def close(self) -> None: ...


IndexFactory = Callable[[str], PersistentIndex]
"""Opens the index at a directory (``IndexUnreadableError`` when its files are damaged)."""
