"""The writer of several serving processes: a journal owner that also serves its workers.

Beside what a single process does (``service.roles.journal_owner``): the commit socket its
workers commit through and send notes on (``service.procs.writer_service``), told of every
payload the scrub quarantines; its second, internal HTTP listener for the routes workers
forward (``service.procs.forward``), which trusts ``X-Real-Ip``; every process's request
figures for ``system/performance`` (``service.procs.process_table``); and the freeing of
index reader slots left by processes that died mid-read.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import signal

import tornado.web
from tornado.netutil import bind_unix_socket

from fsseam.fs import FileSystem
from service.app import direct_object_routes
from service.config import Config
from service.context import AppContext
from service.engine.core import Engine
from service.http.h1_connection import H1Server
from service.multipart.uploads import Uploads
from service.observability import Metrics
from service.procs.process_table import REFRESH_SECONDS, ProcessPerformance
from service.procs.supervisor import WriterSeat, forward_socket_path
from service.procs.writer_service import CommitService
from service.roles.journal_owner import JournalOwner
from service.roles.listeners import make_http_server

STALE_READERS_SECONDS = 10.0
"""How often the writer frees the index reader slots of processes that died mid-read."""


class WriterRole:
    """The journal owner of several processes (module docstring)."""

    name = "writer"
    stop_signals = (signal.SIGTERM,)

    def __init__(self, seat: WriterSeat) -> None:
        self.seat = seat
        self.metrics_dir = seat.metrics_dir
        self.owner = JournalOwner()
        self.performance = ProcessPerformance(seat.metrics_dir)
        self.commits = CommitService(self.performance, seat.socket_path)

    def build_engine(self, config: Config, fs: FileSystem, metrics: Metrics) -> Engine:
        # A writer started again while workers serve: they may be promoting payloads.
        grace = config.gc_grace if self.seat.workers_running else 0.0
        return self.owner.build_engine(config, fs, metrics, startup_gc_grace=grace)

    def build_uploads(self, engine: Engine) -> Uploads:
        return Uploads(engine, shared=True, keeps_files=True)

    async def start(self, ctx: AppContext, app: tornado.web.Application) -> list[H1Server]:
        engine = ctx.engine
        await self.owner.start(ctx)
        await self.commits.start(engine, ctx.uploads.note_committed)
        engine.quarantined.listeners.append(self.commits.tell_quarantined)
        engine.quarantined.lift_listeners.append(self.commits.tell_repaired)
        engine.add_background_job(STALE_READERS_SECONDS, self.owner.committer.clear_stale_readers)
        engine.add_background_job(REFRESH_SECONDS, lambda: self.performance.refresh(engine))
        internal = make_http_server(app, ctx.config, ctx, xheaders=True)
        await internal.add_sockets(
            [bind_unix_socket(forward_socket_path(self.seat.socket_path), 0o600)]
        )
        public = make_http_server(app, ctx.config, ctx, direct=direct_object_routes(app, ctx))
        return [public, internal]

    def ready(self, ctx: AppContext) -> None:
        self.seat.ready()

    async def drain(self) -> None:
        """Nothing passes through (the workers' forwarded requests are answered here)."""

    async def stop(self, ctx: AppContext) -> None:
        await self.commits.stop()  # commits already received finish and are answered
        await self.owner.stop(ctx)
