"""A worker of several serving processes: commits through the writer, reads its index.

Its engine's committer is the link to the writer (``service.procs.link_committer``) and its
state source the writer's index, read-only, looked at again in each request
(``service.procs.shared_state``; ``service.procs.fresh_state`` tells it as each request
starts). Access keys' uses and request figures go to the writer as notes
(``service.procs.notes``). The routes whose answer lives in the writer's memory
(``Home.JOURNAL``) are forwarded to it (``service.procs.forward``), ahead of every other
route. It runs no background work; its parts written in place are hashed, sealed and
removed by the writer.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import signal

import tornado.web

from fsseam.fs import FileSystem
from service.app import direct_object_routes, routes_at
from service.config import Config
from service.context import AppContext
from service.engine.core import Engine
from service.http.base import Home
from service.http.h1_connection import H1Server
from service.multipart.uploads import Uploads
from service.observability import Metrics
from service.procs.forward import WriterForwarder
from service.procs.fresh_state import FreshStateDelegate
from service.procs.link_committer import LinkCommitter
from service.procs.notes import NotedKeyUsage, NotedPerformance
from service.procs.shared_state import SharedIndexState
from service.procs.supervisor import WorkerSeat, forward_socket_path
from service.procs.writer_link import WriterLink
from service.roles.listeners import make_http_server


class WorkerRole:
    """A serving process that commits through the writer (module docstring)."""

    name = "worker"
    stop_signals = (signal.SIGTERM,)
    forwarder: WriterForwarder
    """Made at ``start`` (its HTTP client belongs to the running loop)."""

    def __init__(self, seat: WorkerSeat) -> None:
        self.seat = seat
        self.metrics_dir = seat.metrics_dir
        self.link = WriterLink(seat.socket_path)
        self.shared = SharedIndexState()
        self.performance = NotedPerformance(self.link)

    def build_engine(self, config: Config, fs: FileSystem, metrics: Metrics) -> Engine:
        committer = LinkCommitter(self.link, self.shared)
        return Engine(config, committer, self.shared, fs=fs, key_usage=NotedKeyUsage(self.link))

    def build_uploads(self, engine: Engine) -> Uploads:
        return Uploads(engine, shared=True, keeps_files=False)

    async def start(self, ctx: AppContext, app: tornado.web.Application) -> list[H1Server]:
        self.forwarder = WriterForwarder(forward_socket_path(self.seat.socket_path))
        # Ahead of every other route (Tornado puts added host rules before the app's own).
        app.add_handlers(r".*", self.forwarder.routes(ctx, routes_at(Home.JOURNAL)))
        engine = ctx.engine
        direct = direct_object_routes(app, ctx, before=engine.begin_request)
        return [make_http_server(FreshStateDelegate(app, engine), ctx.config, ctx, direct=direct)]

    def ready(self, ctx: AppContext) -> None:
        self.seat.ready()

    async def drain(self) -> None:
        """End the event streams passed through to the writer."""
        self.forwarder.close()

    async def stop(self, ctx: AppContext) -> None:
        """No background work here."""
