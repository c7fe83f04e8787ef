"""Fair turns for event readers: a backlog is replayed one slice per turn, in arrival order.

A stream that resumes far behind (``since=0`` on a busy bucket) has thousands of events to
send. Sent in one go, they would hold the event loop (and, read from the files, the
executor) for as long as that takes, and a hundred such streams would stall every other
request of the process. So each stream reads and sends one slice (``feed.SLICE_EVENTS``)
per turn, and gives the turn back before its next one:

- at most ``concurrency`` turns are out at once, so the loop's work between two looks at its
  sockets stays bounded however many streams replay;
- turns are handed out first come, first served: a stream that gives its turn back queues
  behind every stream already waiting, so all replays progress at the same pace and none
  starves;
- whoever gives a turn back then lets one pass of the event loop go by
  (``asyncio.sleep(0)``) before it goes on, so the loop polls its sockets between any two
  slices of a stream, even when no other stream waits.

A stream waiting for a turn holds nothing; one that sends its slice waits for the socket
outside its turn, so a slow client never holds one.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

DEFAULT_CONCURRENCY = 4


class ReplayTurns:
    """Hands out at most ``concurrency`` turns at once, in request order."""

    def __init__(self, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self._free = max(1, concurrency)
        self._waiting: deque[asyncio.Future[None]] = deque()
        self.granted = 0
        """Turns handed out since start (a figure for tests and metrics)."""

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold one turn for the body of the ``async with``."""
        await self._take()
        try:
            yield
        finally:
            self._give_back()
        await asyncio.sleep(0)  # the others, and the sockets, have the loop first

    async def _take(self) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            self.granted += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._give_back()  # granted just as it was cancelled: pass it on
            else:
                self._waiting.remove(waiter)
            raise
        self.granted += 1

    def _give_back(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1
