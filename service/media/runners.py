"""Which job runner the server uses, chosen once at start.

Embedded (the default): ``video_runner.VideoJobRunner`` packages in the server's own worker
processes, with no broker to install. With ``SERVICE_MEDIA_QUEUE`` set:
``fleet_runner.FleetJobRunner`` sends every job to Celery workers through that Redis. Both
are a ``ServerJobRunner``; nothing else in the server asks which one runs.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from typing import Protocol

from service.config import Config
from service.engine.core import Engine
from service.media.fleet_runner import FleetJobRunner
from service.media.video_jobs import JobRunner
from service.media.video_runner import VideoJobRunner
from service.meta import VideoJob
from service.multipart.uploads import Uploads


class ServerJobRunner(JobRunner, Protocol):
    """What the server needs of a runner: the operations' ``JobRunner``, a start and a stop
    (background work, ``service.server``), and the live progress of a job."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def progress(self, job: VideoJob) -> float: ...


def make_job_runner(
    config: Config, engine: Engine, server_secret: bytes, uploads: Uploads
) -> ServerJobRunner:
    """The runner ``config`` asks for (not started)."""
    if config.media_queue:
        return FleetJobRunner(
            uploads,
            queue_url=config.media_queue,
            lease_seconds=config.media_lease,
            server_secret=server_secret,
            max_pixels=config.image_max_pixels,
        )
    return VideoJobRunner(
        engine, max_jobs=config.max_concurrent_video_jobs, max_pixels=config.image_max_pixels
    )
