"""The base request handler: authentication, JSON in and out, and the contract's answers.

Every handler of the API derives from ``ApiHandler``. It guarantees the contract's
conventions for every response, including Tornado's own 404/405/400 paths: an
``X-Request-Id`` header, and for every status >= 400 with a body the JSON error shape
``{"error": {"code", "message", "request_id"}}``. Unexpected exceptions become a generic
500 InternalError; the traceback goes to the server log only, never to the client. The
rules themselves (the id, the error answer, the finished request's accounting) live in
``service.http.request_contract``, shared with the paths below Tornado's handlers.

Thread-safety: handlers live on the event-loop thread.
"""

from __future__ import annotations

import enum
import json
import logging
import time
from collections.abc import Awaitable
from typing import Any

import tornado.web

from service.auth import Action, Principal, Resource, Scope, authorize
from service.common.api_errors import ApiError, ServiceError
from service.common.wire import HEADER_REQUEST_ID
from service.context import AppContext
from service.http.admission import ClientGone, slot_owner, slots_refusal, wait_while_connected
from service.http.audit_hook import AuditedAnswer
from service.http.authn import authenticate
from service.http.cross_site import cross_site_refusal
from service.http.h1_exchange import H1Exchange
from service.http.json_body import load_json_object
from service.http.request_contract import (
    JSON_TYPE,
    new_request_id,
    record_finished,
    render_error,
    request_id_for,
    response_head,
    tornado_error,
    valid_request_id,
)
from service.http.served_content import SANDBOX_HEADERS
from service.limits.fair_slots import SlotsFull
from service.meta import MetaState
from service.observability import FinishedRequest
from service.replication.wire import HEADER_PRIMARY_URL

log = logging.getLogger("service.http")

BODYLESS_METHODS = ("GET", "HEAD", "DELETE")
STANDBY_METHODS = ("GET", "HEAD", "OPTIONS")
"""The methods a standby answers itself (reads); every other one is a write it refuses."""

__all__ = [
    "BODYLESS_METHODS",
    "ApiHandler",
    "Home",
    "NotFoundHandler",
    "authorize_action",
    "new_request_id",
    "valid_request_id",
]


def authorize_action(
    state: MetaState, principal: Principal, action: Action, *, bucket: str | None = None
) -> None:
    """The one authorisation check: may ``principal`` do ``action`` (on ``bucket``)?

    A bucket that does not exist is left to the operation, which answers NoSuchBucket.
    """
    if action.scope is Scope.BUCKET:
        if bucket is None:
            raise ValueError(f"{action.value} needs a bucket")
        record = state.get_bucket(bucket)
        if record is None:
            return
        authorize(principal, action, Resource.bucket(record.owner))
    else:
        authorize(principal, action, Resource.service())


class Home(enum.Enum):
    """Where a route's answer lives (``ApiHandler.home``)."""

    ANY = "any serving process"
    """What every process holds: the payloads and the object index."""
    JOURNAL = "the process that writes the journal"
    """Its memory: the event feed, the job runner, the login throttle, the creations in
    flight, the carried hashes of multipart uploads, every process's figures. A process
    without it forwards the request there (``service.procs.forward``)."""


