"""Routes a worker hands to the writer: those whose answer lives in the writer's memory.

Which routes these are is said by each handler (``ApiHandler.home``, ``Home.JOURNAL``): the
event stream (the event feed), webhook status, scrub and lifecycle runs, video jobs (the
job runner), health and system info (the journal), system performance (every process's
figures, ``service.procs.notes``), metrics (every process's, ``service.procs.shared_metrics``),
logins (one throttle for the whole service), access keys (last use, noted by every process
and gathered in the writer), the creation of multipart sessions (so that the per-user cap
on open sessions counts every creation in flight in one place, ``service.limits.caps``) and
the rest of a session's life but its parts: its status, abort and ``complete`` (the writer
keeps the object's SHA-256 carried over the parts written in place, from every process, and
seals their file, ``service.multipart.in_place``; the parts stay on any process), and the
audit log's pages and verification (in the process that prunes the log). A worker
passes such a request to the writer's second HTTP listener, a unix socket beside the commit
socket, and streams the answer back as it comes (an event stream included).

``ForwardHandler`` is an ``ApiHandler`` like any other: the request id it chooses goes to the
writer (so both access lines carry it), its own refusals (503 with ``Retry-After`` in the
contract's shape while the writer is away; a 500 on anything unexpected) go through the one
renderer, and the finished request is recorded (in-flight set, metrics, access line) under
the route's name with `` (forwarded)`` after it, so the service-wide request counts, which
add up every process's, count the writer's answer once.
The writer trusts that listener's ``X-Real-Ip`` so throttles and the access log see the
client's address; only the server's user can reach the socket.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import contextvars
import logging
import socket
import weakref
from collections.abc import Sequence
from typing import Any

import tornado.httpclient
import tornado.httputil
import tornado.iostream
import tornado.netutil
import tornado.simple_httpclient
import tornado.tcpclient

from service.common.api_errors import ApiError
from service.common.wire import HEADER_REQUEST_ID
from service.context import AppContext
from service.http.base import BODYLESS_METHODS, ApiHandler

log = logging.getLogger("service.procs")

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)
LONG_POLLS = frozenset({"/api/v1/replication/records"})
"""Routes whose answer the writer may hold back for a while (a standby's long poll): a
stopping worker does not wait for them as for a request; it ends them with its streams, and
the standby asks again (another process, or this service once it is back)."""
STREAM_SECONDS = 7 * 24 * 3600.0
"""An event stream may stay open this long through a worker."""
FORWARDED = " (forwarded)"
"""After a route's name: the metrics label and access-log route of a request a worker
forwarded (``forwarded_route``)."""


def forwarded_route(route_name: str) -> str:
    """The label of ``route_name``'s requests as a worker records them."""
    return route_name + FORWARDED


_forwarding_for: contextvars.ContextVar[ForwardHandler | None] = contextvars.ContextVar(
    "forwarding_for", default=None
)
"""The handler whose request is being passed on (the upstream connection is opened in a task
that inherits the handler's context), so that the connection can be closed when the client
goes away: an event stream waiting for a slot at the writer, or open there, frees it at once."""


class _UnixResolver(tornado.netutil.Resolver):
    """Every host is the writer's unix socket."""

    def initialize(self, path: str) -> None:
        self._path = path

    async def resolve(
        self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC
    ) -> list[tuple[int, Any]]:
        return [(socket.AF_UNIX, self._path)]


class _TrackingTCPClient(tornado.tcpclient.TCPClient):
    """Keeps the connections it opened, so that a stopping worker can end its streams."""

    def __init__(self, resolver: tornado.netutil.Resolver) -> None:
        super().__init__(resolver=resolver)
        self.streams: weakref.WeakSet[tornado.iostream.IOStream] = weakref.WeakSet()

    async def connect(self, *args: Any, **kwargs: Any) -> tornado.iostream.IOStream:
        stream = await super().connect(*args, **kwargs)
        self.streams.add(stream)
        handler = _forwarding_for.get()
        if handler is not None:
            handler.upstream = stream
        return stream


class WriterForwarder:
    """The HTTP client a worker reaches the writer's internal listener with."""

    def __init__(self, path: str) -> None:
        self.client = tornado.simple_httpclient.SimpleAsyncHTTPClient(
            force_instance=True,
            resolver=_UnixResolver(path=path),
            max_clients=1000,
            max_body_size=1 << 40,
        )
        self._tcp = _TrackingTCPClient(_UnixResolver(path=path))
        self.client.tcp_client = self._tcp

    def routes(
        self, ctx: AppContext, routes: Sequence[tuple[str, type[ApiHandler]]]
    ) -> list[tuple[str, type[ForwardHandler], dict[str, Any]]]:
        """``routes`` (pattern, handler) as this worker's forwarding routes."""
        return [
            (pattern, ForwardHandler, {"ctx": ctx, "forwarder": self, "route": handler.route_name})
            for pattern, handler in routes
        ]

    def close(self) -> None:
        """End what is still streaming (event streams) and close the client."""
        for stream in list(self._tcp.streams):
            stream.close()
        self.client.close()


class _EveryMethod:
    """Contains every method: the writer answers each one, a method its route lacks with
    the contract's 405 and ``Allow`` (not Tornado's bare page), as a single process does."""

    def __contains__(self, method: object) -> bool:
        return True


class ForwardHandler(ApiHandler):
    """Pass the request to the writer; stream its answer back unchanged."""

    SUPPORTED_METHODS = _EveryMethod()  # type: ignore[assignment]
    public = True
    """The writer authenticates and authorises the request."""

    def initialize(  # type: ignore[override]
        self, ctx: AppContext, forwarder: WriterForwarder, route: str
    ) -> None:
        super().initialize(ctx)
        self.route_name = forwarded_route(route)
        self._forwarder = forwarder
        self._streaming = False
        self._long_poll = route in LONG_POLLS
        self._gone = False
        self.upstream: tornado.iostream.IOStream | None = None

    async def prepare(self) -> None:
        request = self.request
        if self._long_poll:
            self._held_open()
        if request.method in BODYLESS_METHODS:
            self.set_max_body_size(0)
        headers = tornado.httputil.HTTPHeaders()
        for name, value in request.headers.get_all():
            if name.lower() not in HOP_BY_HOP:
                headers.add(name, value)
        headers[HEADER_REQUEST_ID] = self.request_id
        headers["X-Real-Ip"] = request.remote_ip or ""
        body = request.body if request.method in ("POST", "PUT", "PATCH") else None
        self.bytes_in = len(body or b"")
        upstream = tornado.httpclient.HTTPRequest(
            "http://writer" + request.uri if request.uri else "http://writer/",
            method=request.method or "GET",
            headers=headers,
            body=body,
            allow_nonstandard_methods=True,
            follow_redirects=False,
            decompress_response=False,
            connect_timeout=5.0,
            request_timeout=STREAM_SECONDS,
            header_callback=self._on_header,
            streaming_callback=self._on_chunk,
        )
        forwarding = _forwarding_for.set(self)
        try:
            await self._forwarder.client.fetch(upstream, raise_error=False)
        except (OSError, tornado.httpclient.HTTPClientError):
            if not self._headers_written:  # nothing reached the client yet
                raise ApiError(
                    "ServiceUnavailable", "the metadata writer is restarting; retry", retry_after=1
                ) from None
            if not self._streaming:
                # Cut off mid-body (the writer or this worker is stopping): so is the
                # client, which sees the short body rather than a whole-looking one.
                self.request.connection.close()  # type: ignore[union-attr]
            # An event stream ends cleanly instead: its client resumes by Last-Event-ID.
        finally:
            _forwarding_for.reset(forwarding)
            self.upstream = None
        if not self._finished:
            self.finish()

    def _on_header(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if line.startswith("HTTP/"):
            # The writer's head replaces ours whole (it carries our request id).
            self._headers = tornado.httputil.HTTPHeaders()
            start = tornado.httputil.parse_response_start_line(line)
            self.set_status(start.code, start.reason)
        elif line and ":" in line:
            name, value = line.split(":", 1)
            if name.strip().lower() not in HOP_BY_HOP:
                self.add_header(name.strip(), value.strip())
                if name.strip().lower() == "content-type" and "event-stream" in value:
                    self._streaming = True
                    self._held_open()

    def _held_open(self) -> None:
        """This request stays open for as long as the writer likes (an event stream, a
        long poll): a stop does not wait for it as for a request, but ends it."""
        self.ctx.requests_in_flight.discard(self)
        self.ctx.streams.opened(self)  # a stop waits for it to end cleanly

    def _on_chunk(self, chunk: bytes) -> None:
        if self._gone or self._finished:
            raise ConnectionError("the client went away")  # ends the upstream request
        self.write(chunk)
        if self._streaming:
            self.flush()

    def on_finish(self) -> None:
        super().on_finish()
        self.ctx.streams.ended(self)

    def on_connection_close(self) -> None:
        self._gone = True
        if self.upstream is not None:
            self.upstream.close()  # the writer frees what the request held or waited for
        self.ctx.streams.ended(self)
        super().on_connection_close()
