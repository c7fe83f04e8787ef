"""Sync replication on the primary (``SERVICE_REPLICATION=sync``): a write is acknowledged
only once a standby holds its record and payloads durably.

A standby confirms by asking for the records after the ones it holds (the feed's
``note``): it asks again as soon as it has applied a batch, so there is one confirmation per
applied batch, and the standby appends and fsyncs a record only after every payload it
references is durable there. ``ConfirmationWaiters`` groups the writes waiting, the way the
journal groups fsyncs: each waits on the one confirmation that reaches its sequence (a heap
ordered by sequence), so a confirmation that covers a hundred writes wakes them in one pass
and sync mode costs latency, not throughput. A write no standby confirms within
``SERVICE_REPLICATION_TIMEOUT`` answers 503 ``ReplicationTimeout``: its record is committed
on the primary (the state shows it), and retrying it is safe.

Thread-safety: event-loop thread.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from service.common.api_errors import ServiceError

PRUNE_AT = 1024
"""Entries of writes that gave up are dropped once the heap holds this many."""


class ReplicationTimeoutError(ServiceError):
    def __init__(self, sequence: int, seconds: float) -> None:
        super().__init__(
            "ReplicationTimeout",
            f"no standby confirmed the write within {seconds:g} s; it may be on the primary, "
            "and retrying it is safe",
            log_detail=f"record {sequence} not confirmed by a standby",
        )


class ConfirmationWaiters:
    """Commits waiting until some standby holds their record (module docstring)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.confirmed = 0
        """Every record up to here is held durably by at least one standby."""
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self.timeouts = 0

    def confirm(self, sequence: int) -> None:
        """A standby holds every record up to ``sequence``: wake the writes it covers."""
        if sequence <= self.confirmed:
            return
        self.confirmed = sequence
        heap = self._heap
        while heap and heap[0][0] <= sequence:
            future = heapq.heappop(heap)[2]
            if not future.done():
                future.set_result(None)

    async def wait(self, sequence: int) -> None:
        """Return once a standby holds record ``sequence``; ``ReplicationTimeoutError`` after
        the timeout."""
        if sequence <= self.confirmed:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (sequence, next(self._order), future))
        try:
            await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            self.timeouts += 1
            if len(self._heap) > PRUNE_AT:  # no standby for a while: drop the given-up
                self._heap = [entry for entry in self._heap if not entry[2].done()]
                heapq.heapify(self._heap)
            raise ReplicationTimeoutError(sequence, self.timeout) from None
        finally:
            if not future.done():
                future.cancel()  # left in the heap, popped (done) by a later confirmation
