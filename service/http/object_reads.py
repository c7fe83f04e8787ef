"""Object GET and HEAD, answered below Tornado's ``RequestHandler``.

Why: a small GET is nearly all per-request overhead, and a ``RequestHandler`` (built per
request, with its header bookkeeping, flush and finish machinery) costs more than all of
our own work on it. Reads are the hot path of an object store, so GET and HEAD of an
object, and of a shared video output, are answered by ``ObjectRead``, a plain
``HTTPMessageDelegate`` that writes the status line, headers and body straight to the
HTTP/1.1 connection: small bodies from the payload cache, or read on the loop from the
payload's open descriptor when the page cache has them (``RWF_NOWAIT``), or by one executor
read; large ones copied to the socket by an executor thread (``service.http.file_body``).

It keeps every guarantee the handlers give: the contract's headers and error shape, an
``X-Request-Id`` on every answer, no traceback in a response, metrics and the access line,
and the graceful stop's count of requests in flight. The route is decided by
``ObjectReadRouter``, a Tornado ``Router`` placed before the route's handler: it takes GET
and HEAD and lets every other method fall through to that handler.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from http.client import responses
from typing import Any

import tornado.routing
from tornado.escape import url_unescape
from tornado.httputil import (
    HTTPHeaders,
    HTTPMessageDelegate,
    HTTPServerRequest,
    RequestStartLine,
    ResponseStartLine,
)
from tornado.iostream import StreamClosedError

from service.auth import Action, Principal
from service.auth.policy import authorize_key
from service.common.api_errors import ApiError, ServiceError
from service.common.sizes import CHUNK_BYTES
from service.common.wire import HEADER_REQUEST_ID, QUERY_VERSION_ID
from service.context import AppContext
from service.http.audit_hook import failed
from service.http.authn import authenticate, is_presigned, presigned_principal
from service.http.base import authorize_action
from service.http.direct_answer import DirectAnswer
from service.http.file_body import send_file_body
from service.http.h1_exchange import H1Exchange
from service.http.read_plan import ReadPlan, plan_read
from service.http.request_contract import (
    record_finished,
    render_error,
    request_id_for,
    response_head,
)
from service.meta import ObjectVersion
from service.observability import FinishedRequest
from service.ops.objects import read_small_window, read_window_now, resolve_version

log = logging.getLogger("service.http")

READ_METHODS = ("GET", "HEAD")


class Later:
    """``ObjectRead.answer``'s word that a callback answers (``LATER``)."""


LATER = Later()
SMALL_BODY_BYTES = CHUNK_BYTES
"""Bodies up to this size are read in one piece (or come from the payload cache); larger
ones stream through ``send_file_body``."""


@dataclass(frozen=True, slots=True)
class ReadTarget:
    """What a read resolved to: the version, who asked, and headers the route adds."""

    version: ObjectVersion
    credential_id: str | None
    extra_headers: tuple[tuple[str, str], ...] = ()
    principal: Principal | None = None
    """Who asked (the audit record's ``principal``)."""


Resolve = Callable[[AppContext, HTTPServerRequest, Mapping[str, str]], ReadTarget]
"""Authenticate, authorize and find the version for a request and its path arguments;
raises ApiError to refuse."""


def path_argument(path_kwargs: Mapping[str, bytes | None], name: str, code: str) -> str:
    """A percent-decoded path argument as text; not UTF-8 is ``code`` (400)."""
    raw = path_kwargs.get(name) or b""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(code, f"{name} must be percent-encoded UTF-8") from None


def query_argument(request: HTTPServerRequest, name: str) -> str | None:
    """The last value of query argument ``name`` (as Tornado's handlers take it)."""
    values = request.query_arguments.get(name)
    if not values:
        return None
    try:
        return values[-1].decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError("InvalidArgument", f"{name} must be percent-encoded UTF-8") from None


def resolve_object_read(
    ctx: AppContext, request: HTTPServerRequest, path: Mapping[str, str]
) -> ReadTarget:
    """``/buckets/{bucket}/objects/{key}``: credentials or a presigned URL, then the
    version asked for (``?version_id=``) or the current one."""
    bucket, key = path["bucket"], path["key"]
    state = ctx.engine.state
    principal: Principal
    if is_presigned(request):
        principal = presigned_principal(state, ctx.server_secret, request, bucket, key)
    else:
        principal = authenticate(state, ctx.engine.key_usage, ctx.server_secret, request)
    authorize_action(state, principal, Action.OBJECT_READ, bucket=bucket)
    authorize_key(principal, Action.OBJECT_READ, bucket, key)
    version = resolve_version(ctx.engine, bucket, key, query_argument(request, QUERY_VERSION_ID))
    return ReadTarget(version, principal.credential_id, principal=principal)


