"""The one audit chain, appended to by every serving process itself, in turn.

Why: a worker used to send its records to the writer over the local socket, and each of its
recorded requests waited for a round trip through the writer's event loop, which is busy
serving its own half of the connections: with reads recorded, two processes served 0.59x of
what they served without (docs/audit-format.md, "Concurrency"). Now each process seals and
writes its own records, so recording costs each process only its own records, as it does a
single process. The processes take turns under an ``flock`` on ``audit/head``::

    lock -> no process stopped? (below)
         -> read the head (next sequence, prev hash, newest segment, its size)
         -> check it against the segment (the segment's size on disk is the head's)
         -> seal the batch from there, write its lines at the segment's end
         -> write the head -> strict: fsync (each process its own group) -> unlock

The head is a cache of the chain's end so that a holder need not read the segment: it lives
in the page cache (never fsynced, so a power cut may leave it stale or gone), and the
segments stay the truth. A holder that finds it unreadable or disagreeing with the segment
(a process killed after writing lines but before the head, or in the middle of its lines)
recovers the tail as a start does (``segments.find_tail``: a torn line cut, whole cut lines
kept aside and recorded) and goes on from there. Every process's ``open`` recovers likewise,
so a head from before a power cut is never trusted. An ``flock`` ends with its holder, so a
SIGKILL anywhere cannot wedge the others; the kernel finishes or abandons the dead holder's
write before the next holder gets the lock.

A roll names the new segment (size 0) in the head before the file is made: a holder killed
between leaves a head naming a missing segment, i.e. an empty one, which the next holder
makes. ``generation`` changes at every roll and recovery, and a process opens the newest
segment again when it did (a recovery may have removed and remade the file).

Why the fsync is under the lock: lines are durable in the chain's order, so the records on
disk are always a prefix of the chain, and no process writes after lines whose fsync failed
(a failed fsync may have dropped them; a record after them, made durable by a later fsync,
would sit behind a hole). The fsyncs of the processes take turns anyway (one file), and each
still carries its process's whole batch. Fail-stop: a process whose write or fsync failed
takes ``audit/stopped`` before it lets go of the lock, and holds it while it lives; every
holder of the lock first checks that no one holds ``audit/stopped``, else refuses
(``ChainStoppedError``), and so stays stopped until it is restarted too. A lock cannot fail
to be taken for want of space, as a marker written in a file could.

"In order": the chain's order is the order in which batches took the lock; one process's
records keep the order of its ``append`` calls. A record's ``time`` is its request's answer
time, so across processes two neighbours' times may be out of order by the batching delay.

Blocking file work through the ``fsseam`` seam, on the audit log's own thread.
Thread-safety: one thread at a time per ``SharedChain``; processes (and handles) exclude
each other by the lock.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fsseam import crashpoints
from fsseam.durable import make_dirs_durably
from fsseam.fs import FileSystem, ReadableFile, SharedLock, WritableFile
from service.audit.record import Prepared, canonical, prepare, seal_prepared
from service.audit.segments import Tail, find_tail, segment_name
from service.common.timefmt import now_ms, rfc3339_ms

log = logging.getLogger("service.audit")

T = TypeVar("T")
HEAD_NAME = "head"
HEAD_BYTES = 512
"""The head's fixed size: rewritten in place, never longer."""
TAIL_CUT = "audit:tail_cut"
"""The action of the record a start makes when it cut whole lines off the log's end."""


STOPPED_NAME = "stopped"
"""Held by a process whose write or fsync failed, while it lives."""


class ChainStoppedError(Exception):
    """A process's write or fsync failed (it holds ``audit/stopped``): no records here
    until a restart."""


@dataclass(slots=True)
class Head:
    """Where the chain ends, as the last holder of the lock left it."""

    segment: int | None
    """The first sequence (the name) of the newest segment; None: no segment yet."""
    size: int
    day: str
    """The UTC day of the newest segment's first record."""
    next: int
    prev: str
    generation: int = 0

    def encode(self) -> bytes:
        body = canonical(
            {
                "segment": self.segment,
                "size": self.size,
                "day": self.day,
                "next": self.next,
                "prev": self.prev,
                "generation": self.generation,
            }
        )
        return body.ljust(HEAD_BYTES - 1) + b"\n"

    @classmethod
    def decode(cls, data: bytes) -> Head | None:
        try:
            document = json.loads(data)
            return cls(
                document["segment"],
                int(document["size"]),
                str(document["day"]),
                int(document["next"]),
                str(document["prev"]),
                int(document["generation"]),
            )
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None

    @classmethod
    def of_tail(cls, tail: Tail, generation: int) -> Head:
        return cls(
            tail.segment_first,
            tail.segment_bytes,
            tail.segment_day,
            tail.next_sequence,
            tail.last_hash,
            generation,
        )


