"""Small files grouped into batch uploads (docs/batch.md): which files, and how many at once.

A request per 4 KiB file costs more CPU than its bytes, on both sides; a batch upload sends
hundreds of files as one tar stream. ``Batcher`` collects the small files of a local-to-remote
walk, in walk order, and hands out a full group as soon as it reaches ``files`` files or
``bytes`` bytes; the engine sends each group as one ``put_many`` on its bounded pool, so
several groups are in flight at once and memory holds at most the pool's groups of entries
(never their bytes: the client reads each file while the tar is sent). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from service.cli.transfer.walk import Entry

__all__ = ["BATCH_BYTES", "BATCH_FILES", "BATCH_MAX_FILE", "Batcher", "Pair"]

MIB = 1024 * 1024
#: Files below this size go in batches: above it a file's own request costs little beside its
#: bytes (docs/cli.md, "Speed and memory").
BATCH_MAX_FILE = 1 * MIB
#: A batch holds at most this many files...
BATCH_FILES = 256
#: ...and at most about this many bytes.
BATCH_BYTES = 8 * MIB

Pair = tuple[Entry, Entry | None]
"""A source file and what the target holds under its key (None: nothing)."""


@dataclass
class Batcher:
    """Groups small files; see the module docstring.

    >>> batcher = Batcher(files=2, bytes=100, max_file=50)
    >>> batcher.takes(Entry("big", 60)), batcher.takes(Entry("small", 10))
    (False, True)
    >>> batcher.add((Entry("a", 10), None)), [p[0].rel for p in batcher.add((Entry("b", 1), None))]
    (None, ['a', 'b'])
    >>> batcher.rest()
    []
    """

    files: int = BATCH_FILES
    bytes: int = BATCH_BYTES
    max_file: int = BATCH_MAX_FILE
    _pending: list[Pair] = field(default_factory=list)
    _size: int = 0

    def takes(self, entry: Entry) -> bool:
        """Whether ``entry`` goes in a batch (else it gets a request of its own)."""
        return entry.size < self.max_file

    def add(self, pair: Pair) -> list[Pair] | None:
        """Add a file; the full group once it is full, else None."""
        self._pending.append(pair)
        self._size += pair[0].size
        if len(self._pending) >= self.files or self._size >= self.bytes:
            return self.rest()
        return None

    def rest(self) -> list[Pair]:
        """The files collected so far (maybe none), and start afresh."""
        group, self._pending, self._size = self._pending, [], 0
        return group
