"""What the process that writes the journal runs besides answering requests.

The single process and the writer of several are both journal owners: their engine commits
to the journal and applies into its own state (``JournalCommitter`` over ``OwnState``), and
they run all background work: the epoch record of a primary that begins one
(``service.replication.epochs``), the bootstrap of an empty data dir, the batched flush of
access keys' last use, the reapers of expired multipart sessions and video shares, the
video job runner, the lifecycle passes, the webhook deliveries, the scrub, and the journal's
own care (GC, snapshots, the balanced checkpoint: ``service.engine.journaled``), with their
metrics; the replication feed standbys read (``service.replication.feed``); and, with
``SERVICE_ARCHIVE``, the continuous archive (``service.archive``), a reader
of the journal made with the engine so that nothing it still needs goes before it starts.
``JournalOwner`` is that shared part; each of the two roles holds one.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fsseam.fs import FileSystem
from service.archive.metrics import ArchiveCollector
from service.archive.shipper import Archiver
from service.archive.wiring import make_archiver
from service.common.api_errors import ServiceError
from service.common.timefmt import now_ms
from service.config import Config
from service.context import AppContext
from service.engine.core import Engine, OwnState
from service.engine.journaled import JournalCommitter
from service.media.fleet_metrics import FleetCollector
from service.media.video_shares import reap_expired_shares
from service.meta import records
from service.multipart.operations import reap_expired_uploads
from service.observability import Metrics
from service.ops.first_run import bootstrap_if_empty
from service.replication.epochs import begin_epoch
from service.replication.feed import ReplicationFeed
from service.replication.metrics import FeedCollector
from service.replication.repair import RepairFromStandbys
from service.upkeep.metrics import UpkeepCollector

log = logging.getLogger("service")

KEY_USAGE_FLUSH_SECONDS = 60.0
FORGET_CHECK_SECONDS = 60.0
"""How often standbys silent for long lose their slot (``ReplicationFeed.forget_silent``)."""
SHARE_REAP_SECONDS = 600.0


class JournalOwner:
    """The journal's committer and the background work of the process that owns it."""

    def __init__(self) -> None:
        self.own = OwnState()
        self.committer = JournalCommitter(self.own)
        self.archiver: Archiver | None = None
        """Ships to ``SERVICE_ARCHIVE`` when set; made with the engine."""
        self.feed: ReplicationFeed | None = None
        """What standbys read (``service.replication.feed``); made with the engine."""

    def build_engine(
        self, config: Config, fs: FileSystem, metrics: Metrics, *, startup_gc_grace: float
    ) -> Engine:
        """The engine, its journal's figures going to ``metrics``. ``startup_gc_grace``: see
        ``JournalCommitter.startup_gc_grace``."""
        committer = self.committer
        committer.startup_gc_grace = startup_gc_grace
        committer.gc_observer = metrics.observe_gc_run
        committer.snapshot_observer = metrics.observe_snapshot
        committer.batch_observer = lambda records, seconds: observe_journal_batch(
            metrics, records, seconds
        )
        engine = Engine(config, committer, self.own, fs=fs)
        if config.archive:
            self.archiver = make_archiver(engine, committer, config.archive)
        self.feed = ReplicationFeed(engine, committer)
        return engine

    async def start(self, ctx: AppContext) -> None:
        """Bootstrap, then start the background work (module docstring)."""
        await self.begin_epoch(ctx)
        await bootstrap_if_empty(ctx.engine, ctx.config)
        await self.start_work(ctx)

    async def start_work(self, ctx: AppContext, *, scrub_job: bool = True) -> None:
        """The primary's background work (a promoted standby starts it at its promotion,
        its scrub job already running: ``scrub_job=False``)."""
        engine, config = ctx.engine, ctx.config
        if self.archiver is not None:
            self.archiver.start()  # the server secret it ships exists by now (``service.server``)
            ctx.archiver = self.archiver
            ctx.metrics.add_collector(ArchiveCollector(self.archiver))
        if self.feed is not None:
            if config.replication == "sync":
                # After the first start's bootstrap, which no standby can confirm yet.
                self.feed.wait_for_standbys(config.replication_timeout)
            ctx.replication_feed = self.feed
            ctx.metrics.add_collector(FeedCollector(self.feed))
            feed = self.feed
            engine.add_background_job(FORGET_CHECK_SECONDS, _async(feed.forget_silent))
            ctx.scrub.repairer = RepairFromStandbys(engine, feed)  # its copies heal rot here
        engine.add_background_job(KEY_USAGE_FLUSH_SECONDS, lambda: flush_key_usage(engine))
        reap_interval = max(0.5, min(60.0, config.multipart_ttl / 4))
        engine.add_background_job(reap_interval, lambda: reap_expired_uploads(ctx.uploads))
        await ctx.video_jobs.start()
        engine.add_background_job(SHARE_REAP_SECONDS, lambda: reap_expired_shares(engine))
        engine.add_background_job(config.lifecycle_interval, ctx.lifecycle.run_pass)
        ctx.metrics.add_collector(
            UpkeepCollector(ctx.lifecycle, ctx.webhooks, engine.events, ctx.scrub)
        )
        ctx.metrics.add_collector(FleetCollector(ctx.video_jobs))
        await ctx.webhooks.start()
        await ctx.scrub.start()
        if scrub_job:
            engine.add_background_job(ctx.scrub.tick_seconds, ctx.scrub.maybe_start)

    async def begin_epoch(self, ctx: AppContext) -> None:
        """A primary's epoch record, before anything else is committed: epoch 1 on a fresh
        data dir, a new epoch where another server began the current one
        (``service.replication.epochs``)."""
        try:
            await begin_epoch(ctx.engine, self.committer)
        except ServiceError as exc:
            log.error("no epoch record could be committed: %s", exc)

    async def stop(self, ctx: AppContext) -> None:
        """Stop the video workers (their jobs rerun at the next start), the webhook
        deliveries and the scrub; the engine stops after."""
        await ctx.video_jobs.stop()
        await ctx.webhooks.stop()
        await ctx.scrub.stop()
        if self.archiver is not None:
            await self.archiver.stop()
        if self.feed is not None:
            self.feed.close()


def _async(function: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        function()

    return run


def observe_journal_batch(metrics: Metrics, records: int, seconds: float) -> None:
    """One group commit: its size and how long its write (and fsync) took."""
    metrics.observe_journal_batch(records)
    metrics.observe_journal_fsync(seconds)


async def flush_key_usage(engine: Engine) -> None:
    """Persist access keys' last-use times in one record (not one write per request)."""
    pending = engine.key_usage.pending(engine.state)
    if pending and engine.read_only_reason is None:
        await engine.commit(records.access_keys_used(last_used=pending, at=now_ms()))
