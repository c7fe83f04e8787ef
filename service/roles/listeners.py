"""The HTTP servers a role serves on, all with the same limits and contract-shaped refusals.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from typing import Any

import tornado.httpserver

from service.common.sizes import CHUNK_BYTES
from service.config import Config
from service.context import AppContext
from service.http.base import new_request_id, valid_request_id
from service.http.json_body import MAX_JSON_BYTES
from service.http.protocol import ServiceHTTPServer, header_deadline


def make_http_server(
    app: Any, config: Config, ctx: AppContext, *, xheaders: bool = False
) -> tornado.httpserver.HTTPServer:
    """An HTTP server with the limits that keep hostile clients from holding memory, whose
    protocol-level refusals are the contract's (``service.http.protocol``). ``xheaders``:
    trust ``X-Real-Ip`` (only the writer's internal listener, ``service.procs.forward``)."""
    return ServiceHTTPServer(
        app,
        xheaders=xheaders,
        header_deadline=header_deadline(config.idle_timeout),
        observer=ctx.observe_refusal,
        new_request_id=new_request_id,
        valid_request_id=valid_request_id,
        chunk_size=CHUNK_BYTES,
        max_header_size=config.max_header_bytes,
        max_body_size=MAX_JSON_BYTES,  # the server-wide cap; a body handler raises its own
        idle_connection_timeout=config.idle_timeout,
        body_timeout=config.body_timeout,
        decompress_request=False,
    )
