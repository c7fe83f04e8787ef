"""The request contract, once: request ids, the error answer, and the finished request.

Every way a request is answered goes through here, whichever path it took: Tornado
handlers (``service.http.base``; a worker's forwarding to the writer is one of them,
``service.procs.forward``), the bare delegates below them (object reads in
``service.http.object_reads``, CORS preflights), and the connection's own refusals
(``service.http.protocol``). So the rules the contract sets for every response live in one
place:

- the request id: the client's ``X-Request-Id`` when it is one we may echo, else ours
  (``request_id_for``);
- the head every answer starts with: ``Server``, ``Date``, ``X-Request-Id``
  (``response_head``);
- the error answer: status, the error's own headers (``Retry-After`` for a hint),
  ``ERROR_HEADERS`` (never cached, never sniffed, never run), and the JSON envelope
  ``{"error": {"code", "message", "request_id"}}`` unless the answer has no body (HEAD, 304)
  (``render_error``); the log detail goes to the server log, never to the client;
- the finished request: one ``FinishedRequest`` record, out of the graceful stop's count,
  into the metrics and the access log (``record_finished``).

Pure apart from the log line and ``record_finished``. Thread-safety: the id counter is an
``itertools.count`` (atomic under the GIL); everything else runs on the event-loop thread.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass
from typing import Protocol

from service.common.api_errors import (
    ApiError,
    ServiceError,
    error_body,
    response_headers,
    status_of,
)
from service.common.timefmt import http_date
from service.common.wire import HEADER_REQUEST_ID
from service.http.served_content import SANDBOX_HEADERS
from service.observability import FinishedRequest

log = logging.getLogger("service.http")

JSON_TYPE = "application/json; charset=utf-8"
SERVER_NAME = "service"
"""The one ``Server`` header of every answer: the product, never a library or a version."""
ERROR_HEADERS = (("Cache-Control", "no-store"), *SANDBOX_HEADERS)
"""What every error answer carries besides the error's own headers: never cached, never
sniffed as a page (its message may quote what the client sent), never run."""

_REQUEST_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
_REQUEST_ID_PREFIX = secrets.token_hex(4)
_request_numbers = itertools.count(1)


def _new_request_id_prefix() -> None:
    """A forked serving process (``service.procs``) draws its own prefix."""
    global _REQUEST_ID_PREFIX
    _REQUEST_ID_PREFIX = secrets.token_hex(4)


os.register_at_fork(after_in_child=_new_request_id_prefix)

TORNADO_STATUS_CODES = {
    400: "InvalidArgument",
    401: "Unauthorized",
    403: "AccessDenied",
    404: "NotFound",
    405: "MethodNotAllowed",
    411: "LengthRequired",
    413: "EntityTooLarge",
    416: "InvalidRange",
    503: "ServiceUnavailable",
}
"""The contract's code for a status Tornado answers by itself."""


def new_request_id() -> str:
    """A request id unique to this server: a random per-process prefix and a counter.

    Ids only need to be unique, not unguessable, and a random draw per request cost a
    noticeable share of a small GET.
    """
    return f"{_REQUEST_ID_PREFIX}{next(_request_numbers):08x}"


def valid_request_id(value: str) -> bool:
    """Whether a client's ``X-Request-Id`` may be used as ours (else we make one up).

    >>> valid_request_id("abc-123.x:y"), valid_request_id("a b"), valid_request_id("")
    (True, False, False)
    """
    return _REQUEST_ID_PATTERN.match(value) is not None


def request_id_for(incoming: str | None) -> str:
    """The id of a request whose ``X-Request-Id`` header is ``incoming`` (None: absent)."""
    if incoming is not None and valid_request_id(incoming):
        return incoming
    return new_request_id()


def response_head(request_id: str) -> tuple[tuple[str, str], ...]:
    """The headers every answer starts with, whoever writes it: ``Server``, ``Date`` (this
    second's, formatted once a second) and ``X-Request-Id``."""
    return (("Server", SERVER_NAME), ("Date", _date_now()), (HEADER_REQUEST_ID, request_id))


_date_second = -1
_date_text = ""


def _date_now() -> str:
    """``Date``'s value for now; one formatting per second, not one per answer."""
    global _date_second, _date_text
    second = int(time.time())
    if second != _date_second:
        _date_text = http_date(second * 1000)
        _date_second = second
    return _date_text


def tornado_error(status: int, reason: str, allow: tuple[str, ...] = ()) -> ApiError:
    """The contract's error for a status Tornado raised itself (a bad argument, an unknown
    method); a 405 lists the methods the route answers (RFC 9110 section 15.5.6)."""
    code = TORNADO_STATUS_CODES.get(status)
    if code is None:
        code = "InternalError" if status >= 500 else "InvalidArgument"
    headers = {"Allow": ", ".join(allow)} if status == 405 else {}
    return ApiError(code, reason, headers=headers)


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """A rendered error: what to send, whoever sends it."""

    status: int
    headers: list[tuple[str, str]]
    """The error's headers, ``ERROR_HEADERS``, and ``Content-Type`` when there is a body;
    never ``Content-Length`` (the sender knows how it frames the body)."""
    body: bytes


def render_error(error: ServiceError, request_id: str, *, with_body: bool = True) -> ErrorAnswer:
    """The answer to ``error`` in the contract's shape; ``with_body`` is False for a HEAD.

    The error's ``log_detail`` (for operators only) is logged here, with the request id.
    """
    if error.log_detail:
        log.warning("request %s: %s", request_id, error.log_detail)
    status = status_of(error)
    headers = [*ERROR_HEADERS, *response_headers(error).items()]
    if not with_body or status == 304:
        return ErrorAnswer(status, headers, b"")
    headers.append(("Content-Type", JSON_TYPE))
    body = json.dumps(error_body(error.code, error.message, request_id)).encode()
    return ErrorAnswer(status, headers, body)


class InFlight(Protocol):
    """The graceful stop's set of requests being answered."""

    def discard(self, item: object, /) -> None: ...


class Observer(Protocol):
    """What counts and logs a finished request (``AppContext.observe_request``)."""

    def observe_request(self, finished: FinishedRequest) -> None: ...


def record_finished(
    in_flight: InFlight, observer: Observer, request: object, finished: FinishedRequest
) -> None:
    """``request`` is answered: out of the in-flight set, into the metrics and access log."""
    in_flight.discard(request)
    observer.observe_request(finished)