class ObjectReadRouter(tornado.routing.Router):
    """GET and HEAD of one route go to an ``ObjectRead``; other methods fall through."""

    def __init__(
        self,
        ctx: AppContext,
        route_name: str,
        resolve: Resolve,
        argument_codes: dict[str, str],
        *,
        any_origin: bool = False,
    ) -> None:
        self.ctx = ctx
        self.any_origin = any_origin
        """Every origin may read this route from a browser (share playback)."""
        self.route_name = route_name
        self.resolve = resolve
        self.argument_codes = argument_codes
        """Path argument name -> the error code when it is not UTF-8."""

    def find_handler(self, request: HTTPServerRequest, **kwargs: Any) -> HTTPMessageDelegate | None:
        if request.method not in READ_METHODS:
            return None
        return ObjectRead(self, request, kwargs.get("path_kwargs") or {})


WriteDelegate = Callable[[HTTPServerRequest, dict[str, Any]], HTTPMessageDelegate]
"""The application's delegate for a write of the object route, given the request and its
path arguments (``tornado.web.Application.get_handler_delegate`` of the route's handler)."""


def direct_reads(
    router: ObjectReadRouter,
    pattern: str,
    before: Callable[[], None] | None = None,
    writes: tuple[frozenset[str], WriteDelegate] | None = None,
) -> Callable[[H1Exchange], HTTPMessageDelegate | None]:
    """The connection's shortcut to ``router`` (``H1Server(direct=...)``): a GET or HEAD
    whose path matches ``pattern`` gets its ``ObjectRead`` without the application's
    routing (``PreflightRouter``, the rule list, ``_RoutingDelegate``), which routes such a
    request to the same ``ObjectRead`` with the same path arguments (percent-decoded bytes,
    as ``tornado.routing.PathMatches`` gives them). ``before``: called first (a worker's
    ``begin_request``, as ``FreshStateDelegate`` does). ``writes``: methods (none of them
    ``OPTIONS``, which the preflight router may take first) and the delegate the
    application's rule list would route them to on the same path, with the same arguments;
    a small PUT is mostly per-request overhead too (docs/benchmarks.md, "Issue 27")."""
    regex = re.compile(pattern if pattern.endswith("$") else pattern + "$")
    prefix = pattern.split("(", 1)[0]
    write_methods, write_delegate = writes if writes is not None else (frozenset(), None)
    if "OPTIONS" in write_methods:
        raise ValueError("OPTIONS is the preflight router's first")

    def direct(exchange: H1Exchange) -> HTTPMessageDelegate | None:
        start = exchange.start_line
        method = start.method
        reads = method in READ_METHODS
        if not (reads or method in write_methods) or not start.path.startswith(prefix):
            return None
        match = regex.match(start.path.partition("?")[0])
        if match is None:
            return None
        if before is not None:
            before()
        request = HTTPServerRequest(connection=exchange, start_line=start, headers=exchange.headers)
        arguments = {
            name: None if value is None else url_unescape(value, encoding=None, plus=False)
            for name, value in match.groupdict().items()
        }
        if not reads and write_delegate is not None:
            return write_delegate(request, arguments)
        return ObjectRead(router, request, arguments)

    return direct


