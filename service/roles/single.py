"""The single serving process (``SERVICE_WORKERS=1``): it owns the journal and serves alone.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import signal

import tornado.web

from fsseam.fs import FileSystem
from service.app import direct_object_routes
from service.banner import startup_banner
from service.config import Config
from service.context import AppContext
from service.engine.core import Engine
from service.http.h1_connection import H1Server
from service.multipart.uploads import Uploads
from service.observability import Metrics, PerformanceRecorder
from service.roles.journal_owner import JournalOwner
from service.roles.listeners import make_http_server


class SingleRole:
    """One process: the journal's committer, its own state, all background work."""

    name = "single"
    metrics_dir = None
    stop_signals = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.owner = JournalOwner()
        self.performance = PerformanceRecorder()

    def build_engine(self, config: Config, fs: FileSystem, metrics: Metrics) -> Engine:
        # Nothing else writes payloads: the start's orphan sweep needs no grace.
        return self.owner.build_engine(config, fs, metrics, startup_gc_grace=0.0)

    def build_uploads(self, engine: Engine) -> Uploads:
        return Uploads(engine, shared=False, keeps_files=True)

    async def start(self, ctx: AppContext, app: tornado.web.Application) -> list[H1Server]:
        await self.owner.start(ctx)
        return [make_http_server(app, ctx.config, ctx, direct=direct_object_routes(app, ctx))]

    def ready(self, ctx: AppContext) -> None:
        print(startup_banner(ctx.config, ctx.engine.fs), flush=True)

    async def drain(self) -> None:
        """Nothing passes through."""

    async def stop(self, ctx: AppContext) -> None:
        await self.owner.stop(ctx)
