"""Routes a worker hands to the writer: those whose answer lives in the writer's memory.

The event stream (the event feed), webhook status, scrub and lifecycle runs, video jobs (the
job runner), health and system info (the journal), system performance (every process's
figures, ``service.procs.notes``), metrics (every process's, ``service.procs.shared_metrics``),
logins (one throttle for the whole service), access keys (last use, noted by every process
and gathered in the writer), the creation of multipart sessions (so that the per-user cap
on open sessions counts every creation in flight in one place, ``service.http.caps``) and
the rest of a session's life but its parts: its status, abort and ``complete`` (the writer
keeps the object's SHA-256 carried over the parts written in place, from every process, and
seals their file, ``service.multipart.in_place``; the parts stay on any process) are answered
by the writer alone. A worker
passes such a request to the writer's second HTTP listener, a unix socket beside the commit
socket, and streams the answer back as it comes (an event stream included).
The writer trusts that listener's ``X-Real-Ip`` so throttles and the access log see the
client's address; only the server's user can reach the socket.

While the writer is away the worker answers 503 with ``Retry-After`` in the contract's shape.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import json
import logging
import socket
import weakref
from typing import Any

import tornado.httpclient
import tornado.httputil
import tornado.iostream
import tornado.netutil
import tornado.simple_httpclient
import tornado.tcpclient
import tornado.web

from service.common.api_errors import ApiError, error_body, response_headers
from service.context import AppContext

log = logging.getLogger("service.procs")

API = "/api/v1"
WRITER_ROUTES = (
    r"/health",
    rf"{API}/auth/login",
    rf"{API}/access-keys",
    rf"{API}/access-keys/[^/]+",
    rf"{API}/multipart/init",
    rf"{API}/multipart/[^/]+",
    rf"{API}/multipart/[^/]+/complete",
    rf"{API}/system/info",
    rf"{API}/system/performance",
    rf"{API}/metrics",
    rf"{API}/system/scrub",
    rf"{API}/system/lifecycle/run",
    rf"{API}/buckets/[^/]+/events",
    rf"{API}/buckets/[^/]+/notifications",
    rf"{API}/videos/jobs",
    rf"{API}/videos/jobs/[^/]+",
)
"""Paths a worker forwards to the writer (see the module docstring)."""
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)
STREAM_SECONDS = 7 * 24 * 3600.0
"""An event stream may stay open this long through a worker."""


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

    def routes(self, ctx: AppContext) -> list[tuple[str, type[WriterProxyHandler], dict[str, Any]]]:
        return [
            (pattern, WriterProxyHandler, {"ctx": ctx, "forwarder": self})
            for pattern in WRITER_ROUTES
        ]

    def close(self) -> None:
        """End what is still streaming (event streams) and close the client."""
        for stream in list(self._tcp.streams):
            stream.close()
        self.client.close()


class WriterProxyHandler(tornado.web.RequestHandler):
    """Pass the request to the writer; stream its answer back unchanged."""

    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

    def initialize(self, ctx: AppContext, forwarder: WriterForwarder) -> None:
        self._ctx = ctx
        self._forwarder = forwarder
        self._status_seen = False
        self._streaming = False
        self._gone = False

    async def prepare(self) -> None:
        self._ctx.requests_in_flight.add(self)
        request = self.request
        headers = tornado.httputil.HTTPHeaders()
        for name, value in request.headers.get_all():
            if name.lower() not in HOP_BY_HOP:
                headers.add(name, value)
        headers["X-Real-Ip"] = request.remote_ip or ""
        body = request.body if request.method in ("POST", "PUT", "PATCH") else None
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
        try:
            await self._forwarder.client.fetch(upstream, raise_error=False)
        except (OSError, tornado.httpclient.HTTPClientError):
            if not self._headers_written:  # nothing reached the client yet
                self._refuse()
                return
            if not self._streaming:
                # Cut off mid-body (the writer or this worker is stopping): so is the
                # client, which sees the short body rather than a whole-looking one.
                self.request.connection.close()  # type: ignore[union-attr]
            # An event stream ends cleanly instead: its client resumes by Last-Event-ID.
        if not self._finished:
            self.finish()

    def _on_header(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if line.startswith("HTTP/"):
            self.clear()
            self.clear_header("Content-Type")
            start = tornado.httputil.parse_response_start_line(line)
            self.set_status(start.code, start.reason)
            self._status_seen = True
        elif line and ":" in line:
            name, value = line.split(":", 1)
            if name.strip().lower() not in HOP_BY_HOP:
                self.add_header(name.strip(), value.strip())
                if name.strip().lower() == "content-type" and "event-stream" in value:
                    self._streaming = True
                    self._ctx.requests_in_flight.discard(self)  # a stream never ends by itself
                    self._ctx.streams.opened(self)  # a stop waits for it to end cleanly

    def _on_chunk(self, chunk: bytes) -> None:
        if self._gone or self._finished:
            raise ConnectionError("the client went away")  # ends the upstream request
        self.write(chunk)
        if self._streaming:
            self.flush()

    def _refuse(self) -> None:
        error = ApiError(
            "ServiceUnavailable", "the metadata writer is restarting; retry", retry_after=1
        )
        self.clear()
        self.set_status(error.status)
        for name, value in response_headers(error).items():
            self.set_header(name, value)
        self.set_header("Content-Type", "application/json")
        request_id = self.request.headers.get("X-Request-Id", "")
        self.finish(json.dumps(error_body(error.code, error.message, request_id)))

    def on_finish(self) -> None:
        self._ctx.requests_in_flight.discard(self)
        self._ctx.streams.ended(self)

    def on_connection_close(self) -> None:
        self._gone = True
        self._ctx.requests_in_flight.discard(self)
        self._ctx.streams.ended(self)

    def check_xsrf_cookie(self) -> None:
        """The writer checks what the route needs."""
