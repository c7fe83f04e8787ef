"""journal: the server's append-only event log (msgpack, crc32c, stdlib, and ``fsseam``).

Modules, bottom up (over the file-system seam ``fsseam``, a package of its own):
``framing`` (record bytes, pure), ``segment`` (segment files), ``snapshot`` (snapshot
files), ``recovery`` (opening: validate, cut, guard), ``writer`` (batch writes, rolls,
fsyncs), ``journal`` (the public ``Journal`` with group commit). The byte format is in
``docs/journal-format.md``.

Thread-safety: see each module; ``Journal`` is used from one event loop.

May import (docs/architecture.md, "Layers"): ``fsseam``.
"""

from fsseam.fs import FileSystem, RealFileSystem
from journal.errors import (
    JournalClosedError,
    JournalCorruptionError,
    JournalError,
    JournalFailedError,
    SnapshotDamagedError,
)
from journal.journal import Journal
from journal.model import JournalOptions, JournalStats, Record
from journal.snapshot import Snapshot

__all__ = [
    "FileSystem",
    "Journal",
    "JournalClosedError",
    "JournalCorruptionError",
    "JournalError",
    "JournalFailedError",
    "JournalOptions",
    "JournalStats",
    "RealFileSystem",
    "Record",
    "Snapshot",
    "SnapshotDamagedError",
]