class ApiHandler(AuditedAnswer, tornado.web.RequestHandler):
    """Base of every API handler (recorded in the audit log at its answer:
    ``service.http.audit_hook``)."""

    ctx: AppContext
    route_name: str = "unknown"
    """The route template used as the metrics label (never the raw path)."""
    home: Home = Home.ANY
    """Where the answer lives; a route of ``Home.JOURNAL`` is forwarded by a worker."""
    public: bool = False
    """Served without credentials (health, presigned and share requests decide themselves)."""
    principal: Principal

    @classmethod
    def allowed_methods(cls) -> tuple[str, ...]:
        """The methods this route answers (the ``Allow`` header of its 405s)."""
        return cls.SUPPORTED_METHODS

    def initialize(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.started_at = time.perf_counter()
        self.request_id = request_id_for(self.request.headers.get(HEADER_REQUEST_ID))
        self.credential_id: str | None = None
        self.bytes_in = 0
        self.bytes_out = 0
        self.holds_upload_slot = False
        self.holds_stream_slot = False
        for name, value in response_head(self.request_id):
            self.set_header(name, value)
        self.cors_headers = ctx.cors.headers(self.request.headers.get("Origin"))
        for name, value in self.cors_headers:
            self.set_header(name, value)
        ctx.requests_in_flight.add(self)

    async def prepare(self) -> None:
        """Cap bodies of body-less methods, refuse writes on a standby and cross-site
        writes, then authenticate every non-public request."""
        if self.request.method in BODYLESS_METHODS:
            self.set_max_body_size(0)
        primary = self.ctx.primary_url
        if primary is not None and self.refused_on_standby():
            raise ApiError(
                "ReadOnlyStandby",
                "this server is a standby: send writes to its primary",
                headers={HEADER_PRIMARY_URL: primary},
            )
        refusal = cross_site_refusal(
            self.request, self.ctx.cors, self.ctx.config.public_url, self.presigned()
        )
        if refusal is not None:
            raise refusal
        if not self.public:
            self.audit_reached = True  # authentication starts: the answer is recorded
            self.set_principal(self.authenticate())

    def refused_on_standby(self) -> bool:
        """Whether a standby refuses this request (every write; a route whose write is
        maintenance of the standby's own disk, or a forwarder, says otherwise)."""
        return self.request.method not in STANDBY_METHODS

    def presigned(self) -> bool:
        """Whether the request's own URL is its credential (a presigned request of a route
        that takes one): such requests are exempt from the cross-site check."""
        return False

    def authenticate(self) -> Principal:
        """The caller's principal (overridden where presigned or share URLs are accepted)."""
        engine = self.ctx.engine
        return authenticate(engine.state, engine.key_usage, self.ctx.server_secret, self.request)

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        """Arguments arrive percent-decoded; one that is not UTF-8 is InvalidKey for an
        object key and InvalidArgument otherwise (Tornado's own answer is a bare 400)."""
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            code = "InvalidKey" if name == "key" else "InvalidArgument"
            raise ApiError(code, f"{name or 'argument'} must be percent-encoded UTF-8") from None

    def set_max_body_size(self, limit: int) -> None:
        """Cap this request's body (Tornado's server-wide cap suits JSON bodies only)."""
        connection = self.request.connection
        if isinstance(connection, H1Exchange):
            connection.set_max_body_size(limit)

    def set_principal(self, principal: Principal) -> None:
        self.principal = principal
        self.credential_id = principal.credential_id

    def authorize(self, action: Action, *, bucket: str | None = None) -> None:
        """May the caller do ``action`` (on ``bucket``)? See ``authorize_action``."""
        authorize_action(self.ctx.engine.state, self.principal, action, bucket=bucket)

    # -- upload and stream slots -------------------------------------------------------

    def slot_owner(self) -> str:
        """Whose per-user caps this request counts against (``admission.slot_owner``)."""
        return slot_owner(getattr(self, "principal", None))

    async def wait_for_slot(self, waiting: Awaitable[None]) -> None:
        """Wait for a slot before the body is read (``service.http.admission``): 429 or 503
        when none came within ``SERVICE_QUEUE_WAIT``; a client that left ends the request."""
        try:
            await wait_while_connected(self.request, waiting)
        except SlotsFull as full:
            raise slots_refusal(full) from None
        except ClientGone:
            self.close_connection()
            self.set_status(499, "Client Closed Request")  # for the access log only
            raise tornado.web.Finish() from None

    async def acquire_upload_slot(self) -> None:
        """Take one of the caller's upload slots (``service.limits.upload_slots``)."""
        slots = self.ctx.uploads_in_flight
        owner = self.slot_owner()
        # A free slot is taken at once: no waiting task, no hang-up polling (most uploads).
        if not slots.try_acquire(self, owner):
            await self.wait_for_slot(slots.acquire(self, owner, self.ctx.config.queue_wait))
        self.holds_upload_slot = True

    async def acquire_stream_slot(self) -> None:
        """Take one of the caller's event-stream slots (``SERVICE_MAX_STREAMS_PER_USER``)."""
        owner = self.slot_owner()
        await self.wait_for_slot(self.ctx.stream_slots.acquire(owner, self.ctx.config.queue_wait))
        self.holds_stream_slot = True

    def release_stream_slot(self) -> None:
        if self.holds_stream_slot:
            self.holds_stream_slot = False
            self.ctx.stream_slots.release(self.slot_owner())

    def touch_upload(self) -> None:
        """Record that the body has delivered ``bytes_in`` so far (the watchdog reads it)."""
        if self.holds_upload_slot:
            self.ctx.uploads_in_flight.delivered(self, self.bytes_in)

    def release_upload_slot(self) -> None:
        if self.holds_upload_slot:
            self.holds_upload_slot = False
            self.ctx.uploads_in_flight.release(self)

    def close_connection(self) -> None:
        """Cut this request's connection (the upload watchdog's last resort)."""
        self.holds_upload_slot = False
        connection = self.request.connection
        if connection is not None:
            connection.close()  # type: ignore[attr-defined]

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")
        for name, value in SANDBOX_HEADERS:  # no answer of the API is a page that runs
            self.set_header(name, value)

    def clear(self) -> None:
        """Reset headers and body (Tornado calls this before an error) but keep the head
        (``response_head``) and the CORS headers; the body bytes counted so far are dropped
        with the body."""
        super().clear()
        self.bytes_out = 0
        request_id = getattr(self, "request_id", None)
        if request_id:
            for name, value in response_head(request_id):
                self.set_header(name, value)
        for name, value in getattr(self, "cors_headers", ()):
            self.set_header(name, value)

    # -- JSON -------------------------------------------------------------------------

    def json_body(self) -> dict[str, Any]:
        """The request body as a JSON object (``service.http.json_body``'s limits)."""
        return load_json_object(self.request.body or b"")

    def write(self, chunk: str | bytes | dict[str, Any]) -> None:
        """Tornado's write, counting the body bytes (access log, byte metrics)."""
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        if isinstance(chunk, bytes):
            self.bytes_out += len(chunk)
        super().write(chunk)

    def send_json(self, status: int, payload: Any) -> None:
        self.set_status(status)
        self.set_header("Content-Type", JSON_TYPE)
        self.finish(json.dumps(payload, separators=(",", ":"), ensure_ascii=False))

    # -- errors -----------------------------------------------------------------------

    def send_api_error(
        self, error: ServiceError, extra_headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """Answer with ``error`` in the contract's shape (headers only for HEAD)."""
        if self._finished:
            return
        self.clear()
        answer = render_error(error, self.request_id, with_body=self.request.method != "HEAD")
        self.set_status(answer.status)
        for name, value in (*answer.headers, *extra_headers):
            self.set_header(name, value)
        self.finish(answer.body or None)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc_info = kwargs.get("exc_info")
        error = exc_info[1] if exc_info else None
        if isinstance(error, ServiceError):
            self.send_api_error(error)
            return
        if isinstance(error, tornado.web.HTTPError):
            reason = error.reason or self._reason
            self.send_api_error(tornado_error(status_code, reason, self.allowed_methods()))
            return
        self.send_api_error(ApiError("InternalError", "internal error"))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, ServiceError):
            return
        if isinstance(value, tornado.web.HTTPError) and value.status_code < 500:
            return
        log.error("request %s failed", self.request_id, exc_info=(typ, value, tb))

    # -- accounting -------------------------------------------------------------------

    def on_finish(self) -> None:
        self.release_stream_slot()
        record_finished(
            self.ctx.requests_in_flight,
            self.ctx,
            self,
            FinishedRequest(
                self.request_id,
                self.request.method or "-",
                self.route_name,
                self.get_status(),
                self.bytes_in or len(self.request.body or b""),
                self.bytes_out,
                time.perf_counter() - self.started_at,
                self.credential_id,
                self.request.remote_ip,
            ),
        )

    def on_connection_close(self) -> None:
        """The client went away: nothing is left to finish for it."""
        self.release_stream_slot()
        self.ctx.requests_in_flight.discard(self)
        super().on_connection_close()


class NotFoundHandler(ApiHandler):
    """Every unmatched path: 404 NotFound in the contract's shape."""

    route_name = "unmatched"

    async def prepare(self) -> None:
        raise ApiError("NotFound", "no such endpoint")
