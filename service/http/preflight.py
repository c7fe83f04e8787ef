"""CORS preflights: ``OPTIONS`` on every ``/api/v1`` path, answered before any route.

A preflight carries no credentials and names no resource the server must look up, so it
is answered by ``Preflight``, a plain ``HTTPMessageDelegate`` placed in front of every
route by ``PreflightRouter`` (a Tornado ``Router``; other methods fall through): 204 with
the policy's headers (``service.limits.cors``), or 403 AccessDenied in the contract's shape
when the origin is not allowed. Share playback paths allow any origin. An ``OPTIONS`` that is
not a preflight (no ``Origin`` and ``Access-Control-Request-Method``) goes to its route like
any other method (405 MethodNotAllowed).

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import time
from http.client import responses
from typing import Any

import tornado.routing
from tornado.httputil import (
    HTTPHeaders,
    HTTPMessageDelegate,
    HTTPServerRequest,
    RequestStartLine,
    ResponseStartLine,
)
from tornado.iostream import StreamClosedError

from service.common.api_errors import ApiError
from service.common.wire import API_PREFIX, HEADER_REQUEST_ID, VIDEO_PLAY_PATH
from service.context import AppContext
from service.http.h1_exchange import H1Exchange
from service.http.request_contract import (
    record_finished,
    render_error,
    request_id_for,
    response_head,
)
from service.observability import FinishedRequest

API_PATHS = API_PREFIX + "/"
PLAY_PATHS = VIDEO_PLAY_PATH + "/"
ROUTE = "/api/v1/{any} (preflight)"


class PreflightRouter(tornado.routing.Router):
    """A preflight under ``/api/v1/`` goes to a ``Preflight``; other requests fall through."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx

    def find_handler(self, request: HTTPServerRequest, **kwargs: Any) -> HTTPMessageDelegate | None:
        if (
            request.method != "OPTIONS"
            or not request.path.startswith(API_PATHS)
            or "Origin" not in request.headers
            or "Access-Control-Request-Method" not in request.headers
        ):
            return None
        return Preflight(self.ctx, request)


class Preflight(HTTPMessageDelegate):
    """One ``OPTIONS`` request: decide, answer, count and log it."""

    def __init__(self, ctx: AppContext, request: HTTPServerRequest) -> None:
        self.ctx = ctx
        self.request = request
        self.started_at = time.perf_counter()
        self.request_id = request_id_for(request.headers.get(HEADER_REQUEST_ID))

    def headers_received(
        self, start_line: RequestStartLine | ResponseStartLine, headers: HTTPHeaders
    ) -> None:
        connection = self.request.connection
        if isinstance(connection, H1Exchange):
            connection.set_max_body_size(0)

    def finish(self) -> None:
        headers = self.request.headers
        origin = headers.get("Origin", "")
        public = self.request.path.startswith(PLAY_PATHS)
        status, body = 204, b""
        answer = self.ctx.cors.preflight(
            origin, headers.get("Access-Control-Request-Headers"), public=public
        )
        if answer is None:
            message = f"cross-origin requests from {origin[:100]!r} are not allowed"
            refusal = render_error(ApiError("AccessDenied", message), self.request_id)
            status, answer, body = refusal.status, refusal.headers, refusal.body
        self.send(status, answer, body)

    def send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        response = HTTPHeaders()
        for name, value in response_head(self.request_id):
            response[name] = value
        response["Cache-Control"] = "no-store"
        for name, value in headers:
            response[name] = value
        if status != 204:
            response["Content-Length"] = str(len(body))
        connection = self.request.connection
        assert connection is not None
        try:
            connection.write_headers(
                ResponseStartLine("HTTP/1.1", status, responses[status]), response, body
            )
            connection.finish()
        except StreamClosedError:
            pass
        record_finished(
            self.ctx.requests_in_flight,
            self.ctx,
            self,
            FinishedRequest(
                self.request_id,
                "OPTIONS",
                ROUTE,
                status,
                0,
                len(body),
                time.perf_counter() - self.started_at,
                None,
                self.request.remote_ip,
            ),
        )

    def on_connection_close(self) -> None:
        """Nothing to release."""
