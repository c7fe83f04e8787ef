"""The standby: a fourth role, made of a journal owner that follows a primary.

With ``SERVICE_FOLLOW`` set, the process that owns the journal is a ``StandbyOwner``: its
committer is the ``StandbyCommitter`` (bootstrap from the primary before the journal opens,
then only the primary's records; ``service.replication.committer``) and its background work
is the follower (``service.replication.follower``), the scrub, and the journal's own care
(GC, snapshots). None of the primary's background work runs here (first-run credentials,
access keys' uses, reapers, lifecycle, video jobs, webhooks, the archive): each would commit,
and the webhooks would deliver the primary's events twice.

The standby's processes are the primary's: one process (``StandbyRole``, with
``SERVICE_WORKERS=1``) or, by default, a writer and workers. The writer is a standby owner
(``StandbyWriterRole``): it appends the primary's records to its index, which the workers
read as they read any writer's (``service.procs.shared_state``), so every process serves
reads from the standby's own disk and index. Every process refuses writes with 503
ReadOnlyStandby and ``X-Primary-Url`` (``AppContext.primary_url``, read by
``ApiHandler.prepare``); a worker forwards the writer's routes (replication status, health,
scrub, promote) to it as usual.

Promotion (``POST /api/v1/replication/promote``, ``service.replication.promotion``) switches
the parts in place: the owner stops following, commits the next epoch and starts the
primary's work (``JournalOwner.start_work``); the workers stop refusing writes once the
promotion's mark exists (``AppContext.promoted``).

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging

import tornado.web

from fsseam.fs import FileSystem
from service.config import Config
from service.context import AppContext
from service.engine.core import Engine, OwnState
from service.http.h1_connection import H1Server
from service.observability import Metrics
from service.procs.supervisor import WriterSeat
from service.replication.bootstrap import primary_link
from service.replication.committer import StandbyCommitter
from service.replication.epochs import begin_epoch
from service.replication.feed import ReplicationFeed
from service.replication.follower import Follower
from service.replication.metrics import StandbyCollector
from service.replication.promotion import promoted_probe, write_mark
from service.replication.repair import RepairFromPrimary
from service.roles.journal_owner import JournalOwner, observe_journal_batch
from service.roles.single import SingleRole
from service.roles.worker import WorkerRole
from service.roles.writer import WriterRole

log = logging.getLogger("service.replication")


class StandbyOwner(JournalOwner):
    """The journal owner of a standby (module docstring)."""

    committer: StandbyCommitter

    def __init__(self) -> None:
        super().__init__()
        self.follower: Follower | None = None
        self.promoted = False
        self._promoting = asyncio.Lock()

    def build_engine(
        self, config: Config, fs: FileSystem, metrics: Metrics, *, startup_gc_grace: float
    ) -> Engine:
        own = OwnState()
        self.own = own
        self.committer = StandbyCommitter(own, primary_link(config, fs))
        committer = self.committer
        committer.startup_gc_grace = startup_gc_grace
        committer.gc_observer = metrics.observe_gc_run
        committer.snapshot_observer = metrics.observe_snapshot
        committer.batch_observer = lambda records, seconds: observe_journal_batch(
            metrics, records, seconds
        )
        engine = Engine(config, committer, own, fs=fs)
        if config.archive:
            log.warning("SERVICE_ARCHIVE is ignored on a standby: the primary ships the archive")
        return engine

    async def start(self, ctx: AppContext) -> None:
        engine, config = ctx.engine, ctx.config
        ctx.primary_url = config.follow
        ctx.promote = lambda: self.promote(ctx)
        self.follower = Follower(engine, self.committer, self.committer.primary, ctx.server_secret)
        self.follower.start()
        ctx.follower = self.follower
        ctx.metrics.add_collector(StandbyCollector(self.follower))
        ctx.scrub.repairer = RepairFromPrimary(engine, self.committer.primary)  # heals rot here
        await ctx.scrub.start()
        engine.add_background_job(ctx.scrub.tick_seconds, ctx.scrub.maybe_start)

    async def promote(self, ctx: AppContext) -> None:
        """Become the primary of the next epoch, in place (``service.replication.promotion``:
        stop following, the mark, the epoch record, then the primary's parts)."""
        async with self._promoting:
            if self.promoted:
                return
            engine = ctx.engine
            if self.follower is not None:
                await self.follower.stop()
            history = engine.state.epoch_history()
            log.warning(
                "promotion: this standby of %s stops following at record %d (epoch %d)",
                ctx.config.follow,
                self.committer.last_sequence(),
                history[-1].epoch,
            )
            mark = (engine.fs, ctx.config.data_dir, history[-1].epoch + 1, ctx.config.follow)
            await engine.run_blocking(write_mark, *mark)
            epoch = await begin_epoch(engine, self.committer, promotion=True)
            self.committer.promoted = True
            self.promoted = True
            ctx.follower = None
            ctx.primary_url = None
            ctx.promote = None
            await ctx.scrub.stop()
            self.feed = ReplicationFeed(engine, self.committer)
            await self.start_work(ctx, scrub_job=False)
            log.warning("promotion: this server is the primary of epoch %d", epoch)

    async def stop(self, ctx: AppContext) -> None:
        if self.promoted:
            await super().stop(ctx)
            return
        if self.follower is not None:
            await self.follower.stop()
        await ctx.scrub.stop()


class StandbyRole(SingleRole):
    """A standby in one process (``SERVICE_WORKERS=1``)."""

    name = "standby"

    def __init__(self) -> None:
        super().__init__()
        self.owner = StandbyOwner()

    def ready(self, ctx: AppContext) -> None:
        print(
            f"service: standby of {ctx.config.follow} serving reads on "
            f"http://{ctx.config.host}:{ctx.config.port}",
            flush=True,
        )


class StandbyWriterRole(WriterRole):
    """The process of a standby's several that owns its journal and follows the primary."""

    def __init__(self, seat: WriterSeat) -> None:
        super().__init__(seat)
        self.owner = StandbyOwner()


class StandbyWorkerRole(WorkerRole):
    """A standby's other processes: a worker that refuses writes itself."""

    async def start(self, ctx: AppContext, app: tornado.web.Application) -> list[H1Server]:
        ctx.primary_url = ctx.config.follow
        ctx.promoted = promoted_probe(ctx.engine.fs, ctx.config.data_dir)
        return await super().start(ctx, app)
