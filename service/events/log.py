"""The event log's files: object events as JSON lines in numbered segment files.

Layout under ``<data_dir>/events``::

    00000000000000000001.events     events with sequence >= 1 and < the next file's number
    00000000000000010417.events     ...

A file is named by the first journal sequence it covers (not necessarily an event's: most
records are not object events), so the log is complete for every sequence after
``covered_after`` = (the first file's number - 1). Each line is one event as the API shows
it (``{"event_id", "sequence", ...}``), written in sequence order. A file is sealed after
``segment_events`` lines and a new one started; retention deletes whole sealed files, oldest
first. Opening reads the last file whole (to cut a torn tail) and only the tail of each sealed
one, whose line count is taken as ``segment_events``: a start costs the same however many
events are kept.

Durability: lines are written without an fsync (the OS keeps them across a SIGKILL); ``sync``
fsyncs what was written, and the engine calls it before every snapshot, because the journal
records after the newest snapshot are what rebuild a lost tail: at start the feed derives
again the events of every replayed record past the log's last line. A file is fsynced when
it is sealed, so only the last file can lose lines to a power cut: it is read whole at open
and cut at its first bad line.

Reading: a read finds each line's sequence from its first bytes (``line_sequence``: the
writer puts ``sequence`` second) and parses nothing else; it starts at the mark nearest before
its resume point (``_Marks``: where a line starts, about every ``MARK_BYTES``, noted by earlier
reads), so a slice costs the same wherever it lies in the log.

Every file operation goes through the ``fsseam`` seam. Methods block: call them from an
executor thread (or before serving). Thread-safety: one writer thread at a time (the feed's
flush lock); ``read`` may run concurrently with appends because it never reads past the
sequence the caller knows to be written.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import json
import logging
import os
import re
import threading
from dataclasses import dataclass

from fsseam.fs import FileSystem, ReadableFile, WritableFile
from service.events.scope import time_ms as event_time_ms

log = logging.getLogger("service.events")

SUFFIX = ".events"
READ_CHUNK = 256 * 1024
TAIL_BYTES = 64 * 1024
"""Bytes read from the end of a sealed file at open, for its newest event."""
MARK_BYTES = 64 * 1024
"""A read notes where a line starts about every this many bytes of a file (``_Marks``)."""
_SEQUENCE = re.compile(rb'"sequence":([0-9]{1,18})[,}]')


@dataclass(slots=True)
class Segment:
    """One file of the log: the first sequence it covers, its line count and its newest
    event's sequence and time (ms; 0 when empty)."""

    first: int
    path: str
    count: int = 0
    last_sequence: int = 0
    last_time_ms: int = 0


def segment_name(first: int) -> str:
    return f"{first:020d}{SUFFIX}"


def _parse(line: bytes) -> dict[str, object] | None:
    try:
        doc = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("sequence"), int):
        return None
    return doc


def line_sequence(line: bytes) -> int | None:
    """The sequence of a whole line, read from its first bytes (the log's writer puts it
    second, after ``event_id``) without parsing the rest; None if it is not a line of the
    log. The reader parses only the lines it returns.

    >>> line_sequence(b'{"event_id":"ev_000000000000002a","sequence":42,"type":"x"}\\n')
    42
    >>> line_sequence(b'{"event_id":"ev_0') is None
    True
    """
    if not line.endswith(b"\n"):
        return None
    found = _SEQUENCE.search(line, 0, 96)
    if found is not None:
        return int(found[1])
    doc = _parse(line)
    return None if doc is None else int(doc["sequence"])  # type: ignore[call-overload]


