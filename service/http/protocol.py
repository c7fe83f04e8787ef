"""The HTTP/1.1 connection under the application: protocol-level refusals and deadlines.

Tornado answers a request it cannot parse (a bad request line or header, a bad
``Content-Length``, a body over the connection's limit, an HTTP/1.1 request without one good
``Host``) with a bare ``HTTP/1.1 400 Bad Request`` and closes the connection, often with the
client's bytes unread, so the client sees a reset instead of the answer. Here those refusals are the
contract's: an ``X-Request-Id`` and the JSON error envelope, 413 EntityTooLarge for a body
over its limit (a JSON body over 1 MiB), 400 otherwise; then ``Connection: close`` and a
short lingering close (what the client still sends is read and dropped for up to
``LINGER_SECONDS`` / ``LINGER_BYTES``) so the answer reaches a client that sends its whole
body before it reads. Every answer leaves with exactly one ``Server`` header
(``write_headers``), whoever built it.

Deadlines: a connection may wait ``idle_timeout`` seconds for the first byte of a request,
then must finish the request's headers within ``header_deadline`` seconds of that byte
(slowloris: a client dribbling header bytes no longer holds a connection for the whole idle
timeout again and again); Tornado's own ``body_timeout`` bounds the body.

``ServiceHTTPServer`` is Tornado's ``HTTPServer`` with ``ServiceServerConnection`` (the
request loop: idle wait, then one ``ServiceConnection`` per request) in place of Tornado's.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Awaitable, Callable
from http.client import responses
from typing import Any, cast

import tornado.httpserver
from tornado import gen, httputil, iostream
from tornado.http1connection import (
    HTTP1Connection,
    HTTP1ConnectionParameters,
    HTTP1ServerConnection,
)

from service.common.api_errors import ApiError
from service.common.wire import HEADER_REQUEST_ID
from service.http.host import host_problem
from service.http.request_contract import SERVER_NAME, render_error, response_head

log = logging.getLogger("service.http")

HEADER_DEADLINE_SECONDS = 10.0
"""A request's headers must be complete this long after its first byte (or within half the
idle timeout, when that is shorter: ``header_deadline``)."""
LINGER_SECONDS = 2.0
LINGER_BYTES = 64 * 1024 * 1024
BODYLESS = ("GET", "HEAD", "DELETE", "OPTIONS")

Observer = Callable[[str, int, int, str | None], None]
"""Told of each protocol-level refusal: (request id, status, bytes sent, remote address)."""


class ProtocolRefusal(Exception):
    """A request refused below the application, answered by the connection itself."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def header_deadline(idle_timeout: float) -> float:
    """Seconds from a request's first byte to the end of its headers.

    >>> header_deadline(60.0), header_deadline(4.0)
    (10.0, 2.0)
    """
    return min(HEADER_DEADLINE_SECONDS, idle_timeout / 2)


def refusal_for(exc: httputil.HTTPInputError, method: str | None) -> ProtocolRefusal:
    """The contract's answer to what Tornado found wrong with a request."""
    reason = str(exc)
    if "too long" in reason or "too large" in reason:
        if method in BODYLESS:
            return ProtocolRefusal(ApiError("InvalidArgument", f"a {method} takes no body"))
        return ProtocolRefusal(
            ApiError("EntityTooLarge", "the request body is larger than this request accepts")
        )
    return ProtocolRefusal(ApiError("InvalidArgument", f"malformed HTTP request: {reason}"))


