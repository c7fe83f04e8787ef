"""The HTTP/1.1 server connection: ``asyncio.Protocol`` with llhttp (``httptools``) under
Tornado's ``Application``.

Why: Tornado's own connection (``IOStream`` reads, a regex search for the end of the head,
``HTTPHeaders.parse``, a coroutine and two timers per request) cost more CPU per small
request than all of our own work on it (docs/benchmarks.md, "Issue 27"). Here the C parser
reads the bytes the transport hands over, and the application is driven through Tornado's
public interfaces only (``HTTPServerConnectionDelegate.start_request``, then
``HTTPMessageDelegate.headers_received`` / ``data_received`` / ``finish`` /
``on_connection_close``), the way Tornado's ``HTTPServer`` drives it: every route,
``@stream_request_body`` handlers included, runs unchanged. Each request's side of the
connection is an ``H1Exchange`` (``service.http.h1_exchange``).

Rules of this module:

1. One request is answered at a time. Pipelined requests are parsed as they arrive and wait
   in order; reading pauses while one waits, or while more than ``BUFFER_LIMIT`` body bytes
   wait for a handler that has not taken them (``data_received`` futures are awaited, as
   Tornado does, so a streaming upload is paced by its sink).
2. Deadlines (module constants in ``service.http.protocol``): a connection may wait
   ``idle_timeout`` for a request's first byte; the head must be complete
   ``header_deadline`` seconds after that byte (slowloris); the body within the request's
   ``body_timeout``. One sweep per server checks every connection's single deadline, so a
   request arms no timer of its own. The upload watchdog (minimum body rate) closes a
   connection through ``H1Exchange.close``.
3. Refusals are the contract's (``service.http.protocol.refusal_bytes``): an unparsable
   request, a head over ``max_header_size``, a version other than HTTP/1.x, an HTTP/1.1
   request without one good ``Host`` (``service.http.host``), a ``Transfer-Encoding``
   other than ``chunked``, a body over the request's limit (413, or 400 for a method that
   takes no body). The answer carries an
   ``X-Request-Id`` (the client's, when valid) and ``Connection: close``; then the write
   side is shut and what the client still sends is read and dropped for up to
   ``LINGER_SECONDS`` / ``LINGER_BYTES`` before the socket closes, so a client that sends
   its whole body before reading still gets the answer.
4. Exceptions escaping the application's delegate are logged and close the connection,
   as Tornado's ``HTTP1ServerConnection`` does; they never reach the client.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

import httptools
from tornado import httputil
from tornado.netutil import is_valid_ip

from service.common.api_errors import ApiError
from service.common.wire import HEADER_REQUEST_ID
from service.http.eager import start_eagerly
from service.http.h1_exchange import H1Exchange, RequestContext, closed_future
from service.http.host import host_problem
from service.http.protocol import (
    BODYLESS,
    LINGER_BYTES,
    LINGER_SECONDS,
    Observer,
    refusal_bytes,
)

log = logging.getLogger("service.http")

BUFFER_LIMIT = 1024 * 1024
"""Body bytes held for a handler that has not taken them yet before reading pauses."""
SWEEP_SECONDS = 0.25
"""How often a server checks its connections' deadlines."""
_CONTINUE = b"HTTP/1.1 100 (Continue)\r\n\r\n"
_HEADERS, _BODY_CHECK, _BODY, _ANSWER = range(4)


