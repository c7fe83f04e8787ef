"""The audit record of a handler's request, made where its final status is known: at the
answer, before it goes out.

``AuditedAnswer`` is a mixin of ``ApiHandler`` (``service.http.base``): its ``finish`` (and
the first ``flush`` of a streamed answer, an event stream's) records the request
(``service.audit.trail``) once the status is final and, in strict durability, holds the
answer until the record is on disk. Meanwhile the handler counts as finished for Tornado
(nothing more may be written, no second answer starts); the answer then goes out as it
was. If the record cannot be made (the audit log failed, or, in a worker, the writer is
away), the request is answered with that error instead (503): in strict durability no
request is acknowledged without its record.

A request is recorded only once it reached authorisation: ``audit_reached`` is set where
authentication starts (``ApiHandler.prepare``, or the login handler). The object reads
below the handlers (``service.http.object_reads``) make their records the same way.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

import tornado.web

from service.common.api_errors import ApiError
from service.common.wire import HEADER_VERSION_ID

log = logging.getLogger("service.http")


def failed(error: ApiError) -> asyncio.Future[Any]:
    """An awaitable that raises ``error`` (a record that could not be made)."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    return future


class AuditedAnswer(tornado.web.RequestHandler):
    """Records the request at its answer; see the module docstring. Expects the
    ``ApiHandler`` attributes (``ctx``, ``route_name``, ``request_id``, byte counts)."""

    audit_reached = False
    """The request reached authorisation: it is recorded when answered."""
    audit_principal: dict[str, Any] | None = None
    """The record's ``principal`` when the handler knows it better (a login)."""
    _audit_done = False

    def _audit(self) -> Awaitable[Any] | None:
        """Record the request now (once); what to await before answering, or None."""
        if self._audit_done or not self.audit_reached:
            return None
        self._audit_done = True
        handler: Any = self
        trail = handler.ctx.audit
        method = self.request.method or "-"
        status = self.get_status()
        if not trail.wanted(handler.route_name, method, status):
            return None
        try:
            return trail.record(  # type: ignore[no-any-return]
                self.request,
                route=handler.route_name,
                request_id=handler.request_id,
                status=status,
                principal=getattr(self, "principal", None),
                claimed=self.audit_principal,
                path_arguments=getattr(self, "path_kwargs", None) or {},
                bytes_in=handler.bytes_in or len(self.request.body or b""),
                bytes_out=handler.bytes_out,
                response_version_id=self._headers.get(HEADER_VERSION_ID),
            )
        except ApiError as error:
            return failed(error)

    def finish(self, chunk: str | bytes | dict[str, Any] | None = None) -> asyncio.Future[None]:
        if self._audit_done or not self.audit_reached:
            return super().finish(chunk)
        if chunk is not None:
            self.write(chunk)
        if (
            self._status_code == 200
            and self.request.method in ("GET", "HEAD")
            and "Etag" not in self._headers
        ):  # Tornado's own 304 (in ``finish``), decided now: the record says what is sent
            self.set_etag_header()
            if self.check_etag_header():
                self._write_buffer = []
                self.set_status(304)
        wait = self._audit()
        if wait is None:
            return super().finish()
        self._finished = True  # for Tornado: nothing more is written, no other answer starts
        return asyncio.ensure_future(self._finish_after(wait))

    async def _finish_after(self, wait: Awaitable[Any]) -> None:
        try:
            await wait
        except Exception as exc:
            error = (
                exc if isinstance(exc, ApiError) else ApiError("InternalError", "internal error")
            )
            if not isinstance(exc, ApiError):
                request_id = getattr(self, "request_id", "-")
                log.error("recording request %s failed", request_id, exc_info=exc)
            self._finished = False
            self.send_api_error(error)  # type: ignore[attr-defined]
            return
        self._finished = False
        super().finish()  # its future: the bytes reaching the client, which is not ours to await

    def flush(self, include_footers: bool = False) -> asyncio.Future[None]:
        """The first flush of a streamed answer sends its head: record the request first."""
        if self._headers_written or include_footers:
            return super().flush(include_footers)
        wait = self._audit()
        if wait is None:
            return super().flush()
        return asyncio.ensure_future(self._flush_after(wait))

    async def _flush_after(self, wait: Awaitable[Any]) -> None:
        await wait  # a stream whose record failed ends with the error (the handler's)
        await super().flush()
