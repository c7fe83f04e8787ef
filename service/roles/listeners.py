"""The HTTP servers a role serves on, all with the same limits and contract-shaped refusals.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable

from tornado.httputil import HTTPMessageDelegate, HTTPServerConnectionDelegate

from service.config import Config
from service.context import AppContext
from service.http.base import new_request_id, valid_request_id
from service.http.h1_connection import H1Server
from service.http.h1_exchange import H1Exchange
from service.http.json_body import MAX_JSON_BYTES
from service.http.protocol import header_deadline

Direct = Callable[[H1Exchange], HTTPMessageDelegate | None]
"""A shortcut past the application's routing (``service.app.direct_object_routes``)."""


def make_http_server(
    app: HTTPServerConnectionDelegate,
    config: Config,
    ctx: AppContext,
    *,
    xheaders: bool = False,
    direct: Direct | None = None,
) -> H1Server:
    """An HTTP server with the limits that keep hostile clients from holding memory, whose
    protocol-level refusals are the contract's (``service.http.h1_connection``). ``xheaders``:
    trust ``X-Real-Ip`` (only the writer's internal listener, ``service.procs.forward``).
    ``direct``: object reads that skip the application's routing (the public listener)."""
    return H1Server(
        app,
        xheaders=xheaders,
        header_deadline=header_deadline(config.idle_timeout),
        idle_timeout=config.idle_timeout,
        body_timeout=config.body_timeout,
        max_header_size=config.max_header_bytes,
        max_body_size=MAX_JSON_BYTES,  # the server-wide cap; a body handler raises its own
        observer=ctx.observe_refusal,
        new_request_id=new_request_id,
        valid_request_id=valid_request_id,
        direct=direct,
    )