def refusal_bytes(error: ApiError, request_id: str) -> bytes:
    """The whole answer to a refused request: status line, headers, envelope."""
    answer = render_error(error, request_id)
    reason = responses.get(answer.status, "Error")
    lines = [
        f"HTTP/1.1 {answer.status} {reason}",
        *(f"{name}: {value}" for name, value in response_head(request_id)),
        *(f"{name}: {value}" for name, value in answer.headers),
        f"Content-Length: {len(answer.body)}",
        "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + answer.body


class ServiceConnection(HTTP1Connection):
    """One request on a connection; refusals in the contract's shape (module docstring)."""

    def __init__(
        self,
        stream: iostream.IOStream,
        params: HTTP1ConnectionParameters,
        context: object,
        first_byte: bytes,
        observer: Observer,
        new_request_id: Callable[[], str],
        valid_request_id: Callable[[str], bool],
    ) -> None:
        super().__init__(stream, False, params, context)
        self._first_byte = first_byte
        self._observer = observer
        self._new_request_id = new_request_id
        self._valid_request_id = valid_request_id
        self._incoming_id: str | None = None
        self._method: str | None = None
        self._answer_started = False

    def _parse_headers(self, data: bytes) -> tuple[str, httputil.HTTPHeaders]:
        try:
            start_line, headers = super()._parse_headers(self._first_byte + data)
            request_line = httputil.parse_request_start_line(start_line)
            self._method = request_line.method
        except httputil.HTTPInputError as exc:
            raise refusal_for(exc, None) from None
        incoming = headers.get(HEADER_REQUEST_ID)
        if incoming is not None and self._valid_request_id(incoming):
            self._incoming_id = incoming
        problem = host_problem(request_line.version, headers.get_list("Host"))
        if problem is not None:
            raise ProtocolRefusal(ApiError("InvalidArgument", problem))
        return start_line, headers

    def _read_body(
        self, code: int, headers: httputil.HTTPHeaders, delegate: httputil.HTTPMessageDelegate
    ) -> Awaitable[None] | None:
        try:
            body = super()._read_body(code, headers, delegate)
        except httputil.HTTPInputError as exc:
            raise refusal_for(exc, self._method) from None
        return None if body is None else self._refusing(body)

    async def _refusing(self, body: Awaitable[None]) -> None:
        try:
            await body
        except httputil.HTTPInputError as exc:
            raise refusal_for(exc, self._method) from None

    def write_headers(
        self,
        start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
        headers: httputil.HTTPHeaders,
        chunk: bytes | None = None,
    ) -> asyncio.Future[None]:
        self._answer_started = True
        if isinstance(start_line, httputil.ResponseStartLine):
            headers["Server"] = SERVER_NAME  # one, whoever built the answer (a proxy too)
        return super().write_headers(start_line, headers, chunk)

    async def _read_message(self, delegate: httputil.HTTPMessageDelegate) -> bool:
        try:
            return await super()._read_message(delegate)
        except ProtocolRefusal as refusal:
            await self._answer(refusal.error)
            return False

    async def _answer(self, error: ApiError) -> None:
        """Send ``error`` (unless the application already answered), linger, close."""
        stream = self.stream
        try:
            if not self._answer_started and stream is not None and not stream.closed():
                request_id = self._incoming_id or self._new_request_id()
                data = refusal_bytes(error, request_id)
                await stream.write(data)
                remote = getattr(self.context, "remote_ip", None)
                self._observer(request_id, error.status, len(data), remote)
                await linger(stream)
        except iostream.StreamClosedError:
            pass
        finally:
            self.close()


async def linger(stream: iostream.IOStream) -> None:
    """Read and drop what the client still sends, until it closes or the bounds pass."""
    deadline = time.monotonic() + LINGER_SECONDS
    dropped = 0
    while dropped < LINGER_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            chunk = await gen.with_timeout(
                datetime.timedelta(seconds=left),
                stream.read_bytes(64 * 1024, partial=True),
                quiet_exceptions=iostream.StreamClosedError,
            )
        except (TimeoutError, iostream.StreamClosedError):
            return
        dropped += len(chunk)


class ServiceServerConnection(HTTP1ServerConnection):
    """The request loop of one connection: wait for a request's first byte (idle timeout),
    then read it with the header deadline running (module docstring)."""

    def __init__(
        self,
        stream: iostream.IOStream,
        params: HTTP1ConnectionParameters,
        context: object,
        server: ServiceHTTPServer,
    ) -> None:
        super().__init__(stream, params, context)
        self.server = server

    async def _server_request_loop(self, delegate: httputil.HTTPServerConnectionDelegate) -> None:
        server = self.server
        try:
            while True:
                first = await self._first_byte()
                if first is None:
                    return
                conn = ServiceConnection(
                    self.stream,
                    self.params,
                    self.context,
                    first,
                    server.observer,
                    server.new_request_id,
                    server.valid_request_id,
                )
                request_delegate = delegate.start_request(self, conn)
                try:
                    more = await conn.read_response(request_delegate)
                except (iostream.StreamClosedError, iostream.UnsatisfiableReadError):
                    return
                except asyncio.CancelledError:
                    return
                except Exception:
                    log.error("uncaught exception on a connection", exc_info=True)
                    conn.close()
                    return
                if not more:
                    return
                await asyncio.sleep(0)
        finally:
            delegate.on_close(self)

    async def _first_byte(self) -> bytes | None:
        """The first byte of the next request (blank lines before it are skipped), or None
        when the client closed or stayed silent for the idle timeout (the stream is closed)."""
        try:
            reading: Awaitable[bytes] = self.stream.read_until_regex(
                b"[^\r\n]", max_bytes=self.params.max_header_size
            )
            if not cast("asyncio.Future[bytes]", reading).done():  # else no timer is needed
                reading = gen.with_timeout(
                    datetime.timedelta(seconds=self.server.idle_timeout),
                    reading,
                    quiet_exceptions=(iostream.StreamClosedError, iostream.UnsatisfiableReadError),
                )
            data = await reading
        except (TimeoutError, iostream.StreamClosedError, iostream.UnsatisfiableReadError):
            self.stream.close()
            return None
        return bytes(data[-1:])


class ServiceHTTPServer(tornado.httpserver.HTTPServer):
    """Tornado's HTTP server with ``ServiceServerConnection`` for every connection."""

    def initialize(  # type: ignore[override]
        self,
        request_callback: Any,
        *,
        header_deadline: float,
        observer: Observer,
        new_request_id: Callable[[], str],
        valid_request_id: Callable[[str], bool],
        **kwargs: Any,
    ) -> None:
        super().initialize(request_callback, **kwargs)
        self.idle_timeout = float(kwargs.get("idle_connection_timeout") or 3600.0)
        self.observer = observer
        self.new_request_id = new_request_id
        self.valid_request_id = valid_request_id
        params = self.conn_params
        self.conn_params = HTTP1ConnectionParameters(
            no_keep_alive=params.no_keep_alive,
            chunk_size=params.chunk_size,
            max_header_size=params.max_header_size,
            header_timeout=header_deadline,
            max_body_size=params.max_body_size,
            body_timeout=params.body_timeout,
            decompress=params.decompress,
        )

    def handle_stream(self, stream: iostream.IOStream, address: tuple[Any, ...]) -> None:
        context = tornado.httpserver._HTTPRequestContext(
            stream, address, self.protocol, self.trusted_downstream
        )
        conn = ServiceServerConnection(stream, self.conn_params, context, self)
        self._connections.add(conn)
        conn.start_serving(self)
