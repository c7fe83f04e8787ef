"""What every handler shares: configuration, engine, uploads, observability, secrets, limits.

One ``AppContext`` per server, handed to handlers through Tornado's ``initialize`` (route
keyword arguments), never through globals.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from service.archive.shipper import Archiver
from service.audit.log import AuditLog
from service.audit.trail import AuditTrail
from service.auth import LoginThrottle
from service.config import Config
from service.engine.core import Engine
from service.limits.caps import Reservations
from service.limits.cors import CorsPolicy
from service.limits.fair_slots import FairSlots
from service.limits.open_streams import OpenStreams
from service.limits.upload_slots import UploadSlots
from service.media.image_variants import ImageVariants
from service.media.runners import make_job_runner
from service.media.video_thumbnail import ThumbnailMaker
from service.multipart.uploads import Uploads
from service.observability import FinishedRequest, Metrics, PerformanceRecorder, log_access
from service.replication.feed import ReplicationFeed
from service.replication.follower import Follower
from service.upkeep.lifecycle import LifecycleRunner
from service.upkeep.scrub import Scrubber
from service.upkeep.webhooks import WebhookDispatcher

log = logging.getLogger("service")


class AppContext:
    """Shared server objects; in-flight requests and uploads."""

    def __init__(
        self,
        config: Config,
        engine: Engine,
        metrics: Metrics,
        performance: PerformanceRecorder,
        server_secret: bytes,
        uploads: Uploads,
    ) -> None:
        self.config = config
        self.engine = engine
        self.uploads = uploads
        """This process's multipart uploads (``service.multipart.uploads``)."""
        self.metrics = metrics
        self.performance = performance
        self.server_secret = server_secret
        self.login_throttle = LoginThrottle()
        self.reservations = Reservations()
        """Creations in flight, so per-user caps and usernames hold under concurrency."""
        self.cors = CorsPolicy.parse(config.cors_origins)
        """Which origins may call the API from a browser (``service.limits.cors``)."""
        self.started_at = time.time()
        self.requests_in_flight: set[object] = set()
        """Requests begun and not yet finished, handlers or object reads (a graceful stop
        waits for them)."""
        self.streams = OpenStreams()
        """Event streams open now (a graceful stop ends them, ``service.limits.open_streams``)."""
        self.uploads_in_flight = UploadSlots(
            capacity=config.max_concurrent_uploads,
            per_user=config.max_uploads_per_user,
            idle_timeout=config.idle_timeout,
            min_body_rate=config.min_body_rate,
            on_cut=metrics.observe_upload_cut,
        )
        """Bodies streaming now, their owners and rates (``service.limits.upload_slots``)."""
        self.stream_slots = FairSlots(
            per_user=config.max_streams_per_user, noun="event streams open"
        )
        """Event streams open now, per user (only the writer serves streams: a worker
        forwards them, so this cap holds for the whole service)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self.images = ImageVariants(
            engine,
            max_pixels=config.image_max_pixels,
            cache_bytes=config.image_cache_bytes,
            memory_budget=config.image_memory_budget,
            workers=config.image_workers or None,
            on_render=metrics.observe_image_render,
        )
        """Image variants and their cache (shared by the image handlers)."""
        self.video_jobs = make_job_runner(config, engine, server_secret, uploads)
        """Runs video packaging jobs, embedded or on a fleet (``service.media.runners``);
        started and stopped by ``service.server``."""
        self.video_thumbnails = ThumbnailMaker(
            engine, max_pixels=config.image_max_pixels, concurrency=os.cpu_count() or 1
        )
        self.lifecycle = LifecycleRunner(uploads, config.lifecycle_pass_pause)
        """Applies the buckets' lifecycle rules (``service.upkeep.lifecycle``)."""
        self.webhooks = WebhookDispatcher(engine, config)
        """Delivers object events to the buckets' webhooks; started by ``service.server``."""
        self.scrub = Scrubber(engine, config)
        """Re-reads stored payloads in the background (``service.upkeep.scrub``)."""
        self.audit = AuditTrail.disabled()
        """Which answered requests are recorded and where (``service.audit.trail``); set by
        ``service.server``."""
        self.audit_log: AuditLog | None = None
        """The audit log itself, in the process that keeps it (``service.audit.log``)."""
        self.archiver: Archiver | None = None
        """The continuous archive, on the process that owns the journal when
        ``SERVICE_ARCHIVE`` is set (``service.roles.journal_owner``)."""
        self.replication_feed: ReplicationFeed | None = None
        """What standbys read, on a primary's journal owner (``service.replication.feed``)."""
        self.follower: Follower | None = None
        """A standby's journal owner: the loop following the primary, and its position
        (``service.replication.follower``)."""
        self._primary_url: str | None = None
        self.promoted: Callable[[], bool] | None = None
        """A standby's worker: whether its writer was promoted meanwhile
        (``service.replication.promotion.promoted_probe``); ``primary_url`` asks it."""
        self.promote: Callable[[], Awaitable[None]] | None = None
        """A standby's journal owner: make this server the primary of the next epoch
        (``service.roles.standby.StandbyOwner.promote``)."""

    @property
    def primary_url(self) -> str | None:
        """Set by a standby's roles (every process of one): writes are refused with 503
        ReadOnlyStandby naming this primary (``ApiHandler.prepare``); None once promoted."""
        if self._primary_url is not None and self.promoted is not None and self.promoted():
            self._primary_url = None
        return self._primary_url

    @primary_url.setter
    def primary_url(self, value: str | None) -> None:
        self._primary_url = value

    async def wait_for_requests(self, timeout: float) -> bool:
        """Wait until no request is in flight; False if ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while self.requests_in_flight:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Run ``coroutine`` in the background, keeping a reference until it ends."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cut_stalled_uploads(self) -> None:
        """Close the connections of stalled and too-slow uploads (the watchdog's tick)."""
        self.uploads_in_flight.cut_stalled()

    def observe_refusal(
        self, request_id: str, status: int, bytes_out: int, remote: str | None
    ) -> None:
        """Count and log a request the connection refused before any route saw it."""
        self.observe_request(
            FinishedRequest(request_id, "-", "unmatched", status, 0, bytes_out, 0.0, None, remote)
        )

    def observe_request(self, finished: FinishedRequest) -> None:
        """Count and log one finished request."""
        self.metrics.observe_request(
            finished.route,
            finished.method,
            finished.status,
            finished.duration_s,
            finished.bytes_in,
            finished.bytes_out,
        )
        log_access(finished)
