"""Starting and stopping the server process.

Before anything: the configuration, the listening socket, the data dir and its lock
(``service.startup``); a start that cannot work prints one line and exits non-zero having
written nothing. Then: replay the journal (engine), bootstrap on a fresh data dir, start the
video job runner (it reruns unfinished jobs), serve. SIGTERM or SIGINT: stop accepting, let
in-flight requests finish (bounded), kill the video workers (their jobs rerun at the next
start), stop the image render workers, write a final snapshot and close the journal.

With ``SERVICE_WORKERS`` > 1, ``main`` holds the port (``startup.hold_port``) and becomes the
supervisor of that many serving processes (``service.procs``); each opens its own listening
socket on the port (``SO_REUSEPORT``) and ``serve`` runs in each with its role: the writer
does all of the above and also listens for its workers' commits; a worker runs a
``WorkerEngine`` (the shared index, commits through the writer), forwards the writer-only
routes and runs no background work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

import tornado.ioloop
import tornado.web
from tornado.httputil import HTTPMessageDelegate
from tornado.netutil import bind_unix_socket

from fsseam.fs import FileSystem, RealFileSystem
from service import __version__
from service.app import direct_object_reads, make_app, route_names
from service.auth import CREDENTIALS_FILENAME, BootstrapError, load_or_create_server_secret
from service.common.timefmt import now_ms
from service.config import Config, ConfigError, load_config
from service.context import AppContext
from service.engine.core import Engine, install_crash_hook
from service.http.base import new_request_id, valid_request_id
from service.http.h1_connection import H1Server
from service.http.h1_exchange import H1Exchange
from service.http.protocol import header_deadline
from service.media.video_shares import reap_expired_shares
from service.meta import events
from service.multipart.operations import reap_expired_uploads
from service.observability import BucketUsage, Metrics, PerformanceRecorder, configure_logging
from service.ops.first_run import bootstrap_credentials, bootstrap_if_empty
from service.procs import shared_metrics
from service.procs.forward import WriterForwarder
from service.procs.fresh_state import FreshStateDelegate
from service.procs.notes import NotedPerformance
from service.procs.process_table import REFRESH_SECONDS, ProcessPerformance
from service.procs.supervisor import Role, forward_socket_path, supervise
from service.procs.worker_engine import WorkerEngine
from service.procs.writer_link import WriterLink
from service.procs.writer_service import (
    STALE_READERS_SECONDS,
    CommitService,
    clear_stale_readers,
)
from service.startup import (
    StartupError,
    bind_listener,
    claim_data_dir,
    hold_port,
    listen_like,
    reason,
)
from service.upkeep.metrics import UpkeepCollector

log = logging.getLogger("service")

JSON_BODY_LIMIT = 1024 * 1024
SHUTDOWN_GRACE_SECONDS = 30.0
STREAMS_GRACE_SECONDS = 5.0
"""How long a stop waits for the open event streams to end once told to."""
LOG_FLUSH_SECONDS = 0.1
"""Log lines are written in batches at most this long after they were logged."""
KEY_USAGE_FLUSH_SECONDS = 60.0
SHARE_REAP_SECONDS = 600.0


def observe_journal_batch(metrics: Metrics, records: int, seconds: float) -> None:
    """One group commit: its size and how long its write (and fsync) took."""
    metrics.observe_journal_batch(records)
    metrics.observe_journal_fsync(seconds)


def credentials_hint(config: Config, fs: FileSystem) -> str:
    """Where the operator finds the credentials (never the secret itself)."""
    path = os.path.join(config.data_dir, CREDENTIALS_FILENAME)
    if fs.exists(path):
        return f"see {path}"
    return "the SERVICE_ROOT_ACCESS_KEY / SERVICE_ROOT_SECRET_KEY you configured"


def bucket_usage_rows(engine: Engine) -> list[BucketUsage]:
    """Per-bucket usage for the metrics collector (read at scrape time, on the loop)."""
    state = engine.state
    rows = []
    for bucket in state.list_buckets():
        usage = state.bucket_usage(bucket.name)
        rows.append(BucketUsage(bucket.name, usage.object_count, usage.size_bytes))
    return rows


async def flush_key_usage(engine: Engine) -> None:
    """Persist access keys' last-use times in one record (not one write per request)."""
    pending = engine.key_usage.pending(engine.state)
    if pending and engine.read_only_reason is None:
        await engine.commit(events.access_keys_used(last_used=pending, at=now_ms()))


