"""The event streams open now, so a graceful stop can end them before it closes connections.

A stream never ends by itself, so it is not among the requests a stop waits for. Left
alone, it would still be awaiting its next event when the event loop shuts down; its task
would then be cancelled and Tornado would try to send a 500 on a response whose headers
went long ago ("Cannot send error response after headers written"). Instead the stop calls
``close``: every stream wakes, finishes its response (the chunked body ends properly, the
client reconnects with ``Last-Event-ID``), and ``close`` returns once all have finished.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

POLL_SECONDS = 0.02


class OpenStreams:
    """The open streams (any hashable token per stream) and the signal that ends them."""

    def __init__(self) -> None:
        self._open: set[object] = set()
        self._stopping = asyncio.Event()

    @property
    def stopping(self) -> bool:
        """True once ``close`` began: a stream ends instead of waiting again."""
        return self._stopping.is_set()

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, stream: object) -> None:
        self._open.add(stream)

    def ended(self, stream: object) -> None:
        self._open.discard(stream)

    async def wait_or_stop(self, waiting: Awaitable[None]) -> None:
        """Await ``waiting``, or less: return as soon as the stop begins."""
        if self.stopping:
            return
        task = asyncio.ensure_future(waiting)
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for each in (task, stop):
                each.cancel()
            await asyncio.gather(task, stop, return_exceptions=True)

    async def close(self, timeout: float) -> bool:
        """End every stream; False if some are still open after ``timeout`` seconds."""
        self._stopping.set()
        deadline = time.monotonic() + timeout
        while self._open:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_SECONDS)
        return True
