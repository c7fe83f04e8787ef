"""What every role gives ``service.server.serve``: the parts of one serving process.

The server builds the metrics, asks the role for its engine, starts it, builds the shared
context and the application, and then hands the role the application to serve: the role
returns its HTTP servers (the first one takes the listening sockets), having started its
background work. At the stop, once the requests in flight are answered, ``drain`` ends what
the role passes through (a worker's forwarded event streams), and ``stop`` its background
work; the server then stops the engine.

Thread-safety: event-loop thread only (``build_engine`` runs before the loop serves).
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import Protocol

import tornado.web

from fsseam.fs import FileSystem
from service.config import Config
from service.context import AppContext
from service.engine.core import Engine
from service.http.h1_connection import H1Server
from service.multipart.uploads import Uploads
from service.observability import Metrics, PerformanceRecorder


class Role(Protocol):
    """One serving process's parts (``service.roles``)."""

    @property
    def name(self) -> str:
        """``single``, ``writer``, ``worker``."""
        ...

    @property
    def metrics_dir(self) -> str | None:
        """Where the processes of one service count their metrics together (None: alone)."""
        ...

    @property
    def stop_signals(self) -> Sequence[signal.Signals]:
        """The signals that stop this process gracefully."""
        ...

    @property
    def performance(self) -> PerformanceRecorder:
        """What ``system/performance`` reads (every process's figures, where several serve)."""
        ...

    def build_engine(self, config: Config, fs: FileSystem, metrics: Metrics) -> Engine:
        """The engine, with the committer and state source of this role."""
        ...

    def build_uploads(self, engine: Engine) -> Uploads:
        """The multipart uploads of this process (``service.multipart.uploads``)."""
        ...

    async def start(self, ctx: AppContext, app: tornado.web.Application) -> list[H1Server]:
        """Start the background work; the HTTP servers, the public one first."""
        ...

    def ready(self, ctx: AppContext) -> None:
        """The process serves: say so (a banner, or a word to the supervisor)."""

    async def drain(self) -> None:
        """The requests in flight are answered: end what still passes through."""

    async def stop(self, ctx: AppContext) -> None:
        """Stop the background work (before the engine stops)."""