class _Marks:
    """Where reads may start: for each file, ``(sequence, offset)`` of a line about every
    ``MARK_BYTES``, noted by the reads as they pass (so a file is scanned from its start at
    most once per process). Reads run on several executor threads: a lock guards them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_path: dict[str, list[tuple[int, int]]] = {}

    def before(self, path: str, after: int) -> int:
        """The offset of the last noted line whose sequence is at most ``after`` (0: none)."""
        with self._lock:
            marks = self._by_path.get(path)
            if not marks:
                return 0
            index = bisect.bisect_right(marks, (after, 1 << 62)) - 1
            return marks[index][1] if index >= 0 else 0

    def note(self, path: str, sequence: int, offset: int) -> None:
        """The line at ``offset`` has ``sequence``; kept if far enough past the last mark."""
        with self._lock:
            marks = self._by_path.setdefault(path, [])
            if offset >= (marks[-1][1] if marks else 0) + MARK_BYTES:
                marks.append((sequence, offset))

    def forget(self, path: str) -> None:
        """The file was cut or removed: its marks no longer hold."""
        with self._lock:
            self._by_path.pop(path, None)


class EventLog:
    """The segment files of one data dir."""

    def __init__(self, fs: FileSystem, directory: str, segment_events: int) -> None:
        self._fs = fs
        self._directory = directory
        self._segment_events = max(1, segment_events)
        self._segments: list[Segment] = []
        self._writer: WritableFile | None = None
        self._dirty: set[str] = set()
        self._sync_failed = False
        self._marks = _Marks()
        self.last_sequence = 0
        """Sequence of the newest line written (``covered_after`` when there is none)."""

    # -- open ----------------------------------------------------------------------------

    def open(self, start_after: int) -> None:
        """Load the segments (creating the log, covering sequences after ``start_after``,
        when there is none) and cut a torn last line."""
        if not self._fs.exists(self._directory):
            self._fs.mkdir(self._directory)
            # Its name must outlive a crash too (the webhook cursors live in it as well).
            self._fs.fsync_dir(os.path.dirname(self._directory))
        names = sorted(n for n in self._fs.listdir(self._directory) if n.endswith(SUFFIX))
        numbered: list[int] = []
        for name in names:
            try:
                numbered.append(int(name[: -len(SUFFIX)]))
            except ValueError:
                continue
        for position, first in enumerate(numbered):
            segment = Segment(first, os.path.join(self._directory, segment_name(first)))
            sealed = position < len(numbered) - 1
            self._segments.append(self._tail(segment) if sealed else self._scan(segment))
        if not self._segments:
            self._start_segment(start_after + 1)
            # The new log's first file must outlive a crash, or the coverage would be lost.
            self._fs.fsync_dir(self._directory)
        newest = max((s.last_sequence for s in self._segments), default=0)
        self.last_sequence = max(newest, self.covered_after)

    def _tail(self, segment: Segment) -> Segment:
        """A sealed file: its newest event from the file's last line, and as many lines as
        a file is sealed at (``segment_events``; a start reads no sealed file whole, so it
        costs the same however many events are kept). Scanned whole if the tail has no
        complete line."""
        source = self._fs.open_read(segment.path)
        try:
            size = source.size()
            start = max(0, size - TAIL_BYTES)
            source.seek(start)
            data = source.read()
        finally:
            source.close()
        lines = data.splitlines(keepends=True)
        if start > 0:
            lines = lines[1:]  # the first may be the end of an earlier line
        doc = _parse(lines[-1]) if lines and lines[-1].endswith(b"\n") else None
        if doc is None:
            return self._scan(segment)
        segment.count = self._segment_events
        segment.last_sequence = int(doc["sequence"])  # type: ignore[call-overload]
        segment.last_time_ms = event_time_ms(doc.get("time"))
        return segment

    def _scan(self, segment: Segment) -> Segment:
        """Count the lines, note the newest, and cut anything after the last good line."""
        source = self._fs.open_read(segment.path)
        try:
            data = source.read()
        finally:
            source.close()
        good = 0
        for line in data.splitlines(keepends=True):
            doc = _parse(line) if line.endswith(b"\n") else None
            if doc is None:
                break
            good += len(line)
            segment.count += 1
            segment.last_sequence = int(doc["sequence"])  # type: ignore[call-overload]
            segment.last_time_ms = event_time_ms(doc.get("time"))
        if good < len(data):
            log.warning("event log %s: cut %d bytes of a torn tail", segment.path, len(data) - good)
            self._fs.truncate(segment.path, good)
        return segment

    def forget_after(self, sequence: int) -> None:
        """Cut every line with a sequence above ``sequence`` (the start replays the records
        after it, which derive those events again). Lines written since the last ``sync``
        may be lost, torn or kept in any combination by a power cut -- a hole in an older
        file under a whole newer one, or the line of a record the journal lost -- and none
        of that can stay once they are all derived again. No fsync: a cut that is lost is
        made again at the next start."""
        while len(self._segments) > 1 and self._segments[-1].first > sequence:
            segment = self._segments.pop()
            self._fs.unlink(segment.path)
            self._marks.forget(segment.path)
        segment = self._segments[-1]
        if segment.last_sequence > sequence:
            self._cut_segment(segment, sequence)
        newest = max((s.last_sequence for s in self._segments), default=0)
        self.last_sequence = max(newest, self.covered_after)

    def _cut_segment(self, segment: Segment, sequence: int) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        source = self._fs.open_read(segment.path)
        try:
            data = source.read()
        finally:
            source.close()
        self._marks.forget(segment.path)
        kept, segment.count, segment.last_sequence, segment.last_time_ms = 0, 0, 0, 0
        for line in data.splitlines(keepends=True):
            doc = _parse(line)
            if doc is None or int(doc["sequence"]) > sequence:  # type: ignore[call-overload]
                break
            kept += len(line)
            segment.count += 1
            segment.last_sequence = int(doc["sequence"])  # type: ignore[call-overload]
            segment.last_time_ms = event_time_ms(doc.get("time"))
        self._fs.truncate(segment.path, kept)

    @property
    def covered_after(self) -> int:
        """Every event with a sequence above this is in the log (or still to be written)."""
        return self._segments[0].first - 1 if self._segments else 0

    # -- write ---------------------------------------------------------------------------

    def _start_segment(self, first: int) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        segment = Segment(first, os.path.join(self._directory, segment_name(first)))
        self._segments.append(segment)
        self._writer = self._fs.create(segment.path)
        self._dirty.add(segment.path)

    def append(self, lines: list[tuple[int, int, bytes]]) -> None:
        """Write ``(sequence, time_ms, json line)`` entries, in sequence order."""
        if self._sync_failed:
            # Lines a failed fsync covered may be gone while a later fsync succeeds: writing
            # on would seal that hole in; the next start finds the log behind the index and
            # rebuilds, which derives them again.
            raise OSError(errno.EIO, "the event log stopped after a failed fsync")
        for sequence, time_ms, line in lines:
            if sequence <= self.last_sequence:
                continue
            current = self._segments[-1]
            if current.count >= self._segment_events:
                self._seal(current)
                self._start_segment(sequence)
                current = self._segments[-1]
            if self._writer is None:
                self._writer = self._fs.open_append(current.path)
            self._writer.write(line)
            self._dirty.add(current.path)
            current.count += 1
            current.last_sequence = sequence
            current.last_time_ms = time_ms
            self.last_sequence = sequence

    def _seal(self, segment: Segment) -> None:
        """Make a full file durable, name and lines, before the next one starts.

        A start reads a sealed file by its tail alone, so a hole a power cut left inside it
        could never be seen; only the last file may hold unsynced lines, and a start reads
        that one whole and cuts it at its first bad line (a log found behind the index then
        rebuilds the index, which derives the lost events again). One fsync per
        ``segment_events`` events."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        try:
            self._fs.fsync_file(segment.path)
            self._fs.fsync_dir(self._directory)
        except OSError:
            self._sync_failed = True
            raise
        self._dirty.discard(segment.path)

    def sync(self) -> None:
        """Fsync every file written since the last sync, and the directory. A failure stops
        the log until the next start (see ``append``)."""
        dirty, self._dirty = self._dirty, set()
        try:
            for path in dirty:
                with contextlib.suppress(FileNotFoundError):
                    # The journal may drop the records that could rebuild these lines next.
                    self._fs.fsync_file(path)
            if dirty:
                self._fs.fsync_dir(self._directory)  # new segment files' names
        except OSError:
            self._sync_failed = True
            raise

    @property
    def stopped(self) -> bool:
        """A failed fsync stopped the log until the next start (see ``append``)."""
        return self._sync_failed

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # -- read ----------------------------------------------------------------------------

    def read(self, after: int, limit: int, through: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` ``(sequence, line)`` with ``after < sequence <= through``, in order.

        ``through`` must be a sequence known to be written (the caller's flushed mark). The
        read starts at the mark nearest before ``after`` (``_Marks``) and reads on in
        chunks, so its cost is that of the lines it returns, wherever they are in the log.
        """
        lines: list[tuple[int, bytes]] = []
        segments = [s for s in self._segments if s.last_sequence > after and s.first <= through]
        for segment in segments:
            try:
                source = self._fs.open_read(segment.path)
            except FileNotFoundError:
                continue  # dropped by retention meanwhile; the caller rechecks coverage
            try:
                if self._read_segment(source, segment.path, after, limit, through, lines):
                    return lines
            finally:
                source.close()
        return lines

    def _read_segment(
        self,
        source: ReadableFile,
        path: str,
        after: int,
        limit: int,
        through: int,
        lines: list[tuple[int, bytes]],
    ) -> bool:
        """Add the segment's lines in range to ``lines``; True once no later line can be."""
        offset = self._marks.before(path, after)
        source.seek(offset)
        pending = b""
        while True:
            chunk = source.read(READ_CHUNK)
            if not chunk:
                return False
            data = pending + chunk
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                line = data[start : end + 1]
                sequence = line_sequence(line)
                if sequence is None:
                    return True  # a torn last line (cut at the next start): nothing after it
                self._marks.note(path, sequence, offset + start)
                if sequence > through:
                    return True
                if sequence > after:
                    lines.append((sequence, line))
                    if len(lines) >= limit:
                        return True
                start = end + 1
            pending = data[start:]
            offset += start

    # -- retention -----------------------------------------------------------------------

    def drop_old(self, now_ms: int, keep_ms: int, keep_count: int, hold_after: int | None) -> int:
        """Delete sealed files whose every event is older than ``keep_ms`` and which more than
        ``keep_count`` newer events follow, and which no reader still needs (``hold_after``:
        the lowest sequence a webhook has not delivered). Return how many went."""
        dropped = 0
        while len(self._segments) > 1:
            oldest = self._segments[0]
            newer = sum(s.count for s in self._segments[1:])
            if oldest.last_time_ms and now_ms - oldest.last_time_ms < keep_ms:
                break
            if newer < keep_count:
                break
            if hold_after is not None and oldest.last_sequence > hold_after:
                break
            self._fs.unlink(oldest.path)
            self._marks.forget(oldest.path)
            self._segments.pop(0)
            dropped += 1
        if dropped:
            log.info(
                "event log: dropped %d old files; events kept after sequence %d",
                dropped,
                self.covered_after,
            )
        return dropped

    def event_count(self) -> int:
        return sum(s.count for s in self._segments)
