"""One event stream, transport-free: which frames to send, in slices, and when to end.

``EventStream.frames`` yields the Server-Sent Events frames of one bucket's stream after a
resume point; the HTTP handler (``service.http.event_handlers``) writes each and flushes.

- A backlog goes out one slice per turn (``service.events.turns``): read (from memory, or
  from the files on the executor), then sent, then the turn goes back, so a hundred streams
  resuming from ``since=0`` take turns instead of holding the event loop.
- The stream is authorised for as long as it is open: ``authority`` is asked again right
  before each slice is sent (with no await between the answer and the send, so no event
  committed after a revocation is ever sent) and every ``RECHECK_SECONDS`` while the stream
  is idle. When it names a reason (``StreamEnd``), the stream sends a last
  ``event: end`` frame whose data is ``{"reason", "message"}`` and ends.
- An idle stream sends a comment every ``HEARTBEAT_SECONDS`` (proxies keep it open, a client
  that went away is found). A stream whose reader fell behind the event log's retention
  ends with the ``error`` frame the handler renders. A graceful stop ends every stream
  without an ``end`` frame: the client reconnects with ``Last-Event-ID``.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from service.events.feed import EventFeed, FeedEvent
from service.events.scope import BucketScope

HEARTBEAT_SECONDS = 15.0
RECHECK_SECONDS = 0.5
"""An idle stream asks ``authority`` again after at most this long: twice the contract's
"at least once a second", so the loop's own delays leave it within a second."""

END_REASONS = (
    "access_key_revoked",
    "access_key_deleted",
    "user_disabled",
    "user_deleted",
    "token_expired",
    "token_revoked",
    "access_denied",
    "bucket_deleted",
)
"""What an ``end`` frame may name (docs/events.md)."""


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """Why a stream may not go on: one of ``END_REASONS``, and a sentence for people."""

    reason: str
    message: str

    def __post_init__(self) -> None:
        if self.reason not in END_REASONS:
            raise ValueError(f"unknown stream end reason {self.reason!r}")

    def frame(self) -> bytes:
        data = json.dumps({"reason": self.reason, "message": self.message})
        return f"event: end\ndata: {data}\n\n".encode()


Authority = Callable[[], StreamEnd | None]
"""None while the stream may go on; else why it must end."""


def event_frame(item: FeedEvent) -> bytes:
    """One event: ``id: <sequence>`` and ``data: <json>`` (the body ends the frame's line)."""
    return b"id: %d\ndata: " % item.sequence + item.body + b"\n"


class EventStream:
    """The frames of one stream (see the module docstring)."""

    def __init__(
        self,
        feed: EventFeed,
        executor: Executor,
        scope: BucketScope,
        after: int,
        *,
        authority: Authority,
        stopping: Callable[[], bool],
        wait_or_stop: Callable[[Awaitable[None]], Awaitable[None]],
        expired: Callable[[int], bytes],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._feed = feed
        self._executor = executor
        self._scope = scope
        self.after = after
        """The sequence the stream got through (what it resumes after)."""
        self._authority = authority
        self._stopping = stopping
        self._wait_or_stop = wait_or_stop
        self._expired = expired
        self._clock = clock

    async def frames(self) -> AsyncGenerator[bytes, None]:
        """Every frame to send, until the stream must end (its last frame says why) or the
        server stops."""
        quiet_since = self._clock()
        while not self._stopping():
            before = self.after
            try:
                items = await self._next_slice()
            except LookupError:
                yield self._expired(self.after)
                return
            end = self._authority()
            if end is not None:
                yield end.frame()  # nothing of the slice: it may postdate the change
                return
            if items:
                yield b"".join(event_frame(item) for item in items)
                quiet_since = self._clock()
                continue
            if self.after != before:
                continue  # other buckets' events only: on to the next slice
            await self._wait_or_stop(self._feed.wait(self.after, RECHECK_SECONDS))
            if self._clock() - quiet_since >= HEARTBEAT_SECONDS and not self._stopping():
                yield b": keep-alive\n\n"
                quiet_since = self._clock()

    async def _next_slice(self) -> list[FeedEvent]:
        """The next slice of the stream's events, read in a turn of its own."""
        async with self._feed.turns.turn():
            items, self.after = await self._feed.read(self.after, self._executor, self._scope)
        return items