class Refused(Exception):
    """A request the connection answers itself (module docstring, rule 3)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.error = ApiError(code, message)


class H1Protocol(asyncio.Protocol):
    """One client connection (module docstring)."""

    def __init__(self, server: H1Server) -> None:
        self.server = server
        self.delegate = server.delegate
        self.max_body_size = server.max_body_size
        self.body_timeout = server.body_timeout
        self.loop = server.loop
        self.transport: asyncio.Transport | None = None
        self.context = RequestContext("0.0.0.0", "http", None)
        self.parser = self._new_parser()
        self.closed = False
        self.lingering = -1
        """Bytes dropped since a refusal (-1: not lingering)."""
        self.awaiting_first_byte = True
        self.deadline: float | None = None
        self.waiting: deque[H1Exchange] = deque()
        self.current: H1Exchange | None = None
        self.parsing: H1Exchange | None = None
        self.buffered = 0
        self.reading_paused = False
        self.advancing = False
        self.drain_waiters: list[asyncio.Future[None]] = []
        self.closed_waiter: asyncio.Future[None] = self.loop.create_future()
        self._url: list[bytes] = []
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_bytes = 0

    def _new_parser(self) -> httptools.HttpRequestParser:
        return httptools.HttpRequestParser(self)

    # -- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        transport = self.transport
        transport.set_write_buffer_limits(high=0, low=0)  # see H1Exchange: writes drain
        sock = transport.get_extra_info("socket")
        peer = transport.get_extra_info("peername")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and peer:
            self.context = RequestContext(str(peer[0]), "http", peer)
        self.deadline = self.loop.time() + self.server.idle_timeout
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.lingering >= 0:
            self.lingering += len(data)
            if self.lingering > LINGER_BYTES:
                self.abort()
            return
        if self.awaiting_first_byte:
            self.awaiting_first_byte = False
            self.deadline = self.loop.time() + self.server.header_deadline
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            # An ``Upgrade`` request is an ordinary request here (as in Tornado); whatever
            # followed its head is the next request.
            self.parser = self._new_parser()
            rest = data[int(upgrade.args[0]) :]
            if rest:
                self.data_received(rest)
                return
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            if isinstance(cause, Refused):
                self.refuse(cause.error)
            else:
                if cause is not None:  # a bug of ours in a callback: answered, and logged
                    log.error("uncaught exception parsing a request", exc_info=cause)
                self.refuse(ApiError("InvalidArgument", f"malformed HTTP request: {exc}"))
            return
        self.advance()
        if (
            (self.waiting or self.buffered > BUFFER_LIMIT)
            and not self.reading_paused
            and not self.closed
            and self.lingering < 0
        ):
            self.reading_paused = True
            assert self.transport is not None
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        return False  # the peer is done sending: close once our answer went out

    def pause_writing(self) -> None:
        pass  # ``send`` looks at the buffer itself

    def resume_writing(self) -> None:
        waiters, self.drain_waiters = self.drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for waiter in self.drain_waiters:
            if not waiter.done():
                waiter.set_result(None)  # the next write will raise StreamClosedError
        self.drain_waiters = []
        current, self.current = self.current, None
        if current is not None:
            if current.delegate is not None and not current.delegate_finished:
                self._call(current.delegate.on_connection_close)
            elif not current.write_finished:
                self._call(current.connection_lost)
        self.waiting.clear()
        self._call(lambda: self.delegate.on_close(self))
        if not self.closed_waiter.done():
            self.closed_waiter.set_result(None)

    # -- httptools callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = []
        self._headers = []
        self._head_bytes = 1
        self.deadline = self.loop.time() + self.server.header_deadline

    def on_url(self, url: bytes) -> None:
        self._url.append(url)
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._count_head(len(name) + len(value) + 4)

    def _count_head(self, count: int) -> None:
        self._head_bytes += count
        if self._head_bytes > self.server.max_header_size:
            raise Refused("InvalidArgument", "the request's head is larger than allowed")

    def on_headers_complete(self) -> None:
        parser = self.parser
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise Refused("InvalidArgument", "malformed HTTP request: Malformed HTTP version")
        headers = httputil.HTTPHeaders()
        try:
            for name, value in self._headers:
                # Optional whitespace around the value is not part of it (RFC 9110 5.5; as
                # Tornado's ``HTTPHeaders.parse_line``): ``Authorization: Bearer `` is
                # ``Bearer``, a malformed credential, not a malformed request.
                headers.add(name.decode("latin-1"), value.decode("latin-1").strip(" \t"))
        except httputil.HTTPInputError as exc:
            raise Refused("InvalidArgument", f"malformed HTTP request: {exc}") from None
        method = parser.get_method().decode("latin-1")
        target = b"".join(self._url).decode("latin-1")
        start_line = httputil.RequestStartLine(method, target, f"HTTP/{version}")
        problem = host_problem(start_line.version, headers.get_list("Host"))
        if problem is not None:
            raise Refused("InvalidArgument", problem)
        encoding = headers.get("Transfer-Encoding")
        if encoding is not None and encoding.lower() != "chunked":
            raise Refused(
                "InvalidArgument", "malformed HTTP request: Unsupported Transfer-Encoding"
            )
        context = self.context
        if self.server.xheaders:
            context = _proxied_context(context, headers)
        keep_alive = _keep_alive(start_line, headers) and parser.should_keep_alive()
        exchange = H1Exchange(self, start_line, headers, keep_alive, context)
        exchange.chunked = encoding is not None
        self.parsing = exchange
        self.waiting.append(exchange)
        self._head_bytes = 0
        self.deadline = self.loop.time() + exchange.body_timeout

    def on_body(self, body: bytes) -> None:
        exchange = self.parsing
        assert exchange is not None
        exchange.chunks.append(body)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        exchange = self.parsing
        assert exchange is not None
        exchange.complete = True
        self.parsing = None
        self.deadline = None

    # -- driving the application ----------------------------------------------------------

    def advance(self) -> None:
        """Move the current request as far as it goes without waiting (rule 1)."""
        if self.advancing:
            return
        self.advancing = True
        try:
            while not self.closed and self._step():
                pass
        except Exception:
            log.error("uncaught exception on a connection", exc_info=True)
            self.close()
        finally:
            self.advancing = False
        if (
            self.reading_paused
            and not self.closed
            and not self.waiting
            and self.buffered <= BUFFER_LIMIT
            and self.lingering < 0
        ):
            self.reading_paused = False
            assert self.transport is not None
            self.transport.resume_reading()

    def _step(self) -> bool:
        """One step of the current request; False when it must wait for something."""
        exchange = self.current
        if exchange is None:
            if not self.waiting:
                return False
            exchange = self.current = self.waiting.popleft()
            exchange.stage = _HEADERS
            direct = self.server.direct
            delegate = None if direct is None else direct(exchange)
            if delegate is None:
                delegate = self.delegate.start_request(self, exchange)
            exchange.delegate = delegate
        if exchange.pending:
            return False
        delegate = exchange.delegate
        assert delegate is not None
        stage = exchange.stage
        if stage == _HEADERS:
            exchange.stage = _BODY_CHECK
            return self._wait_for(
                exchange, delegate.headers_received(exchange.start_line, exchange.headers)
            )
        if stage == _BODY_CHECK:
            headers = exchange.headers
            if headers.get("Expect") == "100-continue" and not exchange.write_finished:
                self.send(_CONTINUE)
            length = headers.get("Content-Length")
            if length is not None and int(length) > exchange.max_body_size:
                self.refuse(_too_large(exchange, "Content-Length too long"))
                return False
            exchange.stage = _BODY
            return True
        if stage == _BODY:
            chunks = exchange.chunks
            while chunks:
                chunk = chunks.popleft()
                self.buffered -= len(chunk)
                exchange.delivered += len(chunk)
                if exchange.chunked and exchange.delivered > exchange.max_body_size:
                    self.refuse(_too_large(exchange, "chunked body too large"))
                    return False
                if not exchange.write_finished:
                    received = delegate.data_received(chunk)
                    if received is not None and not self._wait_for(
                        exchange, start_eagerly(received)
                    ):
                        return False
            if not exchange.complete:
                return False
            exchange.read_finished = True
            exchange.stage = _ANSWER
            if not exchange.write_finished:
                exchange.delegate_finished = True
                delegate.finish()
            return True
        # _ANSWER: wait for the application's finish()
        if not exchange.write_finished:
            return False
        self.current = None
        if not exchange.keep_alive:
            self.close()
            return False
        if not self.waiting and self.parsing is None and self._head_bytes == 0:
            self.deadline = self.loop.time() + self.server.idle_timeout
            self.awaiting_first_byte = True
        return True

    def _wait_for(self, exchange: H1Exchange, awaitable: Awaitable[Any] | None) -> bool:
        """True when ``awaitable`` (a delegate's answer) is done; else resume when it is."""
        if awaitable is None:
            return True
        future = asyncio.ensure_future(awaitable)
        if future.done():
            future.result()
            return True
        exchange.pending = True

        def resume(done: asyncio.Future[Any]) -> None:
            exchange.pending = False
            if done.cancelled() or self.closed:
                return
            error = done.exception()
            if error is not None:
                log.error("uncaught exception on a connection", exc_info=error)
                self.close()
                return
            self.advance()

        future.add_done_callback(resume)
        return False

    def exchange_answered(self, exchange: H1Exchange) -> None:
        """The application finished ``exchange``'s answer (``H1Exchange.finish``)."""
        if not exchange.read_finished:
            self.close()  # the body was not read: only closing ends it (as Tornado does)
            return
        if exchange is self.current and not self.advancing:
            self.advance()

    # -- writing and closing -------------------------------------------------------------

    def send(self, data: bytes) -> asyncio.Future[None]:
        """Write ``data``; the future resolves once the send buffer is empty."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return closed_future()
        transport.write(data)
        future = self.loop.create_future()
        if transport.get_write_buffer_size() == 0:
            future.set_result(None)
        else:
            self.drain_waiters.append(future)
        return future

    def socket_fileno(self) -> int | None:
        if self.closed or self.transport is None or self.transport.is_closing():
            return None
        sock = self.transport.get_extra_info("socket")
        return None if sock is None else int(sock.fileno())

    def refuse(self, error: ApiError) -> None:
        """Answer ``error`` (unless an answer began), then linger and close (rule 3)."""
        transport = self.transport
        current = self.current
        self.current = None
        self.waiting.clear()
        if current is not None and current.delegate is not None and not current.delegate_finished:
            current.delegate_finished = True
            self._call(current.delegate.on_connection_close)
        if transport is None or self.closed or transport.is_closing():
            return
        if current is not None and current.answer_started:
            self.close()
            return
        request_id = self._incoming_request_id(current)
        data = refusal_bytes(error, request_id)
        transport.write(data)
        self.server.observer(request_id, error.status, len(data), self.context.remote_ip)
        self.lingering = 0
        self.deadline = self.loop.time() + LINGER_SECONDS
        if self.reading_paused:
            self.reading_paused = False
            transport.resume_reading()
        if transport.can_write_eof():
            transport.write_eof()

    def _incoming_request_id(self, exchange: H1Exchange | None) -> str:
        if exchange is not None:
            incoming = exchange.headers.get(HEADER_REQUEST_ID)
        else:
            wanted = HEADER_REQUEST_ID.lower().encode()
            incoming = next(
                (v.decode("latin-1") for n, v in self._headers if n.lower() == wanted), None
            )
        if incoming is not None and self.server.valid_request_id(incoming):
            return incoming
        return self.server.new_request_id()

    def close(self) -> None:
        """Close once what was written went out."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def expire(self, now: float) -> None:
        """The sweep found the deadline passed: idle, slow head, slow body, or linger."""
        self.deadline = None
        if self.lingering >= 0:
            self.abort()
        else:
            self.close()

    def _call(self, callback: Callable[[], Any]) -> None:
        try:
            callback()
        except Exception:
            log.error("uncaught exception on a connection", exc_info=True)


def _too_large(exchange: H1Exchange, reason: str) -> ApiError:
    method = exchange.start_line.method
    if method in BODYLESS:
        return ApiError("InvalidArgument", f"a {method} takes no body")
    return ApiError("EntityTooLarge", "the request body is larger than this request accepts")


def _keep_alive(start_line: httputil.RequestStartLine, headers: httputil.HTTPHeaders) -> bool:
    """Tornado's rule: HTTP/1.1 unless ``Connection: close``; HTTP/1.0 only when asked and
    the request's end is known."""
    connection = headers.get("Connection")
    if connection is not None:
        connection = connection.lower()
    if start_line.version == "HTTP/1.1":
        return connection != "close"
    if (
        "Content-Length" in headers
        or "Transfer-Encoding" in headers
        or start_line.method in ("HEAD", "GET")
    ):
        return connection == "keep-alive"
    return False


def _proxied_context(context: RequestContext, headers: httputil.HTTPHeaders) -> RequestContext:
    """The peer as a trusted proxy names it (Tornado's ``xheaders``: ``X-Real-Ip`` or the
    last ``X-Forwarded-For`` address; ``X-Scheme`` or ``X-Forwarded-Proto``)."""
    remote = headers.get("X-Forwarded-For", context.remote_ip)
    remote = remote.split(",")[-1].strip()
    remote = headers.get("X-Real-Ip", remote)
    if not is_valid_ip(remote):
        remote = context.remote_ip
    scheme = headers.get("X-Scheme", headers.get("X-Forwarded-Proto", context.protocol))
    if scheme:
        scheme = scheme.split(",")[-1].strip()
    if scheme not in ("http", "https"):
        scheme = context.protocol
    return RequestContext(remote, scheme, context.address)


class H1Server:
    """Serves ``delegate`` (the Tornado ``Application``, or a wrapper of it) on sockets with
    ``H1Protocol`` connections; the ``HTTPServer`` methods ``service.server`` uses."""

    def __init__(
        self,
        delegate: httputil.HTTPServerConnectionDelegate,
        *,
        xheaders: bool = False,
        header_deadline: float,
        idle_timeout: float,
        body_timeout: float,
        max_header_size: int,
        max_body_size: int,
        observer: Observer,
        new_request_id: Callable[[], str],
        valid_request_id: Callable[[str], bool],
        direct: Callable[[H1Exchange], httputil.HTTPMessageDelegate | None] | None = None,
    ) -> None:
        self.delegate = delegate
        self.direct = direct
        """A shortcut past the application's routing for some requests (object reads:
        ``service.app.direct_object_routes``); None: everything goes through ``delegate``."""
        self.xheaders = xheaders
        self.header_deadline = header_deadline
        self.idle_timeout = idle_timeout
        self.body_timeout = body_timeout
        self.max_header_size = max_header_size
        self.max_body_size = max_body_size
        self.observer = observer
        self.new_request_id = new_request_id
        self.valid_request_id = valid_request_id
        self.loop = asyncio.get_running_loop()
        self.connections: set[H1Protocol] = set()
        self.listeners: list[asyncio.Server] = []
        self.sweeper: asyncio.TimerHandle | None = None

    async def add_sockets(self, sockets: Iterable[socket.socket]) -> None:
        """Serve on each bound socket (TCP, or Unix for the writer's internal listener)."""
        for sock in sockets:
            if sock.family == socket.AF_UNIX:
                listener = await self.loop.create_unix_server(lambda: H1Protocol(self), sock=sock)
            else:
                listener = await self.loop.create_server(lambda: H1Protocol(self), sock=sock)
            self.listeners.append(listener)
        if self.sweeper is None:
            self.sweeper = self.loop.call_later(SWEEP_SECONDS, self.sweep)

    def sweep(self) -> None:
        """Expire every connection whose deadline passed (rule 2)."""
        now = self.loop.time()
        for connection in list(self.connections):
            deadline = connection.deadline
            if deadline is not None and deadline <= now:
                connection.expire(now)
        self.sweeper = self.loop.call_later(SWEEP_SECONDS, self.sweep)

    def stop(self) -> None:
        """Accept no new connections (the open ones go on)."""
        for listener in self.listeners:
            listener.close()

    async def close_all_connections(self) -> None:
        """Close every connection (after the in-flight requests were answered)."""
        waiters = []
        for connection in list(self.connections):
            waiters.append(connection.closed_waiter)
            connection.close()
        if waiters:
            await asyncio.gather(*waiters)
        if self.sweeper is not None:
            self.sweeper.cancel()
            self.sweeper = None
