"""The media fleet's transport: the Redis URL, the Celery settings, sending a task.

The queue carries only *which attempt of which job* to run and the claim token for it
(``service.auth.job_tokens``); the journal, not the queue, says whether a job still needs
that attempt. A task that arrives twice, late or for an attempt the server gave up on is
refused when its worker claims it, so the queue may lose or repeat messages freely: Redis is a
transport, never the record. The settings below follow from that; both sides use them (the
server to send, ``service.media.worker`` to consume):

- ``task_acks_late``: a message is acknowledged when its task returns, not when a worker
  takes it, so a worker host that dies mid-job leaves the message in Redis's unacked set and
  Redis hands it out again (after the visibility timeout) instead of forgetting it.
- ``task_reject_on_worker_lost``: with ``acks_late`` alone, a pool process killed mid-task
  (OOM killer, SIGKILL) has its message acknowledged anyway and the task is lost
  (celery#2840); with this the message is rejected and requeued at once.
- ``worker_prefetch_multiplier = 1``: a worker reserves no more tasks than it runs, so a busy
  worker never sits on queued jobs that an idle one could take.
- ``visibility_timeout`` (``VISIBILITY_TIMEOUT``): Redis redelivers any message unacknowledged
  for this long, even one whose task is still running fine (celery#5306, pretix#2058 ran a
  4-hour job four times). The server's lease (``SERVICE_MEDIA_LEASE``, at most
  ``MAX_LEASE_SECONDS``) is what decides that a job runs again; the timeout is set far above
  the longest lease so that Redis's redelivery is only a backstop, and a copy it does deliver
  is refused at its claim and acknowledged.
- ``worker_cancel_long_running_tasks_on_connection_loss = False``: a job keeps running while
  Redis is away; it reports to the server over HTTP, not through Redis.
- JSON only (never pickle): a message is data, not code.

Thread-safety: ``FleetQueue`` is used from one thread at a time (the runner's broker thread).
"""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

TASK_NAME = "service.media.package"
QUEUE_NAME = "service-media"
MAX_LEASE_SECONDS = 86400.0
"""The largest ``SERVICE_MEDIA_LEASE`` (``service.config``'s rule says the same)."""
VISIBILITY_TIMEOUT = 2 * MAX_LEASE_SECONDS
"""Seconds before Redis hands an unacknowledged message out again: above the longest lease."""
CONNECT_SECONDS = 3.0
"""How long the server waits for Redis when sending a task (it retries later on failure)."""


def parse_queue_url(text: str) -> str:
    """``text`` if it is a usable Redis URL, else ``ValueError`` saying why (one line).

    >>> parse_queue_url("redis://127.0.0.1:6379/0")
    'redis://127.0.0.1:6379/0'
    >>> parse_queue_url("amqp://host")
    Traceback (most recent call last):
    ...
    ValueError: the scheme must be redis:// or rediss://
    """
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError("not a URL with a valid port") from None
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError("the scheme must be redis:// or rediss://")
    if not parts.hostname:
        raise ValueError("a host is required")
    if port is not None and not 1 <= port <= 65535:
        raise ValueError("the port must be 1..65535")
    database = parts.path.strip("/")
    if database and not (database.isascii() and database.isdigit() and len(database) <= 5):
        raise ValueError("the path must be a database number (/0)")
    if parts.query or parts.fragment:
        raise ValueError("no query or fragment is allowed")
    return text


def celery_settings(queue_url: str) -> dict[str, Any]:
    """The Celery configuration both sides use (why each is set: the module docstring)."""
    return {
        "broker_url": queue_url,
        "broker_transport_options": {"visibility_timeout": VISIBILITY_TIMEOUT},
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": CONNECT_SECONDS,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "task_default_queue": QUEUE_NAME,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
    }


def make_celery(queue_url: str, name: str) -> Any:
    """A Celery application configured for the fleet (imported here, so the embedded mode
    never loads Celery)."""
    from celery import Celery

    app = Celery(name)
    app.conf.update(celery_settings(queue_url))
    return app


def task_args(job_id: str, attempt: int, claim_token: str) -> list[Any]:
    """The arguments of one task (``service.media.fleet_task.run_attempt`` takes them)."""
    return [job_id, attempt, claim_token]


class FleetQueue:
    """The server's end of the queue: send a task, tell whether Redis restarted."""

    def __init__(self, queue_url: str) -> None:
        self._url = queue_url
        self._app = make_celery(queue_url, "service-server")
        self._redis: Any = None

    def send(self, job_id: str, attempt: int, claim_token: str) -> None:
        """Queue one task (blocking; raises if Redis cannot take it now)."""
        self._app.send_task(
            TASK_NAME,
            args=task_args(job_id, attempt, claim_token),
            queue=QUEUE_NAME,
            retry=False,
        )

    def run_id(self) -> str:
        """Redis's ``run_id``: it changes when Redis restarts, and with it the queue may be
        gone (blocking; raises if Redis is unreachable)."""
        if self._redis is None:
            import redis

            self._redis = redis.Redis.from_url(
                self._url,
                socket_timeout=CONNECT_SECONDS,
                socket_connect_timeout=CONNECT_SECONDS,
            )
        info = self._redis.info("server")
        return str(info["run_id"])

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()
        self._app.close()


def worker_host() -> str:
    """This machine's name, as a worker reports it."""
    return socket.gethostname()
