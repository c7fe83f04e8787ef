"""A media fleet worker: ``python -m service.media.worker --queue redis://... --server URL``.

Also installed as ``service-media-worker``. It consumes packaging tasks from the Redis the
server sends them through (``SERVICE_MEDIA_QUEUE``) and runs each with ``fleet_task``, on
any machine that reaches both; several workers per machine are fine (give each its own
``--name``). It needs no credential of the server and no shared disk: each task carries a
token for that one job (``docs/media.md``, Running media workers).

``--concurrency N`` is how many jobs it runs at once (Celery's prefork pool: N pool
processes, each running one packager process at a time). Settings and why each is set:
``service.media.fleet_queue``. A bad option is one line on stderr and exit 2.

Thread-safety: a process entry point.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, NoReturn
from urllib.parse import urlsplit

from service.media.fleet_queue import QUEUE_NAME, TASK_NAME, make_celery, parse_queue_url
from service.media.fleet_queue import worker_host as this_host
from service.media.fleet_task import RequeueTask, WorkerSetup, run_attempt

PROG = "service-media-worker"
MAX_CONCURRENCY = 256

_setup: WorkerSetup | None = None
"""This worker's setup, set before the pool forks (its processes inherit it)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"{PROG}: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Run the server's video packaging jobs from a Redis queue "
        "(SERVICE_MEDIA_QUEUE); see docs/media.md, Running media workers.",
    )
    parser.add_argument("--queue", required=True, help="the server's Redis: redis://host:port/db")
    parser.add_argument("--server", required=True, help="the server's URL: http://host:port")
    parser.add_argument(
        "--concurrency", default="1", help="jobs run at once (default 1; one per core or two)"
    )
    parser.add_argument(
        "--name",
        default=None,
        help="this worker's id, unique in the fleet (default <host>-<pid>)",
    )
    parser.add_argument(
        "--scratch-dir", default=None, help="where jobs are packaged (default the temp dir)"
    )
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error")
    )
    return parser


def _refuse(parser: argparse.ArgumentParser, option: str, value: str, why: str) -> NoReturn:
    shown = value if len(value) <= 60 else value[:60] + "..."
    parser.error(f"invalid {option} {shown!r}: {why}")


def parse_setup(argv: list[str] | None) -> tuple[str, int, WorkerSetup, str]:
    """The queue URL, the concurrency, the setup and the log level, checked."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        queue = parse_queue_url(args.queue)
    except ValueError as exc:
        _refuse(parser, "--queue", args.queue, str(exc))
    server = args.server.rstrip("/")
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path:
        _refuse(parser, "--server", args.server, "an http:// or https:// URL of the server")
    text = args.concurrency
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_CONCURRENCY):
        _refuse(parser, "--concurrency", text, f"an integer 1..{MAX_CONCURRENCY}")
    host = this_host()
    name = args.name or f"{host}-{os.getpid()}"
    if not (0 < len(name) <= 200 and name.isprintable() and " " not in name):
        _refuse(parser, "--name", name, "1..200 printable characters without spaces")
    if args.scratch_dir is not None and not os.path.isdir(args.scratch_dir):
        _refuse(parser, "--scratch-dir", args.scratch_dir, "not an existing directory")
    setup = WorkerSetup(server, name, host, args.scratch_dir)
    return queue, int(text), setup, args.log_level


def package_task(task: Any, job_id: str, attempt: int, claim_token: str) -> str:
    """The Celery task: one attempt (``fleet_task.run_attempt``)."""
    from celery.exceptions import Reject

    assert _setup is not None, "the worker's setup is made before the pool starts"
    try:
        return run_attempt(_setup, job_id, attempt, claim_token)
    except RequeueTask as exc:
        logging.getLogger("service.media.worker").warning(
            "job %s: the server cannot be reached (%s); the task goes back to the queue",
            job_id,
            exc,
        )
        raise Reject(str(exc), requeue=True) from None


def main(argv: list[str] | None = None) -> int:
    global _setup
    queue, concurrency, setup, level = parse_setup(argv)
    _setup = setup
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = make_celery(queue, PROG)
    app.task(name=TASK_NAME, bind=True)(package_task)
    app.worker_main(
        [
            "worker",
            f"--concurrency={concurrency}",
            "--pool=prefork",
            f"--hostname=media@{setup.worker_id}",
            f"--queues={QUEUE_NAME}",
            f"--loglevel={level.upper()}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