class ObjectRead(DirectAnswer):
    """One GET or HEAD: resolve, plan, write the answer, then count and log it."""

    def __init__(
        self,
        router: ObjectReadRouter,
        request: HTTPServerRequest,
        path_kwargs: Mapping[str, bytes | None],
    ) -> None:
        self.router = router
        self.ctx = router.ctx
        self.request = request
        self.path_kwargs = path_kwargs
        connection = request.connection
        if not isinstance(connection, H1Exchange):
            raise TypeError("object reads need an HTTP/1.1 connection")
        self.connection = connection
        self.started_at = time.perf_counter()
        self.request_id = request_id_for(request.headers.get(HEADER_REQUEST_ID))
        self.status = 0
        self.bytes_out = 0
        self.credential_id: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.target: ReadTarget | None = None
        self.audit_reached = False
        """Authentication started: the answer is recorded (``service.http.audit_hook``)."""

    def headers_received(
        self, start_line: RequestStartLine | ResponseStartLine, headers: HTTPHeaders
    ) -> None:
        self.connection.set_max_body_size(0)  # a GET or HEAD carries no body

    def finish(self) -> None:
        """The request is complete: answer it now when nothing needs awaiting (a cached
        body, HEAD, 304, an error), else in a task (a disk read or a large body)."""
        self.ctx.requests_in_flight.add(self)
        try:
            rest = self.answer()
        except Exception as error:
            rest = self.fail(error)
        if rest is None:
            self.done()
        elif not isinstance(rest, Later):
            self.task = asyncio.ensure_future(self.answer_later(rest))

    def on_connection_close(self) -> None:
        """Nothing to release: a closed stream ends the answer at its next write."""

    def done(self) -> None:
        record_finished(
            self.ctx.requests_in_flight,
            self.ctx,
            self,
            FinishedRequest(
                self.request_id,
                self.request.method or "-",
                self.router.route_name,
                self.status,
                0,
                self.bytes_out,
                time.perf_counter() - self.started_at,
                self.credential_id,
                self.request.remote_ip,
            ),
        )

    def answer(self) -> Coroutine[Any, Any, None] | Later | None:
        """Answer at once, or return what is left to await (reading or sending the body),
        or ``LATER``: ``when_recorded`` answers."""
        path = {
            name: path_argument(self.path_kwargs, name, code)
            for name, code in self.router.argument_codes.items()
        }
        self.audit_reached = True
        target = self.target = self.router.resolve(self.ctx, self.request, path)
        self.credential_id = target.credential_id
        version = target.version
        # A plain dict: looking up an absent name in HTTPHeaders costs a KeyError.
        request_headers = dict(self.request.headers.get_all())
        plan = plan_read(version, request_headers, head=self.request.method == "HEAD")
        headers = [*plan.headers, *target.extra_headers]
        window = plan.window
        recorded = self.audit(plan.status, window.length)
        if recorded is not None:
            if isinstance(recorded, asyncio.Future) and window.length <= SMALL_BODY_BYTES:
                recorded.add_done_callback(partial(self.when_recorded, version, plan, headers))
                return LATER
            return self.answer_recorded(recorded, version, plan, headers)
        if window.length == 0:
            self.write_head(plan.status, headers, b"")
        elif window.length <= SMALL_BODY_BYTES:
            assert version.payload_id is not None
            body = read_window_now(
                self.ctx.engine, version.payload_id, version.size, window.start, window.length
            )
            if body is None:
                return self.send_small(version, plan, headers)
            self.write_head(plan.status, headers, body)
            self.record_body(window.length, time.perf_counter() - self.started_at)
        else:
            return self.send_large(version, plan, headers)
        self.connection.finish()
        return None

    def when_recorded(
        self,
        version: ObjectVersion,
        plan: ReadPlan,
        headers: list[tuple[str, str]],
        recorded: asyncio.Future[Any],
    ) -> None:
        """A small answer once its audit record is on disk (strict; ``audit``): written in
        the record's callback when the body is at hand, as an unrecorded read's is in
        ``answer``, without a task per request; else as ``answer_recorded`` does."""
        rest: Coroutine[Any, Any, None] | None = None
        try:
            if recorded.cancelled():
                raise StreamClosedError()  # the server is stopping: no answer, no record
            error = recorded.exception()
            if error is not None:
                self.audit_reached = False  # the refusal that follows is not recorded either
                raise error
            window = plan.window
            body = b""
            if window.length:
                assert version.payload_id is not None
                found = read_window_now(
                    self.ctx.engine, version.payload_id, version.size, window.start, window.length
                )
                if found is None:
                    rest = self.send_small(version, plan, headers)
                body = found or b""
            if rest is None:
                self.write_head(plan.status, headers, body)
                if window.length:
                    self.record_body(window.length, time.perf_counter() - self.started_at)
                self.connection.finish()
        except Exception as failure:
            rest = self.fail(failure)
        if rest is None:
            self.done()
        else:
            self.task = asyncio.ensure_future(self.answer_later(rest))

    async def answer_recorded(
        self,
        recorded: Awaitable[Any],
        version: ObjectVersion,
        plan: ReadPlan,
        headers: list[tuple[str, str]],
    ) -> None:
        """The answer once its audit record is on disk (strict; ``audit``)."""
        try:
            await recorded
        except ApiError:
            self.audit_reached = False  # the refusal that follows is not recorded either
            raise
        if plan.window.length > SMALL_BODY_BYTES:
            await self.send_large(version, plan, headers)
        elif plan.window.length:
            await self.send_small(version, plan, headers)
        else:
            self.write_head(plan.status, headers, b"")
            self.connection.finish()

    def audit(self, status: int, length: int) -> Awaitable[Any] | None:
        """Record this read (``service.audit.trail``) if it is recorded; what to await
        before answering (strict durability), or None."""
        trail, method = self.ctx.audit, self.request.method or "-"
        if not self.audit_reached or not trail.wanted(self.router.route_name, method, status):
            return None
        target = self.target
        version = target.version if target is not None else None
        arguments: dict[str, Any]
        if version is not None:
            arguments = {"bucket": version.bucket, "key": version.key}
        else:
            arguments = {
                name: value.decode("utf-8", "replace")
                for name, value in self.path_kwargs.items()
                if name in ("bucket", "key") and value is not None
            }
        token = self.path_kwargs.get("token")
        try:
            return trail.record(
                self.request,
                route=self.router.route_name,
                request_id=self.request_id,
                status=status,
                principal=target.principal if target is not None else None,
                path_arguments=arguments,
                bytes_in=0,
                bytes_out=length,
                response_version_id=None if version is None else version.version_id or "null",
                share_token=token.decode("utf-8", "replace") if token else None,
            )
        except ApiError as error:
            return failed(error)

    async def send_small(
        self, version: ObjectVersion, plan: ReadPlan, headers: list[tuple[str, str]]
    ) -> None:
        assert version.payload_id is not None
        window = plan.window
        data = await read_small_window(
            self.ctx.engine, version.payload_id, version.size, window.start, window.length
        )
        self.write_head(plan.status, headers, data)
        self.record_body(window.length, time.perf_counter() - self.started_at)
        self.connection.finish()

    async def send_large(
        self, version: ObjectVersion, plan: ReadPlan, headers: list[tuple[str, str]]
    ) -> None:
        assert version.payload_id is not None
        engine = self.ctx.engine
        window = plan.window
        payload = await engine.run_blocking(engine.store.open_payload, version.payload_id)
        try:
            first_byte = time.perf_counter() - self.started_at
            await self.write_head(plan.status, headers, b"")
            await send_file_body(
                self.connection,
                payload,
                window.start,
                window.length,
                executor=engine.executor,
                idle_timeout=self.ctx.config.idle_timeout,
            )
        finally:
            await engine.run_blocking(payload.close)
        self.record_body(window.length, first_byte)
        self.connection.finish()

    def record_body(self, length: int, first_byte: float) -> None:
        self.bytes_out = length
        total = time.perf_counter() - self.started_at
        self.ctx.performance.record_get(length, first_byte, total)
        self.ctx.metrics.observe_get_stages(first_byte, total)

    def write_head(
        self, status: int, headers: Iterable[tuple[str, str]], body: bytes
    ) -> asyncio.Future[None]:
        """Write the status line, the server's headers and ``headers``, then ``body``, in
        one write (``H1Exchange.write_response``)."""
        self.status = status
        origin = self.request.headers.get("Origin")
        fields = [
            *response_head(self.request_id),
            *self.ctx.cors.headers(origin, public=self.router.any_origin),
            *headers,
        ]
        reason = responses.get(status, "Unknown")
        return self.connection.write_response(status, reason, fields, body)

    def send_error(self, error: ServiceError) -> Coroutine[Any, Any, None] | None:
        """Answer with ``error`` in the contract's shape (``request_contract``), once its
        audit record is on disk when it is recorded (what to await, then)."""
        answer = render_error(error, self.request_id, with_body=self.request.method != "HEAD")
        body = answer.body
        headers = [*answer.headers, ("Content-Length", str(len(body)))]
        self.bytes_out = len(body)
        recorded = self.audit(answer.status, len(body))
        if recorded is not None:
            return self.send_error_recorded(recorded, answer.status, headers, body)
        try:
            self.write_head(answer.status, headers, body)
            self.connection.finish()
        except StreamClosedError:
            pass
        return None

    async def send_error_recorded(
        self,
        recorded: Awaitable[Any],
        status: int,
        headers: list[tuple[str, str]],
        body: bytes,
    ) -> None:
        try:
            await recorded
        except ApiError as failure:  # no record, no answer: the audit log's refusal instead
            self.audit_reached = False
            refusal = self.send_error(failure)
            assert refusal is None
            return
        try:
            self.write_head(status, headers, body)
            self.connection.finish()
        except StreamClosedError:
            pass
