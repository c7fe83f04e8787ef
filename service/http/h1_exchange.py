"""One request and its response on an HTTP/1.1 connection: Tornado's ``HTTPConnection``.

``H1Exchange`` is what ``HTTPServerRequest.connection`` is for every request the server
answers (``service.http.h1_connection`` parses the request and drives the application
through Tornado's public ``HTTPServerConnectionDelegate`` / ``HTTPMessageDelegate``
interfaces). Handlers, ``@stream_request_body`` handlers included, and the bare delegates
below them (object reads, CORS preflights) write their answers through it.

Response framing follows Tornado's ``HTTP1Connection`` rule for rule, so answers are byte
for byte what they were: chunked output for an HTTP/1.1 answer without ``Content-Length``
(not for HEAD, 1xx, 204, 304), ``Connection: close`` when the connection will close,
``Connection: Keep-Alive`` for an HTTP/1.0 client that asked for it, a HEAD or 304 answer
carries no body, and writing more or fewer bytes than ``Content-Length`` is an
``HTTPOutputError`` that closes the connection. Every answer carries exactly one
``Server`` header (``SERVER_NAME``), whoever built it.

A write's future resolves once the connection's send buffer is empty (the transport's
buffer limit is 0, so ``pause_writing`` / ``resume_writing`` say exactly that): a handler
that awaits ``flush`` never holds more than one write in memory, and a body sent around the
transport (``service.http.file_body``) starts after the head really went out.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from tornado import httputil
from tornado.iostream import StreamClosedError

from service.http.request_contract import SERVER_NAME

_NO_BODY_STATUSES = (204, 304)


class Carrier(Protocol):
    """What an exchange needs of its connection (``h1_connection.H1Protocol``)."""

    max_body_size: int
    body_timeout: float
    closed: bool

    def send(self, data: bytes) -> asyncio.Future[None]: ...

    def close(self) -> None: ...

    def socket_fileno(self) -> int | None: ...

    def exchange_answered(self, exchange: H1Exchange) -> None: ...


class RequestContext:
    """What ``HTTPServerRequest`` reads from ``connection.context``: the peer's address and
    the scheme (as Tornado's own context, ``X-Real-Ip`` and friends applied for a trusted
    proxy: ``service.procs.forward``)."""

    __slots__ = ("address", "protocol", "remote_ip")

    def __init__(self, remote_ip: str, protocol: str, address: Any) -> None:
        self.remote_ip = remote_ip
        self.protocol = protocol
        self.address = address

    def __str__(self) -> str:
        return self.remote_ip


class H1Exchange(httputil.HTTPConnection):
    """One request's side of the connection (module docstring)."""

    def __init__(
        self,
        connection: Carrier,
        start_line: httputil.RequestStartLine,
        headers: httputil.HTTPHeaders,
        keep_alive: bool,
        context: RequestContext,
    ) -> None:
        self.connection = connection
        self.context = context
        self.start_line = start_line
        self.headers = headers
        self.keep_alive = keep_alive
        self.max_body_size = connection.max_body_size
        self.body_timeout = connection.body_timeout
        self.delegate: httputil.HTTPMessageDelegate | None = None
        self.close_callback: Callable[[], None] | None = None
        self.answer_started = False
        self.write_finished = False
        self.read_finished = False
        self.delegate_finished = False
        self.chunking = False
        self.expected_remaining: int | None = None
        # the reading side, driven by H1Protocol
        self.stage = 0
        self.pending = False
        """A delegate's future is being awaited."""
        self.chunks: deque[bytes] = deque()
        self.complete = False
        """The whole request was parsed (its body may still wait in ``chunks``)."""
        self.chunked = False
        self.delivered = 0

    # -- Tornado's HTTPConnection -----------------------------------------------------

    def write_headers(
        self,
        start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
        headers: httputil.HTTPHeaders,
        chunk: bytes | None = None,
    ) -> asyncio.Future[None]:
        assert isinstance(start_line, httputil.ResponseStartLine)
        request = self.start_line
        code = start_line.code
        self.answer_started = True
        self.chunking = (
            request.version == "HTTP/1.1"
            and request.method != "HEAD"
            and code not in _NO_BODY_STATUSES
            and (code < 100 or code >= 200)
            and "Content-Length" not in headers
        )
        if self.keep_alive and not self.read_finished:
            # Answered before the request was read to its end (refused up front): the
            # connection closes after this answer (``H1Protocol.exchange_answered``), and
            # says so, so that a client does not send its next request on it.
            self.keep_alive = False
        if request.version == "HTTP/1.1" and not self.keep_alive:
            headers["Connection"] = "close"
        if (
            request.version == "HTTP/1.0"
            and self.keep_alive
            and self.headers.get("Connection", "").lower() == "keep-alive"
        ):
            headers["Connection"] = "Keep-Alive"
        if self.chunking:
            headers["Transfer-Encoding"] = "chunked"
        headers["Server"] = SERVER_NAME  # one, whoever built the answer (a proxy too)
        if request.method == "HEAD" or code == 304:
            self.expected_remaining = 0
        elif "Content-Length" in headers:
            self.expected_remaining = int(headers["Content-Length"])
        else:
            self.expected_remaining = None
        lines = [f"HTTP/1.1 {code} {start_line.reason}"]
        lines.extend(f"{name}: {value}" for name, value in headers.get_all())
        text = "\r\n".join(lines) + "\r\n\r\n"
        breaks = len(lines) + 1  # one CRLF after each line, and the blank line's
        if text.count("\r") != breaks or text.count("\n") != breaks:
            raise ValueError(f"Illegal characters (CR or LF) in header: {lines!r}")
        data = text.encode("latin-1")
        if chunk:
            data += self._frame(chunk)
        return self.connection.send(data)

    def write(self, chunk: bytes) -> asyncio.Future[None]:
        return self.connection.send(self._frame(chunk))

    def write_response(
        self, code: int, reason: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> asyncio.Future[None]:
        """``write_headers`` for a caller with plain ``(name, value)`` pairs: the same
        bytes (names normalized as ``HTTPHeaders`` does, a later value replacing an earlier
        one of the same name), without building ``HTTPHeaders``. The pairs must include
        ``Content-Length`` (the answers of ``service.http.object_reads`` do)."""
        fields: dict[str, str] = {}
        for name, value in headers:
            fields[normalize_name(name)] = value
        fields["Server"] = SERVER_NAME
        request = self.start_line
        self.answer_started = True
        bodyless = request.method == "HEAD" or code in _NO_BODY_STATUSES or code < 200
        if "Content-Length" not in fields and not bodyless:
            raise ValueError("write_response needs a Content-Length")
        if self.keep_alive and not self.read_finished:
            self.keep_alive = False  # closes after this answer: as in ``write_headers``
        if request.version == "HTTP/1.1" and not self.keep_alive:
            fields["Connection"] = "close"
        elif (
            request.version == "HTTP/1.0"
            and self.keep_alive
            and self.headers.get("Connection", "").lower() == "keep-alive"
        ):
            fields["Connection"] = "Keep-Alive"
        if request.method == "HEAD" or code == 304:
            self.expected_remaining = 0
        elif "Content-Length" in fields:
            self.expected_remaining = int(fields["Content-Length"])
        else:
            self.expected_remaining = 0  # 1xx, 204: no body
        text = "\r\n".join([f"HTTP/1.1 {code} {reason}", *(f"{n}: {v}" for n, v in fields.items())])
        breaks = len(fields)  # one CRLF between each two of the len(fields) + 1 lines
        if text.count("\r") != breaks or text.count("\n") != breaks:
            raise ValueError(f"Illegal characters (CR or LF) in header: {fields!r}")
        data = (text + "\r\n\r\n").encode("latin-1")
        if body:
            data += self._frame(body)
        return self.connection.send(data)

    def finish(self) -> None:
        remaining = self.expected_remaining
        if remaining is not None and remaining != 0 and not self.connection.closed:
            self.connection.close()
            raise httputil.HTTPOutputError(
                f"Tried to write {remaining} bytes less than Content-Length"
            )
        if self.chunking:
            self.connection.send(b"0\r\n\r\n")
        self.write_finished = True
        if not self.read_finished:
            self.keep_alive = False  # the rest of the body is not read: close after this
        self.close_callback = None
        self.connection.exchange_answered(self)

    # -- what Tornado's HTTP1Connection adds, used by our handlers ----------------------

    def set_close_callback(self, callback: Callable[[], None] | None) -> None:
        self.close_callback = callback

    def set_body_timeout(self, timeout: float) -> None:
        self.body_timeout = timeout

    def set_max_body_size(self, max_body_size: int) -> None:
        self.max_body_size = max_body_size

    def close(self) -> None:
        self.connection.close()

    def closed(self) -> bool:
        return self.connection.closed

    def socket_fileno(self) -> int | None:
        """The socket's descriptor, for a body sent around the transport (None: closed)."""
        return self.connection.socket_fileno()

    def body_sent_around(self, count: int) -> None:
        """``count`` body bytes went out without ``write`` (``service.http.file_body``)."""
        if self.expected_remaining is not None:
            self.expected_remaining -= count

    # -- internals --------------------------------------------------------------------

    def _frame(self, chunk: bytes) -> bytes:
        if self.expected_remaining is not None:
            self.expected_remaining -= len(chunk)
            if self.expected_remaining < 0:
                self.connection.close()
                raise httputil.HTTPOutputError("Tried to write more data than Content-Length")
        if self.chunking and chunk:
            return b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        return chunk

    def connection_lost(self) -> None:
        """The peer went away: tell whoever waits (Tornado's close callback semantics)."""
        callback, self.close_callback = self.close_callback, None
        if callback is not None:
            callback()


@functools.lru_cache(maxsize=256)
def normalize_name(name: str) -> str:
    """A header name as Tornado's ``HTTPHeaders`` writes it.

    >>> normalize_name("content-length"), normalize_name("ETag"), normalize_name("X-Meta-a")
    ('Content-Length', 'Etag', 'X-Meta-A')
    """
    return "-".join(word.capitalize() for word in name.split("-"))


def closed_future() -> asyncio.Future[None]:
    """A write's future on a closed connection (its exception already retrieved)."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_exception(StreamClosedError())
    future.exception()
    return future