def make_http_server(
    app: Any,
    config: Config,
    ctx: AppContext,
    *,
    xheaders: bool = False,
    direct: Callable[[H1Exchange], HTTPMessageDelegate | None] | None = None,
) -> H1Server:
    """An HTTP server with the limits that keep hostile clients from holding memory, whose
    protocol-level refusals are the contract's (``service.http.h1_connection``). ``xheaders``:
    trust ``X-Real-Ip`` (only the writer's internal listener, ``service.procs.forward``)."""
    return H1Server(
        app,
        xheaders=xheaders,
        header_deadline=header_deadline(config.idle_timeout),
        idle_timeout=config.idle_timeout,
        body_timeout=config.body_timeout,
        max_header_size=config.max_header_bytes,
        max_body_size=JSON_BODY_LIMIT,
        observer=ctx.observe_refusal,
        new_request_id=new_request_id,
        valid_request_id=valid_request_id,
        direct=direct,
    )


async def serve(
    config: Config,
    sockets: list[socket.socket] | Callable[[], list[socket.socket]],
    fs: FileSystem,
    role: Role | None = None,
) -> None:
    """Run on the bound ``sockets`` until SIGTERM/SIGINT: the only process (``role`` None),
    or one of several (``service.procs``: the writer, or a worker committing through it).
    ``sockets`` may be a function that opens them, called once the process is ready to serve
    (a worker, whose siblings take the connections until then)."""
    install_crash_hook(config.crash_point)
    worker = role is not None and not role.writer
    link = WriterLink(role.socket_path) if role is not None and worker else None
    engine = Engine(config, fs=fs) if link is None else WorkerEngine(config, link, fs=fs)
    table = ProcessPerformance(role.metrics_dir) if role is not None and link is None else None
    performance = NotedPerformance(link) if link is not None else table or PerformanceRecorder()
    if role is not None and role.workers_running:
        engine.startup_gc_grace = config.gc_grace  # workers may be promoting payloads
    metrics = Metrics(
        bucket_usage=lambda: bucket_usage_rows(engine),
        routes=route_names(),
        version=__version__,
        multiprocess_dir=None if role is None else role.metrics_dir,
    )
    engine.gc_observer = metrics.observe_gc_run
    engine.snapshot_observer = metrics.observe_snapshot
    await engine.start()
    server_secret = await engine.run_blocking(
        load_or_create_server_secret, engine.fs, config.data_dir
    )
    ctx = AppContext(config, engine, metrics, performance, server_secret)
    commits: CommitService | None = None
    app = make_app(ctx)
    delegate: Any = app
    servers = [make_http_server(app, config, ctx, direct=direct_object_reads(ctx))]
    forwarder: WriterForwarder | None = None
    if not worker:
        await start_background_work(engine, ctx, metrics)
        if role is not None:
            commits = CommitService(engine, performance, role.socket_path)
            await commits.start()
            engine.add_background_job(STALE_READERS_SECONDS, lambda: clear_stale_readers(engine))
            if table is not None:
                engine.add_background_job(REFRESH_SECONDS, lambda: table.refresh(engine))
            internal = make_http_server(app, config, ctx, xheaders=True)
            await internal.add_sockets(
                [bind_unix_socket(forward_socket_path(role.socket_path), 0o600)]
            )
            servers.append(internal)
    elif role is not None and isinstance(engine, WorkerEngine):
        forwarder = WriterForwarder(forward_socket_path(role.socket_path))
        app.add_handlers(r".*", forwarder.routes(ctx))  # before every other route
        delegate = FreshStateDelegate(app, engine)
        direct = direct_object_reads(ctx, before=engine.begin_request)
        servers[0] = make_http_server(delegate, config, ctx, direct=direct)
    server = servers[0]
    await server.add_sockets(sockets() if callable(sockets) else sockets)
    watchdog = tornado.ioloop.PeriodicCallback(ctx.cut_stalled_uploads, 1000)
    watchdog.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT) if role is None else (signal.SIGTERM,):
        loop.add_signal_handler(signum, stop.set)
    if role is None:
        print(
            f"service listening on http://{config.host}:{config.port} "
            f"(data dir {config.data_dir}, durability {config.durability})",
            flush=True,
        )
    else:
        role.ready()
    await stop.wait()
    log.info("shutting down")
    for each in servers:
        each.stop()  # no new connections
    watchdog.stop()
    # Requests already begun run to their answer (an upload mid-body included); only then
    # are the idle keep-alive connections closed, which would otherwise cut them off.
    if not await ctx.wait_for_requests(SHUTDOWN_GRACE_SECONDS):
        log.warning("in-flight requests did not finish within %.0f s", SHUTDOWN_GRACE_SECONDS)
    if forwarder is not None:
        forwarder.close()  # ends the event streams passed through to the writer
    if not await ctx.streams.close(STREAMS_GRACE_SECONDS):
        log.warning("%d event streams did not end at the stop", len(ctx.streams))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(
            asyncio.gather(*(each.close_all_connections() for each in servers)), 5.0
        )
    if commits is not None:
        await commits.stop()
    if not worker:
        await ctx.video_jobs.stop()
        await ctx.webhooks.stop()
        await ctx.scrub.stop()
    ctx.images.close()
    await engine.stop()


