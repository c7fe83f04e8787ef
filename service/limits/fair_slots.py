"""Slots with a per-user cap and an optional total, where requests over a cap wait their turn.

The one admission primitive of the per-user caps (uploads in flight,
``service.limits.upload_slots``; open event streams, ``service.http.admission``). A request
that finds its user's cap (or the total) full does not fail at once: it queues for up to its
``timeout`` (``SERVICE_QUEUE_WAIT``), and only then is refused with ``SlotsFull``, which says
whether the user's own cap or the total was the one still full (429 and 503 at the HTTP edge).

Rules (docs/security.md "Per-user caps that wait"):

1. An owner never holds more than ``per_user`` slots, and all owners together never more than
   ``capacity`` (None: no total).
2. A waiter never loses its place to a later arrival: a new request takes a slot at once only
   if nobody who could use that slot is waiting.
3. Fairness between owners: each freed slot goes to the waiting owner that holds the fewest
   slots now, ties to the one served longest ago, then to the one that queued first; within
   one owner, first come first served. So a user queueing a burst is served in turn with the
   others, and never ahead of a user holding less.
4. A waiter that gives up (its timeout, or its task cancelled because its client went away)
   leaves the queue; a slot granted to it in the same instant is given back, never lost.
5. Waiters are bounded per owner (``max_waiting``): past that the request is refused at once,
   so a client cannot park unbounded requests (each holds a connection and some buffered
   bytes) in the queue.

Thread-safety: event-loop thread only (the futures belong to the running loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter, deque
from dataclasses import dataclass, field

MAX_WAITING_PER_USER = 256
"""Requests of one owner that may wait at once (rule 5)."""


class SlotsFull(Exception):
    """No slot came free for ``owner`` within the wait; ``own_cap``: the owner's own cap was
    full (else the total was)."""

    def __init__(self, owner: str, own_cap: bool, message: str) -> None:
        super().__init__(message)
        self.owner = owner
        self.own_cap = own_cap


@dataclass(slots=True)
class _Queue:
    """One owner's waiters, oldest first."""

    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    since: int = 0
    """Arrival order of the owner's oldest waiter (ties of rule 3)."""


class FairSlots:
    """Slots by owner; ``len()`` is the number held now (see the module docstring)."""

    def __init__(
        self,
        *,
        per_user: int,
        capacity: int | None = None,
        max_waiting: int = MAX_WAITING_PER_USER,
        noun: str = "requests",
    ) -> None:
        self.per_user = per_user
        self.capacity = capacity
        self.max_waiting = max_waiting
        self.noun = noun
        """What a slot is, in refusals' messages ("uploads in progress")."""
        self._held: Counter[str] = Counter()
        self._total = 0
        self._queues: dict[str, _Queue] = {}
        self._last_served: dict[str, int] = {}
        self._clock = itertools.count(1)

    def __len__(self) -> int:
        return self._total

    def held_by(self, owner: str) -> int:
        return self._held[owner]

    def waiting(self) -> int:
        """Requests waiting now, of every owner."""
        return sum(len(queue.waiters) for queue in self._queues.values())

    def _total_full(self) -> bool:
        return self.capacity is not None and self._total >= self.capacity

    def _take(self, owner: str) -> None:
        self._held[owner] += 1
        self._total += 1
        self._last_served[owner] = next(self._clock)

    def try_acquire(self, owner: str) -> bool:
        """Take a slot now if rules 1 and 2 allow it."""
        if owner in self._queues or self._held[owner] >= self.per_user or self._total_full():
            return False
        self._take(owner)
        return True

    async def acquire(self, owner: str, timeout: float) -> None:
        """Take a slot for ``owner``, waiting up to ``timeout`` seconds for one; raises
        ``SlotsFull`` when none came. Cancelling the caller leaves the queue (rule 4)."""
        if self.try_acquire(owner):
            return
        queue = self._queues.get(owner)
        if queue is not None and len(queue.waiters) >= self.max_waiting:
            raise self._full(owner, waited=False)
        if queue is None:
            queue = self._queues[owner] = _Queue(since=next(self._clock))
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.waiters.append(granted)
        try:
            await asyncio.wait((granted,), timeout=max(0.0, timeout))
        except asyncio.CancelledError:
            self._abandon(owner, granted)
            raise
        if granted.done():
            return
        self._abandon(owner, granted)
        raise self._full(owner, waited=True)

    def _abandon(self, owner: str, granted: asyncio.Future[None]) -> None:
        """``granted``'s waiter is gone: out of the queue, or its slot given back."""
        if granted.done():
            self.release(owner)
            return
        granted.cancel()
        queue = self._queues.get(owner)
        if queue is None:
            return
        with contextlib.suppress(ValueError):
            queue.waiters.remove(granted)
        if not queue.waiters:
            del self._queues[owner]

    def _full(self, owner: str, *, waited: bool) -> SlotsFull:
        own = self._held[owner] >= self.per_user or not self._total_full()
        if not waited:
            return SlotsFull(
                owner, True, f"this user already has {self.max_waiting} {self.noun} waiting"
            )
        if own:
            message = f"this user already has {self.per_user} {self.noun}; retry shortly"
        else:
            message = f"the server has {self.capacity} {self.noun} now; retry shortly"
        return SlotsFull(owner, own, message)

    def release(self, owner: str) -> None:
        """Give back one of ``owner``'s slots and hand free slots to waiters (rule 3)."""
        if self._held[owner] <= 0:
            return
        self._held[owner] -= 1
        self._total -= 1
        if self._held[owner] <= 0:
            del self._held[owner]
            if owner not in self._queues:
                self._last_served.pop(owner, None)  # only owners holding or waiting are kept
        self._dispatch()

    def _dispatch(self) -> None:
        while not self._total_full():
            owner = self._next_owner()
            if owner is None:
                return
            queue = self._queues[owner]
            granted = queue.waiters.popleft()
            if not queue.waiters:
                del self._queues[owner]
            if granted.done():  # its waiter is leaving (cancelled): not served
                continue
            self._take(owner)
            granted.set_result(None)

    def _next_owner(self) -> str | None:
        """The waiting owner a free slot goes to (rule 3), or None."""
        best: tuple[int, int, int] | None = None
        chosen = None
        for owner, queue in self._queues.items():
            held = self._held[owner]
            if held >= self.per_user:
                continue
            rank = (held, self._last_served.get(owner, 0), queue.since)
            if best is None or rank < best:
                best, chosen = rank, owner
        return chosen
