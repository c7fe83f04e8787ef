"""Starting and stopping a serving process, the same steps whatever its role.

Before anything: the configuration, the listening socket, the data dir and its lock
(``service.startup``); a start that cannot work prints one line and exits non-zero having
written nothing. Then ``serve`` runs with the process's role (``service.roles``): the role
builds the engine (its committer and state source) and the multipart uploads; the engine
starts (a journal owner replays its journal); the shared context and the application are
made; the role starts its background work and returns its HTTP servers, the first of which
takes the listening sockets. SIGTERM (and SIGINT for a single process): stop accepting, let
in-flight requests finish (bounded), let the role drain what passes through, end the event
streams, close the connections, stop the role's background work, stop the image render
workers and the engine (a journal owner writes a final snapshot and closes the journal).

With ``SERVICE_WORKERS`` > 1, ``main`` holds the port (``startup.hold_port``) and becomes the
supervisor of that many serving processes (``service.procs.supervisor``): the writer runs
``run_writer`` and each worker ``run_worker``, each opening its own listening socket on the
port (``SO_REUSEPORT``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
from collections.abc import Callable

import tornado.ioloop

from fsseam.fs import FileSystem, RealFileSystem
from service import __version__
from service.app import make_app, route_names
from service.audit.log import AuditLog
from service.audit.trail import AuditTrail
from service.auth import BootstrapError, load_or_create_server_secret
from service.common.timefmt import set_clock_offset
from service.config import Config, ConfigError, load_config
from service.context import AppContext
from service.engine.core import Engine, install_crash_hook
from service.observability import BucketUsage, Metrics, configure_logging
from service.ops.first_run import bootstrap_credentials
from service.procs import shared_metrics
from service.procs.supervisor import WorkerSeat, WriterSeat, supervise
from service.replication.promotion import resolve_role
from service.replication.reseed import move_aside
from service.roles.role import Role
from service.roles.single import SingleRole
from service.roles.standby import StandbyRole, StandbyWorkerRole, StandbyWriterRole
from service.roles.worker import WorkerRole
from service.roles.writer import WriterRole
from service.startup import (
    StartupError,
    bind_listener,
    claim_data_dir,
    hold_port,
    listen_like,
    reason,
)

log = logging.getLogger("service")

SHUTDOWN_GRACE_SECONDS = 30.0
STREAMS_GRACE_SECONDS = 5.0
"""How long a stop waits for the open event streams to end once told to."""
LOG_FLUSH_SECONDS = 0.1
"""Log lines are written in batches at most this long after they were logged."""
AUDIT_PRUNE_SECONDS = 3600.0
"""The longest pause between two passes of the audit log's retention."""


def bucket_usage_rows(engine: Engine) -> list[BucketUsage]:
    """Per-bucket usage for the metrics collector (read at scrape time, on the loop)."""
    state = engine.state
    rows = []
    for bucket in state.list_buckets():
        usage = state.bucket_usage(bucket.name)
        rows.append(BucketUsage(bucket.name, usage.object_count, usage.size_bytes))
    return rows


async def serve(
    config: Config, listen: Callable[[], list[socket.socket]], fs: FileSystem, role: Role
) -> None:
    """Serve as ``role`` on the sockets ``listen`` gives (called once the process is ready
    to serve) until one of the role's stop signals."""
    install_crash_hook(config.crash_point)
    set_clock_offset(config.clock_offset)  # test-only; 0 unless a test sets it
    engines: list[Engine] = []
    metrics = Metrics(
        bucket_usage=lambda: bucket_usage_rows(engines[0]),
        routes=route_names(),
        version=__version__,
        multiprocess_dir=role.metrics_dir,
    )
    engine = role.build_engine(config, fs, metrics)
    engines.append(engine)
    await engine.start()
    server_secret = await engine.run_blocking(
        load_or_create_server_secret, engine.fs, config.data_dir
    )
    uploads = role.build_uploads(engine)
    ctx = AppContext(config, engine, metrics, role.performance, server_secret, uploads)
    await start_audit(ctx, prunes=not isinstance(role, WorkerRole))
    app = make_app(ctx)
    servers = await role.start(ctx, app)
    await servers[0].add_sockets(listen())
    watchdog = tornado.ioloop.PeriodicCallback(ctx.cut_stalled_uploads, 1000)
    watchdog.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in role.stop_signals:
        loop.add_signal_handler(signum, stop.set)
    role.ready(ctx)
    await stop.wait()
    log.info("shutting down")
    for each in servers:
        each.stop()  # no new connections
    watchdog.stop()
    if ctx.replication_feed is not None:
        ctx.replication_feed.stop_waiting()  # a standby's long poll would hold the stop
    # Requests already begun run to their answer (an upload mid-body included); only then
    # are the idle keep-alive connections closed, which would otherwise cut them off.
    if not await ctx.wait_for_requests(SHUTDOWN_GRACE_SECONDS):
        log.warning("in-flight requests did not finish within %.0f s", SHUTDOWN_GRACE_SECONDS)
    await role.drain()
    if not await ctx.streams.close(STREAMS_GRACE_SECONDS):
        log.warning("%d event streams did not end at the stop", len(ctx.streams))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(
            asyncio.gather(*(each.close_all_connections() for each in servers)), 5.0
        )
    await role.stop(ctx)
    if ctx.audit_log is not None:
        await ctx.audit_log.close()  # every request is answered: its record written
    ctx.images.close()
    await engine.stop()


