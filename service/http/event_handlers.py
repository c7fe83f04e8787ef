"""``GET /api/v1/buckets/{bucket}/events``: the bucket's object events as Server-Sent Events.

Each event is ``id: <sequence>`` and ``data: <the event as JSON>``. ``Last-Event-ID`` (sent by
a reconnecting browser) or ``?since=SEQ`` resumes after that sequence; without either the
stream starts with the next event. A resume point is 1 to 18 ASCII digits
(``service.common.numbers``), nothing else. One older than the retained events is 410
EventsExpired before the stream starts; if retention overtakes a reader mid-stream (it fell
more than the whole retention behind), the stream ends with an ``event: error`` whose data is
the same error body.

The frames come from ``service.events.stream``: a backlog in slices, one per turn; the
stream authorised for as long as it is open (``service.http.stream_authority``): it ends
with an ``event: end`` naming the reason once its key, user, token, role or bucket no longer
allow it. A stream follows its bucket's identity, not its name: a bucket deleted and created
again is another bucket.

A stream is not counted among the requests a graceful stop waits for (it never ends by
itself); the stop ends it (``service.limits.open_streams``): the response finishes cleanly and
the client reconnects with ``Last-Event-ID``.
"""

from __future__ import annotations

import contextlib

from tornado.iostream import StreamClosedError

from service.auth import Action
from service.common.api_errors import ApiError
from service.common.numbers import MAX_DIGITS, require_int
from service.events.scope import BucketScope
from service.events.stream import EventStream
from service.http.base import ApiHandler, Home
from service.http.request_contract import render_error
from service.http.stream_authority import stream_authority
from service.ops.buckets import require_bucket

MAX_SEQUENCE = 10**MAX_DIGITS - 1


def parse_sequence(raw: str, name: str) -> int:
    """A resume point: 1 to 18 ASCII digits, nothing around them, else 400 InvalidArgument."""
    return require_int(raw, name, 0, MAX_SEQUENCE)


def expired(after: int, covered_after: int) -> ApiError:
    return ApiError(
        "EventsExpired",
        f"events after sequence {after} are no longer retained; "
        f"the oldest resumable point is {covered_after}",
    )


class BucketEventsHandler(ApiHandler):
    route_name = "/api/v1/buckets/{bucket}/events"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET",)

    def _resume_after(self) -> int | None:
        header = self.request.headers.get("Last-Event-ID")
        if header is not None:
            return parse_sequence(header, "Last-Event-ID")
        since = self.get_query_argument("since", None, strip=False)
        return None if since is None else parse_sequence(since, "since")

    def _expired_frame(self, after: int) -> bytes:
        error = expired(after, self.ctx.engine.events.covered_after)
        return b"event: error\ndata: " + render_error(error, self.request_id).body + b"\n\n"

    async def get(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_READ, bucket=bucket)
        engine = self.ctx.engine
        scope = BucketScope.of(require_bucket(engine, bucket))
        feed = engine.events
        requested = self._resume_after()
        after = feed.last_sequence if requested is None else requested
        if after < feed.covered_after:
            raise expired(after, feed.covered_after)
        await self.acquire_stream_slot()  # SERVICE_MAX_STREAMS_PER_USER: wait, then 429
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("X-Accel-Buffering", "no")
        self.ctx.requests_in_flight.discard(self)
        streams = self.ctx.streams
        streams.opened(self)
        stream = EventStream(
            feed,
            engine.executor,
            scope,
            after,
            authority=stream_authority(
                lambda: engine.state, self.ctx.server_secret, self.request, self.principal, scope
            ),
            stopping=lambda: streams.stopping,
            wait_or_stop=streams.wait_or_stop,
            expired=self._expired_frame,
        )
        try:
            self.write(": stream of object events\n\n")
            await self.flush()
            async with contextlib.aclosing(stream.frames()) as frames:
                async for frame in frames:
                    self.write(frame)  # counted in ``bytes_out`` by ``ApiHandler.write``
                    await self.flush()
            self.finish()
        except StreamClosedError:
            return
        finally:
            streams.ended(self)
