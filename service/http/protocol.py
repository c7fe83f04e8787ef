"""The connection's own answers and deadlines, as the contract wants them (pure).

A request the HTTP/1.1 connection refuses before any route sees it (an unparsable request
line or header, a bad ``Content-Length``, a body over the request's limit; the connection is
``service.http.h1_connection``) is answered in the contract's shape: an ``X-Request-Id`` and
the JSON error envelope, 413 EntityTooLarge for a body over its limit (a JSON body over
1 MiB), 400 otherwise; then ``Connection: close`` and a short lingering close (what the client
still sends is read and dropped for up to ``LINGER_SECONDS`` / ``LINGER_BYTES``) so the answer
reaches a client that sends its whole body before it reads. An HTTP/1.1 request without one
good ``Host`` is refused the same way (``service.http.host``). Every answer leaves with
exactly one ``Server`` header, whoever built it (the connection sets it, ``h1_exchange``).

Deadlines: a connection may wait ``idle_timeout`` seconds for the first byte of a request,
then must finish the request's headers within ``header_deadline`` seconds of that byte
(slowloris: a client dribbling header bytes no longer holds a connection for the whole idle
timeout again and again); ``body_timeout`` bounds the body.

Thread-safety: pure functions and constants.
"""

from __future__ import annotations

from collections.abc import Callable
from http.client import responses

from service.common.api_errors import ApiError
from service.http.request_contract import render_error, response_head

HEADER_DEADLINE_SECONDS = 10.0
"""A request's headers must be complete this long after its first byte (or within half the
idle timeout, when that is shorter: ``header_deadline``)."""
LINGER_SECONDS = 2.0
LINGER_BYTES = 64 * 1024 * 1024
BODYLESS = ("GET", "HEAD", "DELETE", "OPTIONS")

Observer = Callable[[str, int, int, str | None], None]
"""Told of each protocol-level refusal: (request id, status, bytes sent, remote address)."""


def header_deadline(idle_timeout: float) -> float:
    """Seconds from a request's first byte to the end of its headers.

    >>> header_deadline(60.0), header_deadline(4.0)
    (10.0, 2.0)
    """
    return min(HEADER_DEADLINE_SECONDS, idle_timeout / 2)


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