async def start_background_work(engine: Engine, ctx: AppContext, metrics: Metrics) -> None:
    """What only the process owning the journal runs: bootstrap, reapers, video jobs,
    lifecycle, webhooks, scrub, and the journal's metrics."""
    config = engine.config
    await bootstrap_if_empty(engine, config)
    engine.add_background_job(KEY_USAGE_FLUSH_SECONDS, lambda: flush_key_usage(engine))
    reap_interval = max(0.5, min(60.0, config.multipart_ttl / 4))
    engine.add_background_job(reap_interval, lambda: reap_expired_uploads(engine))
    if engine.journal is not None:
        engine.journal.batch_observer = lambda records, seconds: observe_journal_batch(
            metrics, records, seconds
        )
    await ctx.video_jobs.start()
    engine.add_background_job(SHARE_REAP_SECONDS, lambda: reap_expired_shares(engine))
    engine.add_background_job(config.lifecycle_interval, ctx.lifecycle.run_pass)
    metrics.add_collector(UpkeepCollector(ctx.lifecycle, ctx.webhooks, engine.events, ctx.scrub))
    await ctx.webhooks.start()
    await ctx.scrub.start()
    engine.add_background_job(ctx.scrub.tick_seconds, ctx.scrub.maybe_start)


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
        if processes > 1:
            return supervise(config, sockets, processes, run_role)
        configure_logging(config.log_level, sys.stderr, flush_interval=LOG_FLUSH_SECONDS)
        asyncio.run(serve(config, sockets, fs))
    finally:
        lock.release()
    return 0


def run_role(config: Config, held: list[socket.socket], role: Role) -> None:
    """The body of a forked serving process (``service.procs.supervisor``): its own listening
    sockets beside its siblings' (``SO_REUSEPORT``, ``service.startup``), then serve.

    The first writer listens at once, so that connections queue while it replays the journal
    (no other process listens yet); a worker, or a writer started again while workers serve,
    listens only when it is ready, so the kernel keeps giving new connections to the others
    meanwhile."""
    shared_metrics.enable(role.metrics_dir)
    configure_logging(config.log_level, sys.stderr, flush_interval=LOG_FLUSH_SECONDS)

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

    alone = role.writer and not role.workers_running
    asyncio.run(serve(config, listen() if alone else listen, RealFileSystem(), role))
