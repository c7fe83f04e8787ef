"""The journal's exception tree.

::

    JournalError                    base of everything the journal raises on purpose
    ├── JournalCorruptionError      opening found damage to records known to be durable
    ├── JournalFailedError          a write or fsync failed earlier: the journal is fail-stop
    ├── SnapshotDamagedError        a snapshot read unverified at open failed its check later
    └── JournalClosedError          append after close()

Why a corruption error instead of silent truncation: a torn tail after a crash is normal and
is cut off quietly, but a damaged record at or below a sequence the log had already promised
durable means the disk lost acknowledged data. Dropping it would make the server forget
writes it confirmed, so opening stops and names the place; ``JournalOptions(repair=True)``
accepts the loss explicitly (the cut bytes are kept beside the segment).

Programming errors (appending before replay is exhausted, a snapshot sequence out of range,
an event that is not a dict with a "type") raise the ordinary ``RuntimeError``,
``ValueError`` and ``TypeError``: they are bugs in the caller, not states of the log.

Thread-safety: plain exception classes, no shared state.
"""

from __future__ import annotations


class JournalError(Exception):
    """Base class of the journal's own errors."""


class JournalCorruptionError(JournalError):
    """A record that was already durable is damaged; opening refuses to drop it."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path} at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class JournalFailedError(JournalError):
    """A write or fsync failed; nothing more is written (fsync is never retried)."""


class JournalClosedError(JournalError):
    """The journal was closed."""


class SnapshotDamagedError(JournalError):
    """The snapshot's data does not match its checksum (read after an open that checked only
    its header: ``JournalOptions(verify_snapshot=False)``). Open again with verification to
    fall back to an older snapshot."""
