"""Upload slots: how many request bodies stream at once, shared fairly between users.

Every streamed body (PUT of an object or a part, a batch) holds one slot from its first byte
to its end. Two bounds keep one client from starving the rest:

- ``capacity`` slots in all (``SERVICE_MAX_CONCURRENT_UPLOADS``); and
- ``per_user`` slots for any one user (``SERVICE_MAX_UPLOADS_PER_USER``), whatever the
  credential (access keys, tokens and presigned URLs of one user count together), so a user
  holding slow uploads runs out of its own slots, never everybody else's.

An upload over either bound waits for a slot (``service.limits.fair_slots``: the same
primitive as the event streams' cap, with its fairness between users) up to the caller's
timeout, before its body is read; then ``SlotsFull``: 429 TooManyRequests at the HTTP edge
when the user's own cap stayed full, 503 ServiceUnavailable when the total did.

The watchdog (``cut_stalled``, once a second) closes the connection of an upload that
- delivered nothing for ``idle_timeout`` seconds (stalled), or
- delivered less than ``min_body_rate`` bytes/s over a whole window of ``idle_timeout``
  seconds (a slow drip that is never quite silent). The rate is measured per window, not
  since the start, so a fast start does not buy a long trickle afterwards.
Closing the connection makes the handler discard its staging file and free the slot.

The holders are anything with a ``request_id`` and a way to close their connection
(``UploadHolder``), so this module knows nothing of HTTP handlers.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from service.limits.fair_slots import FairSlots

log = logging.getLogger("service")


class UploadHolder(Protocol):
    """What holds a slot: a request whose connection can be closed."""

    @property
    def request_id(self) -> str: ...

    def close_connection(self) -> None: ...


@dataclass(slots=True)
class _Upload:
    owner: str
    last_delivery: float
    window_start: float
    window_bytes: int = 0
    total_bytes: int = 0


class UploadSlots:
    """The slots in use, by holder; ``len()`` is the number of uploads in flight."""

    def __init__(
        self,
        *,
        capacity: int,
        per_user: int,
        idle_timeout: float,
        min_body_rate: int,
        clock: Callable[[], float] = time.monotonic,
        on_cut: Callable[[str], None] | None = None,
    ) -> None:
        self.capacity = capacity
        self.per_user = per_user
        self.idle_timeout = idle_timeout
        self.min_body_rate = min_body_rate
        self._clock = clock
        self._on_cut = on_cut
        self._uploads: dict[UploadHolder, _Upload] = {}
        self._slots = FairSlots(per_user=per_user, capacity=capacity, noun="uploads in progress")
        self.cut_stalled_count = 0
        self.cut_slow_count = 0

    def __len__(self) -> int:
        return len(self._uploads)

    def held_by(self, owner: str) -> int:
        return self._slots.held_by(owner)

    def waiting(self) -> int:
        """Uploads waiting for a slot now."""
        return self._slots.waiting()

    def try_acquire(self, holder: UploadHolder, owner: str) -> bool:
        """Take a slot for ``holder`` now if the rules allow it without waiting (a request
        that holds one already has it); False: ``acquire`` must wait for one."""
        if holder in self._uploads:
            return True
        if not self._slots.try_acquire(owner):
            return False
        now = self._clock()
        self._uploads[holder] = _Upload(owner=owner, last_delivery=now, window_start=now)
        return True

    async def acquire(self, holder: UploadHolder, owner: str, timeout: float) -> None:
        """Take a slot for ``holder`` on behalf of ``owner`` (a user id), waiting up to
        ``timeout`` seconds for one; ``SlotsFull`` if none came (``fair_slots``)."""
        if holder in self._uploads:
            return
        await self._slots.acquire(owner, timeout)
        now = self._clock()
        self._uploads[holder] = _Upload(owner=owner, last_delivery=now, window_start=now)

    def delivered(self, holder: UploadHolder, total_bytes: int) -> None:
        """The body of ``holder`` has now delivered ``total_bytes`` in all."""
        upload = self._uploads.get(holder)
        if upload is None:
            return
        upload.window_bytes += max(0, total_bytes - upload.total_bytes)
        upload.total_bytes = max(upload.total_bytes, total_bytes)
        upload.last_delivery = self._clock()

    def release(self, holder: UploadHolder) -> None:
        upload = self._uploads.pop(holder, None)
        if upload is None:
            return
        self._slots.release(upload.owner)

    def too_slow(self) -> list[tuple[UploadHolder, str]]:
        """The uploads to cut now and why; starts a new rate window for the others."""
        now = self._clock()
        verdicts: list[tuple[UploadHolder, str]] = []
        for holder, upload in self._uploads.items():
            if now - upload.last_delivery >= self.idle_timeout:
                verdicts.append((holder, "stalled"))
                continue
            elapsed = now - upload.window_start
            if elapsed < self.idle_timeout:
                continue
            if upload.window_bytes < self.min_body_rate * elapsed:
                verdicts.append((holder, "slow"))
                continue
            upload.window_start, upload.window_bytes = now, 0
        return verdicts

    def cut_stalled(self) -> None:
        """Close the connections of stalled and too-slow uploads (see the module docstring)."""
        for holder, reason in self.too_slow():
            if reason == "stalled":
                self.cut_stalled_count += 1
                log.warning("request %s: upload stalled; closing the connection", holder.request_id)
            else:
                self.cut_slow_count += 1
                log.warning(
                    "request %s: upload slower than %d bytes/s; closing the connection",
                    holder.request_id,
                    self.min_body_rate,
                )
            if self._on_cut is not None:
                self._on_cut(reason)
            self.release(holder)
            holder.close_connection()
