"""The log writer: appends framed batches to the active segment, rolls segments, fsyncs.

Every method does blocking file I/O and runs in the journal's executor, never on the event
loop. A lock serialises them even when the caller supplied an executor with many threads:
a batch write, a segment roll, a snapshot's log sync and the removal of covered segments
must never interleave.

Fail-stop: once a write or fsync fails, the writer refuses all further writes and syncs with
``JournalFailedError``. It never retries an fsync: after a failed fsync the kernel may have
dropped the dirty pages and marked them clean, so a retry could "succeed" without the data
ever reaching the disk (PostgreSQL's fsyncgate).

Thread-safety: all public methods take ``_lock``. ``synced_through``, ``written_through``,
``segment_count`` and ``total_bytes`` are plain ints, safe to read from any thread.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Sequence

from fsseam import crashpoints
from fsseam.fs import FileSystem, WritableFile
from journal import framing
from journal.errors import JournalFailedError
from journal.model import JournalOptions
from journal.recovery import Recovery
from journal.segment import list_segments, segment_name

logger = logging.getLogger("journal")


class LogWriter:
    """Owns the active segment file."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        options: JournalOptions,
        active: WritableFile,
        active_size: int,
        last_sequence: int,
    ) -> None:
        self._fs = fs
        self._directory = directory
        self._strict = options.durability == "strict"
        self._segment_bytes = options.segment_bytes
        # Every segment file on disk counts, including those only kept so that the older
        # retained snapshot can still be replayed from.
        self._sizes = {path: fs.stat(path).size for _, path in list_segments(fs, directory)}
        self._active = active
        self._active_size = active_size
        self._sizes[active.path] = active_size
        self._lock = threading.Lock()
        self._failure: BaseException | None = None
        self.written_through = last_sequence
        self.synced_through = last_sequence
        self.segment_count = len(self._sizes)
        self.total_bytes = sum(self._sizes.values())

    @classmethod
    def resume(
        cls, fs: FileSystem, directory: str, options: JournalOptions, recovery: Recovery
    ) -> LogWriter:
        """Open the recovered chain's last segment for appending, or start the first one.

        Both modes fsync the active segment and the directory here: what this process saw at
        open may still be only in the page cache (the previous process was killed, not
        powered off), and new records will claim it durable.
        """
        if recovery.segments:
            active = fs.open_append(recovery.segments[-1].path)
            active_size = recovery.segments[-1].size
        else:
            path = os.path.join(directory, segment_name(recovery.last_sequence + 1))
            active = fs.create(path)
            active_size = 0
        try:
            active.fsync()  # everything replay will report must be durable before we build on it
            fs.fsync_dir(directory)  # and so must the segment's name
        except BaseException:
            active.close()
            raise
        return cls(fs, directory, options, active, active_size, recovery.last_sequence)

    def write_batch(self, first_sequence: int, bodies: Sequence[bytes]) -> None:
        """Append records ``first_sequence ..`` and, in strict mode, fsync them."""
        with self._lock:
            self._check_usable()
            try:
                if self._active_size >= self._segment_bytes:
                    self._roll(first_sequence)
                data = framing.encode_batch(first_sequence, self.synced_through, bodies)
                if crashpoints.installed():
                    half = len(data) // 2
                    self._active.write(data[:half])
                    crashpoints.hit("journal.append.mid_write")
                    self._active.write(data[half:])
                else:
                    self._active.write(data)
                self._grow(len(data))
                self.written_through = first_sequence + len(bodies) - 1
                crashpoints.hit("journal.append.after_write")
                if self._strict:
                    self._active.fsync()  # strict: the batch is acknowledged only once durable
                    self.synced_through = self.written_through
                    crashpoints.hit("journal.append.after_fsync")
            except BaseException as exc:
                self._failure = exc
                raise

    def sync(self) -> None:
        """Make every written record durable (balanced mode, before a snapshot relies on it)."""
        with self._lock:
            self._check_usable()
            if self.synced_through < self.written_through:
                try:
                    self._active.fsync()  # a snapshot must never cover records the log may lose
                except BaseException as exc:
                    self._failure = exc
                    raise
                self.synced_through = self.written_through

    def remove_covered(self, through: int) -> list[str]:
        """Unlink segments whose records are all <= ``through``; return their paths.

        A segment is covered when the next segment starts at or below ``through + 1``. The
        active segment has no successor and is never removed.
        """
        with self._lock:
            segments = list_segments(self._fs, self._directory)
            removed = []
            for (_, path), (next_first, _) in itertools.pairwise(segments):
                if next_first <= through + 1 and path != self._active.path:
                    self._fs.unlink(path)
                    removed.append(path)
                    if path in self._sizes:
                        self.total_bytes -= self._sizes.pop(path)
            self.segment_count = len(self._sizes)
            if removed and self._strict:
                self._fs.fsync_dir(self._directory)  # tidy, not needed for correctness
            return removed

    def close(self) -> None:
        """Fsync what is unsynced (unless failed) and close the active segment."""
        with self._lock:
            try:
                if self._failure is None and self.synced_through < self.written_through:
                    try:
                        self._active.fsync()  # a clean shutdown loses nothing, in either mode
                    except BaseException as exc:
                        self._failure = exc
                        raise
                    self.synced_through = self.written_through
            finally:
                self._active.close()

    def _roll(self, first_sequence: int) -> None:
        if self.synced_through < self.written_through:
            # Seal the old segment first: a newer segment must never outlive a hole in it.
            self._active.fsync()
            self.synced_through = self.written_through
        self._active.close()
        path = os.path.join(self._directory, segment_name(first_sequence))
        self._active = self._fs.create(path)
        self._active_size = 0
        self._sizes[path] = 0
        self.segment_count = len(self._sizes)
        self._active.fsync()  # the new (empty) inode is durable before records go into it
        crashpoints.hit("journal.segment.roll")
        # The name must be durable before records in the segment are acknowledged, and before
        # a later segment's name can be, or a lost name would leave a hole in the chain.
        self._fs.fsync_dir(self._directory)
        logger.info("started segment %s", path)

    def _grow(self, written: int) -> None:
        self._active_size += written
        self._sizes[self._active.path] = self._active_size
        self.total_bytes += written

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise JournalFailedError(f"journal failed earlier: {self._failure!r}")
