"""Small object PUTs, answered below Tornado's ``RequestHandler``.

Why: a small PUT is mostly per-request overhead, and a ``RequestHandler`` (built per request,
its ``_execute`` coroutine, its header bookkeeping, ``finish`` and ``flush``) was the largest
part of it that was not our own work (docs/benchmarks.md, "Small PUTs without a
RequestHandler"). ``SmallPut`` is a plain ``HTTPMessageDelegate``, as ``ObjectRead`` is for
reads, for the common shape of a small PUT only (``takes_small_put``): a declared length of at
most ``SMALL_PUT_BYTES``, no query (so neither a presigned URL nor an argument), no ``Expect``
and no ``Transfer-Encoding``, on a primary. Every other PUT goes to ``ObjectHandler``.

The answer is the handler's (``tests/http/test_small_put_path.py`` compares them): the same
checks in the same order when the head arrives (the path's text, the cross-site rule,
authentication, the head's fields through ``put_request.read_put_intent``, authorisation, the
precheck, then an upload slot, waited for before the body as the handler waits), a refusal
answered once the body was read (as the handler's drain does: the body is small), the
body stored by one executor job, the audit record on disk before the answer in strict, the
same headers, then the metrics and the access line.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Coroutine, Mapping
from http.client import responses
from typing import Any

from tornado.httputil import (
    HTTPHeaders,
    HTTPServerRequest,
    RequestStartLine,
    ResponseStartLine,
)
from tornado.iostream import StreamClosedError

from fsseam import crashpoints
from service.auth import Action, Principal
from service.common.api_errors import ApiError, ServiceError
from service.common.wire import HEADER_REQUEST_ID
from service.context import AppContext
from service.http.admission import ClientGone, slot_owner, slots_refusal, wait_while_connected
from service.http.audit_hook import failed
from service.http.authn import authenticate
from service.http.base import authorize_action
from service.http.cross_site import cross_site_refusal
from service.http.direct_answer import DirectAnswer
from service.http.eager import start_eagerly
from service.http.h1_exchange import H1Exchange
from service.http.object_reads import path_argument
from service.http.put_request import put_answer, read_put_intent, record_put_stages
from service.http.request_contract import (
    JSON_TYPE,
    record_finished,
    render_error,
    request_id_for,
    response_head,
)
from service.http.served_content import SANDBOX_HEADERS
from service.limits.fair_slots import SlotsFull
from service.observability import FinishedRequest
from service.ops.objects import SMALL_PUT_BYTES, PutIntent, precheck_put, store_small_object

log = logging.getLogger("service.http")

_LENGTH_DIGITS = len(str(SMALL_PUT_BYTES))
API_HEADERS = (("Cache-Control", "no-store"), *SANDBOX_HEADERS)
"""What every answer of the API carries (``ApiHandler.set_default_headers``)."""


def takes_small_put(ctx: AppContext, request: HTTPServerRequest) -> bool:
    """Whether ``SmallPut`` answers this request of the object route (see the module
    docstring); decided from the request line and the head alone."""
    if request.method != "PUT" or ctx.primary_url is not None or "?" in request.uri:
        return False
    headers = request.headers
    length = headers.get("Content-Length")
    if length is None or not (length.isascii() and length.isdigit()):
        return False
    if len(length) > _LENGTH_DIGITS or int(length) > SMALL_PUT_BYTES:
        return False
    return "Transfer-Encoding" not in headers and "Expect" not in headers


class SmallPut(DirectAnswer):
    """One small PUT: checked at its head, stored at its end, answered, counted."""

    route_name = "/api/v1/buckets/{bucket}/objects/{key}"

    def __init__(
        self, ctx: AppContext, request: HTTPServerRequest, path_kwargs: Mapping[str, bytes | None]
    ) -> None:
        self.ctx = ctx
        self.request = request
        self.path_kwargs = path_kwargs
        connection = request.connection
        if not isinstance(connection, H1Exchange):
            raise TypeError("a small PUT needs an HTTP/1.1 connection")
        self.connection = connection
        self.started_at = time.perf_counter()
        self.request_id = request_id_for(request.headers.get(HEADER_REQUEST_ID))
        self.status = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.principal: Principal | None = None
        self.intent: PutIntent | None = None
        self.failure: ServiceError | None = None
        """A refusal made at the head, answered once the body was read."""
        self.chunks: list[bytes] = []
        self.body_started = 0.0
        self.holds_slot = False
        self.audit_reached = False
        """Authentication started: the answer is recorded (``service.http.audit_hook``)."""
        self.version_id: str | None = None
        self.finished = False
        self.task: asyncio.Future[Any] | None = None
        ctx.requests_in_flight.add(self)

    # -- the head ---------------------------------------------------------------------

    def headers_received(
        self, start_line: RequestStartLine | ResponseStartLine, headers: HTTPHeaders
    ) -> Coroutine[Any, Any, None] | None:
        """Check the request; then take an upload slot, or wait for one before the body
        is read (what the connection awaits)."""
        try:
            self.check()
        except ServiceError as error:
            self.failure = error
            return None
        slots = self.ctx.uploads_in_flight
        if slots.try_acquire(self, slot_owner(self.principal)):
            self.slot_taken()
            return None
        return self.wait_for_slot()

    def check(self) -> None:
        """``ObjectHandler``'s checks, in its order (``ApiHandler.prepare``, then
        ``ObjectHandler.prepare_put``)."""
        ctx, request = self.ctx, self.request
        bucket = path_argument(self.path_kwargs, "bucket", "InvalidArgument")
        key = path_argument(self.path_kwargs, "key", "InvalidKey")
        refusal = cross_site_refusal(request, ctx.cors, ctx.config.public_url, False)
        if refusal is not None:
            raise refusal
        self.audit_reached = True
        engine = ctx.engine
        self.principal = authenticate(engine.state, engine.key_usage, ctx.server_secret, request)
        intent = read_put_intent(request.headers, bucket, key, ctx.config.max_object_bytes)
        authorize_action(engine.state, self.principal, Action.OBJECT_WRITE, bucket=bucket)
        precheck_put(engine, intent)  # the body's length is declared: the quota is checked
        self.intent = intent

    async def wait_for_slot(self) -> None:
        slots, config = self.ctx.uploads_in_flight, self.ctx.config
        waiting = slots.acquire(self, slot_owner(self.principal), config.queue_wait)
        try:
            await wait_while_connected(self.request, waiting)
        except SlotsFull as full:
            self.failure = slots_refusal(full)
            return
        except ClientGone:
            self.status = 499  # for the access log only
            self.connection.close()
            return
        self.slot_taken()

    def slot_taken(self) -> None:
        self.holds_slot = True
        if self.finished:  # the client left while this request waited
            self.release_slot()
            return
        self.body_started = time.perf_counter()

    def release_slot(self) -> None:
        if self.holds_slot:
            self.holds_slot = False
            self.ctx.uploads_in_flight.release(self)

    def close_connection(self) -> None:
        """Cut this request's connection (the upload watchdog's last resort)."""
        self.holds_slot = False
        self.connection.close()

    # -- the body ---------------------------------------------------------------------

    def data_received(self, chunk: bytes) -> None:
        if self.failure is not None or self.intent is None:
            return  # a refused body is read and dropped
        self.chunks.append(chunk)
        self.bytes_in += len(chunk)
        if self.holds_slot:
            self.ctx.uploads_in_flight.delivered(self, self.bytes_in)

    def finish(self) -> None:
        """The body is here: store it and answer, or answer the refusal."""
        try:
            rest = self.answer()
        except Exception as error:
            rest = self.fail(error)
        if rest is None:
            self.done()
        else:
            self.task = start_eagerly(self.answer_later(rest))

    def on_connection_close(self) -> None:
        """The connection closed before the body was whole: nothing is answered. Only a
        client that left while waiting for a slot is logged (499), as the handler does."""
        self.chunks = []
        if self.status == 499:
            self.done()
            return
        self.finished = True
        self.release_slot()
        self.ctx.requests_in_flight.discard(self)

    # -- the answer -------------------------------------------------------------------

    def answer(self) -> Coroutine[Any, Any, None] | None:
        if self.failure is not None:
            raise self.failure
        intent = self.intent
        assert intent is not None  # set by ``check``, or ``failure`` is
        chunks, self.chunks = self.chunks, []
        self.release_slot()  # as ``take_buffered_body`` gives it back before the store
        return self.store(intent, chunks[0] if len(chunks) == 1 else b"".join(chunks))

    async def store(self, intent: PutIntent, body: bytes) -> None:
        ctx = self.ctx
        stage_write = time.perf_counter() - self.body_started
        version, timings = await store_small_object(ctx.engine, intent, body)
        total = time.perf_counter() - self.body_started
        record_put_stages(ctx, len(body), stage_write, 0.0, timings, total)
        crashpoints.hit("put.before_response")
        headers, answer = put_answer(version)
        self.version_id = headers[-1][1]
        rest = self.respond(200, [("Content-Type", JSON_TYPE), *headers], answer)
        if rest is not None:
            await rest

    def send_error(self, error: ServiceError) -> Coroutine[Any, Any, None] | None:
        self.version_id = None
        answer = render_error(error, self.request_id)
        return self.respond(answer.status, answer.headers, answer.body)

    def respond(
        self, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> Coroutine[Any, Any, None] | None:
        """Send the answer, once its audit record is on disk when it is recorded in strict
        (then what to await)."""
        self.bytes_out = len(body)
        recorded = self.audit(status)
        if recorded is None:
            self.write(status, headers, body)
            return None
        return self.respond_recorded(recorded, status, headers, body)

    async def respond_recorded(
        self, recorded: Awaitable[Any], status: int, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        try:
            await recorded
        except Exception as exc:  # no record, no answer: the audit log's refusal instead
            error = (
                exc if isinstance(exc, ApiError) else ApiError("InternalError", "internal error")
            )
            if not isinstance(exc, ApiError):
                log.error("recording request %s failed", self.request_id, exc_info=exc)
            self.audit_reached = False
            refusal = self.send_error(error)
            assert refusal is None
            return
        self.write(status, headers, body)

    def audit(self, status: int) -> Awaitable[Any] | None:
        """Record this request if it is recorded; what to await before answering, or None."""
        trail = self.ctx.audit
        if not self.audit_reached or not trail.wanted(self.route_name, "PUT", status):
            return None
        intent = self.intent
        arguments = (
            {"bucket": intent.bucket, "key": intent.key}
            if intent is not None
            else {
                name: value.decode("utf-8", "replace")
                for name, value in self.path_kwargs.items()
                if value is not None
            }
        )
        try:
            return trail.record(
                self.request,
                route=self.route_name,
                request_id=self.request_id,
                status=status,
                principal=self.principal,
                path_arguments=arguments,
                bytes_in=self.bytes_in,
                bytes_out=self.bytes_out,
                response_version_id=self.version_id,
            )
        except ApiError as error:
            return failed(error)

    def write(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        """The status line and every header in one write with the body, then done."""
        self.status = status
        fields = [
            *response_head(self.request_id),
            *self.ctx.cors.headers(self.request.headers.get("Origin")),
            *API_HEADERS,
            *headers,
            ("Content-Length", str(len(body))),
        ]
        try:
            self.connection.write_response(status, responses.get(status, "Unknown"), fields, body)
            self.connection.finish()
        except StreamClosedError:
            pass

    def done(self) -> None:
        if self.finished:
            return
        self.finished = True
        self.release_slot()
        record_finished(
            self.ctx.requests_in_flight,
            self.ctx,
            self,
            FinishedRequest(
                self.request_id,
                "PUT",
                self.route_name,
                self.status,
                self.bytes_in,
                self.bytes_out,
                time.perf_counter() - self.started_at,
                None if self.principal is None else self.principal.credential_id,
                self.request.remote_ip,
            ),
        )