def cut_record(cut_bytes: int) -> dict[str, Any]:
    """The record the log makes of a cut of whole lines off its end (``action``
    ``audit:tail_cut``, ``status`` 0: the server's own, no request's), so the chain itself
    says so."""
    return {
        "time": rfc3339_ms(now_ms()),
        "request_id": "-",
        "principal": {"user_id": None},
        "source": "",
        "method": "-",
        "path": "",
        "bucket": None,
        "key": None,
        "version_id": None,
        "action": TAIL_CUT,
        "status": 0,
        "bytes": cut_bytes,
    }


class SharedChain:
    """This process's handle on the chain in ``directory`` (see the module docstring)."""

    def __init__(self, fs: FileSystem, directory: str, secret: bytes) -> None:
        self._fs = fs
        self._directory = directory
        self._secret = secret
        self._lock: SharedLock | None = None
        self._stopped: SharedLock | None = None
        self._head_out: WritableFile | None = None
        self._head_in: ReadableFile | None = None
        self._segment: WritableFile | None = None
        self._segment_key: tuple[int, int] | None = None
        """(generation, first sequence) of the segment ``_segment`` writes."""
        self.last_sequence = 0
        """The chain's last sequence as this process last saw it (its own last, or later)."""

    # -- the lock and the head ---------------------------------------------------------------

    def open(self) -> Tail:
        """Recover the tail (cutting a torn line) and write the head, under the lock; the
        tail found (its ``cut_lines``: whole lines cut, which the caller records)."""
        make_dirs_durably(self._fs, self._directory)
        path = os.path.join(self._directory, HEAD_NAME)
        self._lock = self._fs.open_lock(path)
        self._stopped = self._fs.open_lock(os.path.join(self._directory, STOPPED_NAME))
        self._head_out = self._fs.open_append(path)
        self._head_in = self._fs.open_read(path)
        return self.locked(self._open_locked)

    def _open_locked(self) -> Tail:
        old = self._read_head()
        tail = find_tail(self._fs, self._directory, self._secret)
        head = Head.of_tail(tail, (old.generation if old else 0) + 1)
        self._store(head)
        self.last_sequence = head.next - 1
        return tail

    def locked(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` while holding the lock (a prune, a read of the head)."""
        assert self._lock is not None, "open first"
        self._lock.acquire()
        try:
            return function(*args)
        finally:
            self._lock.release()

    def _read_head(self) -> Head | None:
        assert self._head_in is not None
        self._head_in.seek(0)
        return Head.decode(self._head_in.read(HEAD_BYTES))

    def _store(self, head: Head) -> None:
        assert self._head_out is not None
        # In place, no fsync: the head is a cache of the segments' end for the processes
        # running now; every start recovers it from the segments.
        self._head_out.write_at(0, head.encode())

    def _current(self) -> tuple[Head, Tail | None]:
        """The head, checked against the newest segment; recovered from the segments when
        it is unreadable or disagrees (and the tail that recovery found)."""
        if self.stopped():
            raise ChainStoppedError("a process failed to write the audit log")
        head = self._read_head()
        if head is not None and self._agrees(head):
            return head, None
        tail = find_tail(self._fs, self._directory, self._secret)
        if tail.cut_bytes:
            log.warning(
                "a process stopped in the middle of its audit append: cut %d bytes",
                tail.cut_bytes,
            )
        recovered = Head.of_tail(tail, (head.generation if head else 0) + 1)
        self._store(recovered)
        return recovered, tail

    def _agrees(self, head: Head) -> bool:
        if head.segment is None:
            return True
        try:
            size = self._fs.stat(self._segment_path(head.segment)).size
        except FileNotFoundError:
            size = 0  # a roll whose holder died before making the file: an empty segment
        return size == head.size

    def stopped(self) -> bool:
        """Whether a process whose write or fsync failed holds ``audit/stopped`` (never
        called by a process that failed itself: its own hold would be let go here)."""
        assert self._stopped is not None, "open first"
        if not self._stopped.try_acquire():
            return True
        self._stopped.release()
        return False

    def chain_end(self) -> int:
        """The chain's last sequence (the head's; this process's own last if unreadable)."""
        head = self.locked(self._read_head)
        return head.next - 1 if head is not None else self.last_sequence

    # -- appending -----------------------------------------------------------------------------

    def write(self, batch: list[Prepared], day: str, *, sync: bool, roll_bytes: int) -> int:
        """Seal ``batch`` (whose first record is of the UTC ``day``) as the chain's next
        records and write them (with ``sync``, fsync before returning); the sequence of the
        first of them."""
        assert self._lock is not None and self._stopped is not None, "open first"
        self._lock.acquire()
        try:
            head, tail = self._current()
            try:
                return self._write_locked(head, tail, batch, day, sync=sync, roll_bytes=roll_bytes)
            except Exception:
                # Before the lock goes: no process appends after lines that may be lost.
                self._stopped.try_acquire()
                raise
        finally:
            self._lock.release()

    def _write_locked(
        self,
        head: Head,
        tail: Tail | None,
        batch: list[Prepared],
        day: str,
        *,
        sync: bool,
        roll_bytes: int,
    ) -> int:
        items = batch
        if tail is not None and tail.cut_lines:
            log.error(
                "cut %d bytes (%d lines) off the audit log's end, kept aside as .broken",
                tail.cut_bytes,
                tail.cut_lines,
            )
            cut = cut_record(tail.cut_bytes)
            items = [prepare(cut), *batch]
            day = str(cut["time"])[:10]
        if head.segment is None or head.size >= roll_bytes or (day != head.day and head.size):
            head = self._roll(head, day, sync=sync)
        out = self._segment_for(head, sync=sync)
        lines, prev, sequence = [], head.prev, head.next
        for item in items:
            prev, line = seal_prepared(item, sequence, prev)
            lines.append(line)
            sequence += 1
        data = b"".join(lines)
        if crashpoints.installed() and len(data) > 1:
            # Two writes, so a crash test can stop the process between them: a torn line.
            half = len(data) // 2
            out.write_at(head.size, data[:half])
            crashpoints.hit("audit.append.mid_write")
            out.write_at(head.size + half, data[half:])
        else:
            out.write_at(head.size, data)
        crashpoints.hit("audit.append.after_write")
        head.size, head.next, head.prev = head.size + len(data), sequence, prev
        self._store(head)
        self.last_sequence = sequence - 1
        if sync:
            # The records are durable before their requests are answered, and before any
            # process writes after them (see the module docstring).
            out.fsync()
            crashpoints.hit("audit.append.after_fsync")
        return sequence - len(batch)

    def _segment_path(self, first: int) -> str:
        return os.path.join(self._directory, segment_name(first))

    def _roll(self, head: Head, day: str, *, sync: bool) -> Head:
        if head.segment is not None and head.size and not sync:
            path = self._segment_path(head.segment)
            # Balanced: a segment is synced once, when it is done, so only the newest one
            # can hold a power cut's unfinished writes (which a start cuts off)...
            self._fs.fsync_file(path)
            self._fs.fsync_dir(self._directory)  # ...and its name with it
        rolled = Head(head.next, 0, day, head.next, head.prev, head.generation + 1)
        self._store(rolled)  # named before it exists: see the module docstring
        crashpoints.hit("audit.segment.named")
        path = self._segment_path(rolled.segment or 0)
        if self._fs.exists(path):
            self._fs.unlink(path)  # an empty file of that name left by a crash
        self._open_segment(rolled, self._fs.create(path), sync=sync)
        crashpoints.hit("audit.segment.roll")
        return rolled

    def _segment_for(self, head: Head, *, sync: bool) -> WritableFile:
        """The newest segment, opened again when a roll or recovery changed it (and made
        when a holder died between naming and making it)."""
        assert head.segment is not None
        if self._segment is not None and self._segment_key == (head.generation, head.segment):
            return self._segment
        path = self._segment_path(head.segment)
        if self._fs.exists(path):
            self._open_segment(head, self._fs.open_append(path), sync=False)
        else:
            self._open_segment(head, self._fs.create(path), sync=sync)
        assert self._segment is not None
        return self._segment

    def _open_segment(self, head: Head, file: WritableFile, *, sync: bool) -> None:
        self._close_segment()
        self._segment, self._segment_key = file, (head.generation, head.segment or 0)
        if sync:
            self._fs.fsync_dir(self._directory)  # the new segment's name, before its records

    def _close_segment(self) -> None:
        if self._segment is not None:
            segment, self._segment = self._segment, None
            segment.close()

    def close(self) -> None:
        self._close_segment()
        for handle in (self._head_out, self._head_in):
            if handle is not None:
                handle.close()
        self._head_out = self._head_in = None
        for lock in (self._lock, self._stopped):
            if lock is not None:
                lock.close()  # a stopped process's hold on ``stopped`` ends here too
        self._lock = self._stopped = None
