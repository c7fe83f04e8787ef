"""journal: the server's append-only event log, standalone (msgpack, crc32c, stdlib only).

Modules, bottom up: ``fs`` (the file-system seam) and ``simfs`` (its crash-testing double),
``framing`` (record bytes, pure), ``segment`` (segment files), ``snapshot`` (snapshot
files), ``recovery`` (opening: validate, cut, guard), ``writer`` (batch writes, rolls,
fsyncs), ``journal`` (the public ``Journal`` with group commit), ``crashpoints`` (named
places a crash harness can stop the process). The byte format is in
``docs/journal-format.md``.

Thread-safety: see each module; ``Journal`` is used from one event loop.
"""

from journal.errors import (
    JournalClosedError,
    JournalCorruptionError,
    JournalError,
    JournalFailedError,
)
from journal.fs import FileSystem, RealFileSystem
from journal.journal import Journal
from journal.model import JournalOptions, JournalStats, Record, Snapshot

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
]
