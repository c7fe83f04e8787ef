"""The media fleet tests' kit: a real ``redis-server``, real worker processes, and a view
of the queue and of a bucket's events.

``RedisServer`` runs Debian's ``redis-server`` on a free loopback port with no persistence
(a restart loses the queue, the worst case the server must survive); ``Worker`` runs
``python -m service.media.worker`` in a session of its own, so a SIGKILL or SIGSTOP takes
its pool and its packager along. Both are always killed by the fixtures in ``conftest``.
Nothing is mocked: the tests talk HTTP to a real server and the workers to both.

``take_task`` pops a task's message straight off the queue, so a test can be the worker
itself (claim, upload, complete with the task's token) at exactly the moments it chooses.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from service.media.fleet_queue import QUEUE_NAME
from tests.serverproc import REPO_ROOT, free_port

TEST_LEASE = "3"
"""SERVICE_MEDIA_LEASE in these tests: a lost worker is noticed within seconds."""


@dataclass
class RedisServer:
    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.workdir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + 10
        while self.command("PING") != "+PONG":
            assert self.process.poll() is None, "redis-server exited"
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def command(self, *words: str) -> str | None:
        """One command in Redis's inline protocol; the first reply line (None if down)."""
        import socket

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                sock.sendall((" ".join(words) + "\r\n").encode())
                reply = b""
                while not reply.endswith(b"\r\n"):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    reply += chunk
                return reply.decode().split("\r\n", 1)[0]
        except OSError:
            return None

    def pop_message(self) -> bytes | None:
        """The oldest message of the media queue, taken off it (kombu pushes left and pops
        right)."""
        import socket

        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(f"RPOP {QUEUE_NAME}\r\n".encode())
            data = b""
            while True:
                chunk = sock.recv(1 << 20)
                data += chunk
                head, _, rest = data.partition(b"\r\n")
                if head == b"$-1":
                    return None
                if head.startswith(b"$") and len(rest) >= int(head[1:]) + 2:
                    return rest[: int(head[1:])]
                if not chunk:
                    raise AssertionError(f"bad reply {data[:80]!r}")

    def queued(self) -> int:
        reply = self.command("LLEN", QUEUE_NAME)
        assert reply is not None and reply.startswith(":"), reply
        return int(reply[1:])

    def wait_queued(self, count: int, timeout: float = 20.0) -> None:
        """Until the queue holds ``count`` messages (the server sends them soon after)."""
        deadline = time.monotonic() + timeout
        while self.queued() != count:
            assert time.monotonic() < deadline, f"{self.queued()} tasks queued, not {count}"
            time.sleep(0.05)


def take_task(redis: RedisServer, timeout: float = 20.0) -> tuple[str, int, str]:
    """The next task on the queue, removed from it: (job_id, attempt, claim token)."""
    deadline = time.monotonic() + timeout
    while (raw := redis.pop_message()) is None:
        assert time.monotonic() < deadline, "no task was queued"
        time.sleep(0.05)
    message = json.loads(raw)
    args, _, _ = json.loads(base64.b64decode(message["body"]))
    return str(args[0]), int(args[1]), str(args[2])


@dataclass
class Worker:
    """``python -m service.media.worker`` in a session of its own."""

    name: str
    queue: str
    server: str
    logdir: Path
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def start(self, *, clean_env: bool = False) -> None:
        base = (
            {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.logdir)}
            if clean_env
            else dict(os.environ)
        )
        env = {**base, "PYTHONPATH": str(REPO_ROOT), **self.env}
        log = (self.logdir / f"worker-{self.name}.log").open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "service.media.worker",
                "--queue", self.queue, "--server", self.server, "--name", self.name,
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(self.logdir),
            start_new_session=True,
        )  # fmt: skip
        log.close()

    def signal(self, signum: int) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signum)

    def kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None

    def log(self) -> str:
        path = self.logdir / f"worker-{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


class LeaseKeeper:
    """Renews an attempt's lease (a heartbeat every ``BEAT_SECONDS``) while a test acts as
    its worker, as a worker's heartbeat thread does: with the tests' short lease, steps a
    loaded machine spreads over seconds would otherwise outlive it. ``token`` is the
    latest lease token (each heartbeat answers a new one; the old one expires with the
    lease it was issued for)."""

    BEAT_SECONDS = 0.3

    def __init__(self, server_api: str, job_id: str, token: str) -> None:
        self._url = f"{server_api}/videos/jobs/{job_id}/heartbeat"
        self.token = token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.wait(self.BEAT_SECONDS):
                headers = {"Authorization": f"Bearer {self.token}"}
                try:
                    answer = client.post(self._url, json={}, headers=headers)
                except httpx.TransportError:
                    continue  # tried again at the next beat, as a worker does
                if answer.status_code != 200:
                    return  # the attempt is over (completed, failed, lost)
                self.token = answer.json()["token"]


def wait_job(
    api: httpx.Client, job_id: str, statuses: tuple[str, ...], timeout: float = 90.0
) -> dict[str, Any]:
    """The job once its status is one of ``statuses`` (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = api.get(f"/videos/jobs/{job_id}").json()
        if job.get("status") in statuses:
            return job
        assert time.monotonic() < deadline, f"job still {job}"
        time.sleep(0.1)


def wait_for_file(path: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def open_sessions(api: httpx.Client, bucket: str) -> list[dict[str, Any]]:
    listed = api.get("/multipart", params={"bucket": bucket})
    assert listed.status_code == 200, listed.text
    return list(listed.json()["uploads"])


def versions(api: httpx.Client, bucket: str, prefix: str) -> list[dict[str, Any]]:
    listed = api.get(f"/buckets/{bucket}/versions", params={"prefix": prefix, "limit": 1000})
    assert listed.status_code == 200, listed.text
    return list(listed.json()["versions"])


def object_events_until(api: httpx.Client, bucket: str, last_key: str) -> list[dict[str, Any]]:
    """Every event of ``bucket`` from its start up to the creation of ``last_key``."""
    found: list[dict[str, Any]] = []
    with api.stream(
        "GET", f"/buckets/{bucket}/events", params={"since": "0"}, timeout=30.0
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                found.append(event)
                if event["key"] == last_key:
                    return found
    raise AssertionError("the stream ended early")
