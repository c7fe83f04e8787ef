"""The journal's value types: options, records and statistics (``Snapshot`` lives with its file
format in ``journal.snapshot``, which reads its data when asked).

All are frozen dataclasses: they cross threads (records are built in the replay generator and
handed to the server; stats are read from any thread) and nothing may mutate them afterwards.

Thread-safety: immutable values.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Durability = Literal["strict", "balanced"]

# The record header stores the body length in 32 bits.
_MAX_LENGTH_FIELD = (1 << 32) - 1


@dataclass(frozen=True)
class JournalOptions:
    """How the journal writes and recovers.

    ``durability``: "strict" resolves an append only after its batch is fsynced; "balanced"
    resolves it once write() handed the batch to the OS (a power loss may lose the newest
    records, never reorder or corrupt them). ``segment_bytes``: a segment is closed and a new
    one started once it reaches this size (tests shrink it to exercise rolling).
    ``verify_snapshot``: read every byte of the newest snapshot at open to check its crc
    (falling back to an older one when it is damaged); when false, only its header is
    checked at open and the data when it is read (``SnapshotDamagedError``), for a caller
    that usually never reads it (the server, whose index is a newer checkpoint).
    ``max_record_bytes``: the largest event body accepted by ``append`` and the bound a
    record's length field must respect before the reader trusts it. ``repair``: accept the
    loss of damaged durable records at open (the cut bytes are kept in ``.broken-*`` files)
    instead of raising ``JournalCorruptionError``. ``executor``: where blocking file work
    runs; None means the journal owns one thread, which also serialises its writes.
    """

    durability: Durability = "strict"
    segment_bytes: int = 64 * 1024 * 1024
    max_record_bytes: int = 16 * 1024 * 1024
    repair: bool = False
    executor: concurrent.futures.Executor | None = None
    verify_snapshot: bool = True

    def __post_init__(self) -> None:
        if self.durability not in ("strict", "balanced"):
            raise ValueError(f"durability must be 'strict' or 'balanced', not {self.durability!r}")
        if self.segment_bytes <= 0:
            raise ValueError("segment_bytes must be positive")
        if not 1 <= self.max_record_bytes <= _MAX_LENGTH_FIELD:
            raise ValueError(f"max_record_bytes must be between 1 and {_MAX_LENGTH_FIELD}")


@dataclass(frozen=True, slots=True)
class Record:
    """One journaled event and its sequence number."""

    sequence: int
    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class JournalStats:
    """Counters for diagnostics (``/api/v1/system/info`` and metrics)."""

    segments: int
    bytes: int
    """Bytes of the journal's files on disk: live segments plus retained snapshots."""
    last_sequence: int
    """The highest acknowledged sequence (0 when the log is empty)."""
    last_snapshot_sequence: int
    last_snapshot_at: float | None
    replay_seconds: float | None
    """Time spent validating the log at open plus iterating ``replay()``; None until done."""
    appends: int
    """Appends acknowledged since open."""
    batches: int
    """Group commits (one write, and in strict mode one fsync, each) since open."""


def _slot_setter(name: str) -> Callable[[Any, Any], None]:
    setter: Callable[[Any, Any], None] = Record.__dict__[name].__set__
    return setter


# Why these exist: replay must sustain 500,000 records/s in CPython, and the generated frozen
# ``__init__`` (two ``object.__setattr__`` calls through Python) costs as much as decoding
# the event. Writing the slots through their descriptors builds the identical object in a
# third of the time; the replay loop inlines them (``new_record`` is the readable form).
set_record_sequence = _slot_setter("sequence")
set_record_event = _slot_setter("event")


def new_record(sequence: int, event: dict[str, Any]) -> Record:
    """Build a ``Record`` without its frozen ``__init__`` (see above)."""
    record: Record = object.__new__(Record)
    set_record_sequence(record, sequence)
    set_record_event(record, event)
    return record
