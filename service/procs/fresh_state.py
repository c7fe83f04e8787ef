"""Every request on a worker starts from the writer's latest state.

Wraps the application as the HTTP server's delegate: each request, as it starts, tells the
engine's state source (``service.procs.shared_state``) to check the index's sequence at its
first read of the state.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from tornado import httputil

from service.engine.core import Engine


class FreshStateDelegate(httputil.HTTPServerConnectionDelegate):
    """``app`` with ``engine.begin_request()`` before every request."""

    def __init__(self, app: httputil.HTTPServerConnectionDelegate, engine: Engine) -> None:
        self._app = app
        self._engine = engine

    def start_request(
        self, server_conn: object, request_conn: httputil.HTTPConnection
    ) -> httputil.HTTPMessageDelegate:
        self._engine.begin_request()
        return self._app.start_request(server_conn, request_conn)

    def on_close(self, server_conn: object) -> None:
        self._app.on_close(server_conn)
