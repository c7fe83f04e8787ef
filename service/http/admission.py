"""Admission at the HTTP edge: waiting for a per-user slot while the client is still there.

A request over a per-user cap waits in ``service.limits.fair_slots`` before its body is read
(the handler's ``prepare`` has not returned, so the connection reads nothing more and sends no
``100 Continue``): memory stays bounded by what the socket already held. While it waits, its
client may go away; nothing would tell us (the connection is not reading), so the socket is
polled for the peer's hang-up (``POLLRDHUP``: seen even with unread body bytes before it) every
``POLL_SECONDS``, and a client that left gives up its place at once.

``slots_refusal`` is the contract's answer to a wait that ran out: 429 TooManyRequests when
the user's own cap stayed full, 503 ServiceUnavailable when the server's total did, both with
``Retry-After``.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
from collections.abc import Awaitable
from typing import TypeVar

from tornado.httputil import HTTPServerRequest

from service.auth import Principal
from service.common.api_errors import ApiError
from service.http.h1_exchange import H1Exchange
from service.limits.fair_slots import SlotsFull

T = TypeVar("T")

POLL_SECONDS = 0.25
RETRY_AFTER_SECONDS = 1
_HANG_UP = select.POLLHUP | select.POLLERR | select.POLLNVAL | getattr(select, "POLLRDHUP", 0)


class ClientGone(Exception):
    """The client closed its connection while its request waited."""


def client_gone(request: HTTPServerRequest) -> bool:
    """Whether the peer of ``request``'s connection has hung up (or it is closed)."""
    connection = request.connection
    if not isinstance(connection, H1Exchange):
        return False
    fileno = connection.socket_fileno()
    if fileno is None:
        return True
    poller = select.poll()
    poller.register(fileno, _HANG_UP)
    return any(events & _HANG_UP for _, events in poller.poll(0))


async def wait_while_connected(request: HTTPServerRequest, waiting: Awaitable[T]) -> T:
    """``waiting``'s result, unless the client leaves first: then ``waiting`` is cancelled
    (a slot's waiter leaves its queue) and ``ClientGone`` is raised."""
    task = asyncio.ensure_future(waiting)
    try:
        while True:
            done, _ = await asyncio.wait((task,), timeout=POLL_SECONDS)
            if done:
                return task.result()
            if client_gone(request):
                raise ClientGone()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, SlotsFull):
                await task


def slot_owner(principal: Principal | None) -> str:
    """Whose per-user caps a request counts against: its principal's user; a media fleet
    job token's own job (as its open sessions do, ``job_credentials``: a busy fleet neither
    waits for its owner's uploads nor makes them wait)."""
    if principal is None:
        return "-"
    if principal.via == "job":
        return "job:" + principal.credential_id.partition("#")[0]
    return principal.user_id


def slots_refusal(full: SlotsFull) -> ApiError:
    """The answer to a request whose wait for a slot ran out."""
    code = "TooManyRequests" if full.own_cap else "ServiceUnavailable"
    return ApiError(code, str(full), retry_after=RETRY_AFTER_SECONDS)
