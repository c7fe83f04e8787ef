"""One file-system sync shared by concurrent strict small PUTs, as the journal shares its fsync.

A strict PUT may be acknowledged only once its payload's bytes, inode and directory entry are
durable. Small bodies are cheap to write and dear to sync one by one (an fsync of the file,
then of its directory, each a disk flush), so a small strict PUT writes and renames its file
without any sync and then waits here: ``GroupSync.sync`` returns once a ``syncfs(2)`` of the
data's file system that *started after the call* has completed, which makes every file and
directory entry written before it durable at once. The first caller to find no sync running
leads and runs one on the executor; callers arriving meanwhile wait for the next one, which
covers all of them (leader/follower group commit). Measurements and the operator's side of
sharing a file system with other writers: ``docs/durability.md``.

Failure rule: errors of a ``syncfs`` are those of the whole file system since the handle's
last sync, and cannot be told apart by file; an error seen by one sync may even belong to a
file written while that sync ran and covered only by the next. So a caller takes a
``ticket`` *before* writing its file, and any sync that fails between the ticket and the
caller's sync fails that caller too (nothing it wrote is known durable; its payload is an
orphan the GC collects). As in ``journal.writer``, a failed sync is never retried on the same
promise; later callers, with later tickets, are served by later syncs.

Thread-safety: event-loop thread only (one loop); the sync itself runs on the executor.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Awaitable, Callable

from fsseam import crashpoints
from fsseam.fs import FsSync


class GroupSync:
    """Shared ``syncfs`` calls for one file system; see the module docstring."""

    def __init__(
        self, handle: FsSync, run_blocking: Callable[[Callable[[], None]], Awaitable[None]]
    ) -> None:
        """``run_blocking(fn)`` runs ``fn`` off the loop (``Engine.run_blocking``)."""
        self._handle = handle
        self._run_blocking = run_blocking
        self._started = 0
        """Syncs started so far; the running one (if any) has this number."""
        self._done = 0
        """The number of the last sync that completed without error."""
        self._failures = 0
        self._error: BaseException | None = None
        self._running: asyncio.Future[None] | None = None
        self._job: asyncio.Future[None] | None = None
        """The running sync's task, held (the loop keeps only weak references to tasks)."""
        self.syncs = 0
        """Syncs run in all (tests read it to see that callers shared them)."""

    def ticket(self) -> int:
        """Take before writing what the next ``sync`` must cover."""
        return self._failures

    async def sync(self, ticket: int) -> None:
        """Return once a sync that started after this call completed; raise ``OSError`` if
        any sync failed since ``ticket`` was taken."""
        needed = self._started + 1  # the running sync may have missed this caller's writes
        while True:
            if self._failures != ticket:
                raise _failure(self._error)
            if self._done >= needed:
                return
            running = self._running
            if running is None:
                running = self._lead()
            await asyncio.shield(running)

    def _lead(self) -> asyncio.Future[None]:
        """Start sync number ``started + 1``; the returned future ends (never with an error)
        once its outcome is recorded."""
        self._started += 1
        number = self._started
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()
        self._running = finished
        job = self._job = asyncio.ensure_future(self._run_blocking(self._run))

        def record(outcome: asyncio.Future[None]) -> None:
            self._running = self._job = None
            if outcome.cancelled():  # the loop is closing: nobody waits any more
                finished.cancel()
                return
            self.syncs += 1
            error = outcome.exception()
            if error is None:
                self._done = number
            else:
                self._failures += 1
                self._error = error
            finished.set_result(None)

        job.add_done_callback(record)
        return finished

    def _run(self) -> None:
        self._handle.sync()
        crashpoints.hit("put.after_group_sync")


def _failure(error: BaseException | None) -> BaseException:
    """What a caller covered by a failed sync raises: a fresh ``OSError`` with the sync's
    errno (each caller its own, as they are raised in different tasks), or the sync's own
    exception if it was no ``OSError`` (a simulated crash)."""
    if error is not None and not isinstance(error, OSError):
        return error
    code = error.errno if error is not None and error.errno else errno.EIO
    return OSError(code, f"syncing the data's file system failed: {error}")