async def start_audit(ctx: AppContext, *, prunes: bool) -> None:
    """The audit log (``service.audit``): every serving process appends its own records to
    the one chain itself (``service.audit.shared``); one (``prunes``: the writer, or the
    only process) also applies retention now and then."""
    config, engine = ctx.config, ctx.engine
    if not config.audit:
        return
    ctx.audit_log = AuditLog(
        engine.fs,
        config.data_dir,
        secret=ctx.server_secret,
        strict=config.durability == "strict",
        retention_seconds=config.audit_retention_days * 86400,
        segment_bytes=config.audit_segment_bytes,
        readers=engine.executor,
    )
    await ctx.audit_log.open()
    if prunes:
        await ctx.audit_log.prune()
        interval = min(AUDIT_PRUNE_SECONDS, max(1.0, ctx.audit_log.retention_seconds / 8))
        engine.add_background_job(interval, ctx.audit_log.prune)
    ctx.audit = AuditTrail(
        ctx.audit_log,
        reads=config.audit_reads,
        state=lambda: engine.state,
        secret=ctx.server_secret,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m service``: 0 after a clean stop; 2 for a bad setting, 1 for a start that
    cannot work (each with one line on stderr)."""
    try:
        config = load_config(argv)
        bootstrap_credentials(config)
    except (ConfigError, BootstrapError) as exc:
        print(f"service: {exc}", file=sys.stderr)
        return 2
    fs = RealFileSystem()
    processes = config.workers or os.cpu_count() or 1
    try:
        sockets = hold_port(config) if processes > 1 else bind_listener(config)
        lock = claim_data_dir(fs, config.data_dir)
    except StartupError as exc:
        print(f"service: cannot start: {exc}", file=sys.stderr)
        return 1
    try:
        config = resolve_role(config, fs)  # a promoted data dir stays a primary
        if config.follow_reseed:
            moved = move_aside(fs, config.data_dir)
            print(f"service: reseed: {moved} entries of the data dir moved aside", flush=True)
        if processes > 1:
            return supervise(config, sockets, processes, run_writer, run_worker)
        configure_logging(config.log_level, sys.stderr, flush_interval=LOG_FLUSH_SECONDS)
        role = StandbyRole() if config.follow else SingleRole()
        asyncio.run(serve(config, lambda: sockets, fs, role))
    finally:
        lock.release()
    return 0


def run_writer(config: Config, held: list[socket.socket], seat: WriterSeat) -> None:
    """The body of the forked writer (``service.procs.supervisor``). The first writer listens
    at once, so that connections queue while it replays the journal (no other process
    listens yet); a writer started again while workers serve listens only when it is ready,
    so the kernel keeps giving new connections to the workers meanwhile."""
    _forked(config, seat.metrics_dir)
    config = resolve_role(config, RealFileSystem())  # promoted since the supervisor started
    listen = _listener(config, held)
    if not seat.workers_running:
        sockets = listen()
        listen = lambda: sockets  # noqa: E731
    role = StandbyWriterRole(seat) if config.follow else WriterRole(seat)
    asyncio.run(serve(config, listen, RealFileSystem(), role))


def run_worker(config: Config, held: list[socket.socket], seat: WorkerSeat) -> None:
    """The body of a forked worker: it listens once it is ready to serve (its siblings take
    the connections until then)."""
    _forked(config, seat.metrics_dir)
    config = resolve_role(config, RealFileSystem())
    role = StandbyWorkerRole(seat) if config.follow else WorkerRole(seat)
    asyncio.run(serve(config, _listener(config, held), RealFileSystem(), role))


def _forked(config: Config, metrics_dir: str) -> None:
    shared_metrics.enable(metrics_dir)
    configure_logging(config.log_level, sys.stderr, flush_interval=LOG_FLUSH_SECONDS)


def _listener(config: Config, held: list[socket.socket]) -> Callable[[], list[socket.socket]]:
    """Opens this process's own listening sockets beside its siblings' (``SO_REUSEPORT``,
    ``service.startup``) on the addresses the supervisor holds."""

    def listen() -> list[socket.socket]:
        try:
            sockets = listen_like(held)
        except OSError as exc:
            print(
                f"service: process {os.getpid()} cannot listen on {config.host}:{config.port}: "
                f"{reason(exc)}",
                file=sys.stderr,
            )
            raise SystemExit(1) from None
        for each in held:
            each.close()  # the supervisor's; it keeps its own copy
        return sockets

    return listen
