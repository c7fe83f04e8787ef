"""Open descriptors of recently read payloads, so that reads need not open files again.

Why: a small or ranged GET that is not in the body cache used to cost an executor job (open,
seek, read, close) and the hop to a thread and back, most of such a request's cost. Payload
files are immutable once promoted and their ids are never reused, so a descriptor opened
once can serve every later read of the payload. With it, a read whose pages are in the page
cache is done on the event loop by ``os.preadv(..., RWF_NOWAIT)`` (``fsseam.fs.pread_cached``):
the kernel copies the bytes when it can do so without waiting for the disk, and says EAGAIN
otherwise, and only then does the read go to the executor (``fsseam.fs.pread``).

Bounds and lifetime: at most ``max_open`` descriptors, least-recently-used first out. A
descriptor in use by an executor read is pinned (``acquire``/``release``) and closed only
once its last user lets go, so a thread never reads a descriptor number that was closed and
reused meanwhile. The engine drops a payload's descriptor before it removes the file
(``PayloadCache.discard``), so an open descriptor never keeps a deleted payload's blocks.
Another serving process cannot do that for us: when the writer removes a payload a worker
holds open, the worker learns only that the index's sequence moved. It then calls
``note_changes``, and ``drop_unlinked`` closes the descriptors whose file has no name left
(``st_nlink == 0``): one ``fstat`` per kept descriptor (about 1 us each), done at most once
every ``unlinked_every`` seconds however often the sequence moves, and never while nothing
moved.

Only files of the real file system have a descriptor (``ReadableFile.fileno``); others (the
crash tests' simulated disk) are never kept here and are read on the executor as before.

Thread-safety: the cache lives on the event-loop thread; a pinned descriptor may be read
with ``pread`` on any thread.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from fsseam.fs import ReadableFile, link_count

DEFAULT_MAX_OPEN = 128
UNLINKED_CHECK_SECONDS = 1.0
"""At most one look for descriptors of removed files this often (see the module docstring)."""


@dataclass(slots=True)
class _Entry:
    file: ReadableFile
    users: int = 0
    dropped: bool = False
    """Evicted or discarded while pinned: close when the last user releases it."""


class OpenPayloads:
    """Read descriptors by payload id; see the module docstring."""

    def __init__(
        self, max_open: int = DEFAULT_MAX_OPEN, unlinked_every: float = UNLINKED_CHECK_SECONDS
    ) -> None:
        if max_open < 0:
            raise ValueError("max_open must not be negative")
        self.max_open = max_open
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._pinned: dict[int, _Entry] = {}
        """Entries no longer in ``_entries`` but still in use, by ``id(file)``."""
        self.unlinked_every = unlinked_every
        self._unlinked_due = False
        self._unlinked_checked = -unlinked_every

    def __len__(self) -> int:
        return len(self._entries)

    def acquire(self, payload_id: str) -> ReadableFile | None:
        """The payload's open descriptor, pinned until ``release``; None when not held."""
        entry = self._entries.get(payload_id)
        if entry is None:
            return None
        self._entries.move_to_end(payload_id)
        entry.users += 1
        return entry.file

    def adopt(self, payload_id: str, file: ReadableFile) -> bool:
        """Keep ``file`` (just opened, pinned once for the caller) if it can be kept; the
        caller then ``release``s it as if it had acquired it. False: not kept, the caller
        closes it itself."""
        if self.max_open == 0 or file.fileno() is None or payload_id in self._entries:
            return False
        self._entries[payload_id] = _Entry(file, users=1)
        while len(self._entries) > self.max_open:
            _, evicted = self._entries.popitem(last=False)
            self._drop(evicted)
        return True

    def release(self, payload_id: str, file: ReadableFile) -> None:
        """Unpin a descriptor from ``acquire`` or ``adopt``."""
        entry = self._entries.get(payload_id)
        if entry is None or entry.file is not file:
            entry = self._pinned.get(id(file))
            if entry is None:
                return
        entry.users -= 1
        if entry.dropped and entry.users <= 0:
            self._pinned.pop(id(file), None)
            entry.file.close()

    def discard(self, payload_ids: Iterable[str]) -> None:
        """Close the descriptors of payloads about to be removed (or once unpinned)."""
        if not self._entries:
            return
        for payload_id in payload_ids:
            entry = self._entries.pop(payload_id, None)
            if entry is not None:
                self._drop(entry)

    def note_changes(self, moved: bool) -> None:
        """Another process may have removed payloads (``moved``: the index's sequence moved
        since the last call): look for kept descriptors of removed files, when due."""
        self._unlinked_due = self._unlinked_due or moved
        if not self._unlinked_due:
            return
        now = time.monotonic()
        if now - self._unlinked_checked >= self.unlinked_every:
            self._unlinked_due, self._unlinked_checked = False, now
            self.drop_unlinked()

    def drop_unlinked(self) -> int:
        """Close (or, if pinned, close once released) the kept descriptors whose file has no
        name left; how many were dropped."""
        gone = [
            payload_id for payload_id, entry in self._entries.items() if link_count(entry.file) == 0
        ]
        self.discard(gone)
        return len(gone)

    def clear(self) -> None:
        entries = list(self._entries.values())
        self._entries.clear()
        for entry in entries:
            self._drop(entry)

    def _drop(self, entry: _Entry) -> None:
        if entry.users > 0:
            entry.dropped = True
            self._pinned[id(entry.file)] = entry
            return
        entry.file.close()
