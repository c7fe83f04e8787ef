"""``GET /api/v1/buckets/{bucket}/events``: the bucket's object events as Server-Sent Events.

Each event is ``id: <sequence>`` and ``data: <the event as JSON>``. ``Last-Event-ID`` (sent by
a reconnecting browser) or ``?since=SEQ`` resumes after that sequence; without either the
stream starts with the next event. A resume point older than the retained events is 410
EventsExpired before the stream starts; if retention overtakes a reader mid-stream (it fell
more than the whole retention behind), the stream ends with an ``event: error`` whose data is
the same error body; it ends too when the bucket is deleted. A comment line every
``HEARTBEAT_SECONDS`` keeps proxies from closing an idle stream and finds clients that went
away.

A stream is not counted among the requests a graceful stop waits for (it never ends by
itself); the stop ends it (``service.http.open_streams``): the response finishes cleanly and
the client reconnects with ``Last-Event-ID``.
"""

from __future__ import annotations

from tornado.iostream import StreamClosedError

from service.auth import Action
from service.common.api_errors import ApiError
from service.http.base import ApiHandler
from service.http.request_contract import render_error
from service.ops.buckets import require_bucket

HEARTBEAT_SECONDS = 15.0
MAX_SEQUENCE_DIGITS = 19


def parse_sequence(raw: str, name: str) -> int:
    """A resume point: ASCII digits of bounded length, else 400 InvalidArgument."""
    text = raw.strip()
    if not text or len(text) > MAX_SEQUENCE_DIGITS or not (text.isascii() and text.isdigit()):
        raise ApiError("InvalidArgument", f"{name} must be a sequence number (decimal digits)")
    return int(text)


def expired(after: int, covered_after: int) -> ApiError:
    return ApiError(
        "EventsExpired",
        f"events after sequence {after} are no longer retained; "
        f"the oldest resumable point is {covered_after}",
    )


class BucketEventsHandler(ApiHandler):
    route_name = "/api/v1/buckets/{bucket}/events"
    SUPPORTED_METHODS = ("GET",)

    def _resume_after(self) -> int | None:
        header = self.request.headers.get("Last-Event-ID")
        if header is not None:
            return parse_sequence(header, "Last-Event-ID")
        since = self.get_query_argument("since", None)
        return None if since is None else parse_sequence(since, "since")

    async def get(self, bucket: str) -> None:
        self.authorize(Action.BUCKET_READ, bucket=bucket)
        engine = self.ctx.engine
        require_bucket(engine, bucket)
        feed = engine.events
        requested = self._resume_after()
        after = feed.last_sequence if requested is None else requested
        if after < feed.covered_after:
            raise expired(after, feed.covered_after)
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("X-Accel-Buffering", "no")
        self.ctx.requests_in_flight.discard(self)
        streams = self.ctx.streams
        streams.opened(self)
        try:
            self.write(": stream of object events\n\n")
            await self.flush()
            while (
                not streams.stopping
                and engine.journal is not None
                and engine.state.get_bucket(bucket) is not None
            ):
                try:
                    items, after = await feed.read(after, engine.executor, bucket)
                except LookupError:
                    error = expired(after, feed.covered_after)
                    body = render_error(error, self.request_id).body
                    self.write(b"event: error\ndata: " + body + b"\n\n")
                    break
                for item in items:
                    self.write(f"id: {item.sequence}\ndata: ".encode() + item.body + b"\n")
                if items:
                    self.bytes_out += sum(len(item.body) for item in items)
                    await self.flush()
                    continue
                before = feed.last_sequence
                await streams.wait_or_stop(feed.wait(after, HEARTBEAT_SECONDS))
                if feed.last_sequence == before and not streams.stopping:
                    self.write(": keep-alive\n\n")
                    await self.flush()
            self.finish()
        except StreamClosedError:
            return
        finally:
            streams.ended(self)
