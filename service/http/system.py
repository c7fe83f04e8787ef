"""Diagnostics: ``/api/v1/system/info``, ``/api/v1/system/performance``, ``/api/v1/metrics``.

Thread-safety: event-loop thread only (the metrics collectors read loop-owned state).
"""

from __future__ import annotations

import platform
import time
from importlib import metadata
from typing import Any

from service import __version__
from service.auth import Action
from service.common.timefmt import rfc3339_seconds
from service.http.base import ApiHandler, Home

LIBRARIES = ("tornado", "msgpack", "crc32c", "argon2-cffi", "pillow", "prometheus-client", "av")


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


class SystemInfoHandler(ApiHandler):
    route_name = "/api/v1/system/info"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET",)

    async def get(self) -> None:
        self.authorize(Action.SYSTEM_INFO)
        ctx = self.ctx
        engine = ctx.engine
        counts = engine.state.counts()
        total, free = await engine.run_blocking(engine.store.disk_usage)
        stats = engine.committer.journal_stats()
        journal: dict[str, Any] = {
            "segments": stats.segments if stats else 0,
            "bytes": stats.bytes if stats else 0,
            "last_sequence": stats.last_sequence if stats else 0,
            "last_snapshot_sequence": stats.last_snapshot_sequence if stats else 0,
            "last_snapshot_at": (
                rfc3339_seconds(stats.last_snapshot_at)
                if stats and stats.last_snapshot_at
                else None
            ),
            "last_snapshot_age_seconds": (
                round(time.time() - stats.last_snapshot_at, 3)
                if stats and stats.last_snapshot_at
                else None
            ),
            "replay_seconds": round(engine.committer.replay_seconds, 6),
            "read_only": engine.read_only_reason is not None,
        }
        self.send_json(
            200,
            {
                "version": __version__,
                "python": platform.python_version(),
                "libraries": library_versions(),
                "durability": ctx.config.durability,
                "data_dir": ctx.config.data_dir,
                "uptime_seconds": round(time.time() - ctx.started_at, 3),
                "started_at": rfc3339_seconds(ctx.started_at),
                "buckets": counts.buckets,
                "objects": counts.objects,
                "bytes_stored": counts.bytes_stored,
                "multipart_uploads": len(engine.state.uploads()),
                "uploads_in_flight": len(ctx.uploads_in_flight),
                "uploads_waiting": ctx.uploads_in_flight.waiting(),
                "streams_open": len(ctx.stream_slots),
                "streams_waiting": ctx.stream_slots.waiting(),
                "media_jobs": engine.state.media.job_counts(),
                "journal": journal,
                "disk": {"total_bytes": total, "free_bytes": free},
            },
        )


class SystemPerformanceHandler(ApiHandler):
    route_name = "/api/v1/system/performance"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET",)

    def get(self) -> None:
        self.authorize(Action.SYSTEM_PERFORMANCE)
        self.send_json(200, self.ctx.performance.snapshot())


class MetricsHandler(ApiHandler):
    route_name = "/api/v1/metrics"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET",)

    async def prepare(self) -> None:
        self.public = self.ctx.config.metrics_public
        await super().prepare()

    def get(self) -> None:
        if not self.public:
            self.authorize(Action.METRICS_READ)
        ctx = self.ctx
        ctx.metrics.set_multipart_sessions(len(ctx.engine.state.uploads()))
        ctx.metrics.set_media_jobs(ctx.engine.state.media.job_counts())
        ctx.metrics.set_read_only(ctx.engine.read_only_reason is not None)
        body, content_type = ctx.metrics.render()
        self.set_header("Content-Type", content_type)
        self.finish(body)
