"""What the delegates below Tornado's ``RequestHandler`` share: how an answer that had to
wait ends, and how a failure becomes the contract's answer.

``ObjectRead`` (``service.http.object_reads``) and ``SmallPut``
(``service.http.object_writes``) answer at once when they can, else hand what is left (a
coroutine) to ``answer_later``; either way a failure goes through ``fail``: a refusal in the
contract's shape, a client that left ends quietly, anything else is logged and answered 500
(or, once the answer began, the connection is closed). No traceback reaches the client.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

from tornado.httputil import HTTPMessageDelegate
from tornado.iostream import StreamClosedError

from service.common.api_errors import ApiError, ServiceError
from service.http.h1_exchange import H1Exchange

log = logging.getLogger("service.http")


class DirectAnswer(HTTPMessageDelegate):
    """A delegate that writes its own answer; subclasses set the attributes below and
    implement ``send_error`` and ``done``."""

    request_id: str
    connection: H1Exchange
    status: int
    """The status sent (0: no answer began)."""

    def send_error(self, error: ServiceError) -> Coroutine[Any, Any, None] | None:
        """Answer ``error``; what is left to await (its audit record), or None."""
        raise NotImplementedError

    def done(self) -> None:
        """The request is over: count it and log it (once)."""
        raise NotImplementedError

    async def answer_later(self, rest: Coroutine[Any, Any, None]) -> None:
        try:
            await rest
        except Exception as error:
            refusal = self.fail(error)
            if refusal is not None:
                await refusal
        finally:
            self.done()

    def fail(self, error: Exception) -> Coroutine[Any, Any, None] | None:
        """Answer a refusal in the contract's shape; log anything unexpected. What is left
        to await when the refusal's audit record must be on disk first."""
        if isinstance(error, ServiceError):
            return self.send_error(error)
        if isinstance(error, StreamClosedError):
            return None
        log.error("request %s failed", self.request_id, exc_info=error)
        if self.status == 0:
            return self.send_error(ApiError("InternalError", "internal error"))
        self.connection.close()
        return None
