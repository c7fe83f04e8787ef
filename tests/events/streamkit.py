"""Event streams read in the background, for tests that act while a stream is open.

``Watch`` opens ``GET /buckets/{bucket}/events`` on a thread of its own and keeps every
message it reads (``event`` name, ``id`` and parsed ``data``) until the server ends the
stream or the test closes it, so a test can revoke a key, delete a bucket or write objects
and then wait for what the stream did. ``servers`` starts a server with one serving process
or with two (a writer and a worker, whose streams the worker forwards to the writer).
``pipeline`` sends several requests in one write, so the server handles them back to back.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.serverproc import ServerProcess

WAIT_SECONDS = 20.0
"""How long a test waits for something a stream must do (a liveness bound, not a speed
figure: the server does it within about a second)."""


@dataclass(frozen=True)
class Message:
    event: str
    id: int | None
    data: Any


@dataclass
class Watch:
    """One stream read on a background thread."""

    base_url: str
    bucket: str
    auth: tuple[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    status: int | None = None
    error_body: bytes = b""
    messages: list[Message] = field(default_factory=list)
    finished: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _thread: threading.Thread | None = None
    _client: httpx.Client | None = None

    def __enter__(self) -> Watch:
        self._client = httpx.Client(
            base_url=self.base_url,
            auth=self.auth,
            headers=dict(self.headers),
            timeout=httpx.Timeout(60.0, read=None),
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.wait(lambda: self.status is not None, "the stream's status")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        assert self._client is not None
        url = f"/buckets/{self.bucket}/events"
        try:
            with self._client.stream("GET", url, params=dict(self.params)) as response:
                with self._cond:
                    self.status = response.status_code
                    self._cond.notify_all()
                if response.status_code != 200:
                    self.error_body = response.read()
                    return
                event, ident, data = "message", None, None
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("id: "):
                        ident = int(line[4:])
                    elif line.startswith("data: "):
                        data = json.loads(line[6:])
                    elif not line and data is not None:
                        with self._cond:
                            self.messages.append(Message(event, ident, data))
                            self._cond.notify_all()
                        event, ident, data = "message", None, None
        except (httpx.HTTPError, RuntimeError):
            pass  # closed by the test
        finally:
            with self._cond:
                if self.status is None:
                    self.status = 0
                self.finished = True
                self._cond.notify_all()

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        with self._cond:
            while not condition():
                left = deadline - time.monotonic()
                assert left > 0, f"timed out waiting for {what}; got {self.messages}"
                self._cond.wait(left)

    def events(self) -> list[dict[str, Any]]:
        """The object events received so far (``data`` of the plain messages)."""
        with self._cond:
            return [m.data for m in self.messages if m.event == "message"]

    def wait_events(self, count: int) -> list[dict[str, Any]]:
        self.wait(lambda: len(self.events()) >= count, f"{count} events")
        return self.events()

    def wait_end(self) -> Message:
        """The stream's final ``end`` message; the stream must close right after it."""
        self.wait(lambda: self.finished, "the end of the stream")
        ends = [m for m in self.messages if m.event == "end"]
        assert ends, f"the stream closed without an end message: {self.messages}"
        assert self.messages[-1] is ends[-1] and len(ends) == 1, self.messages
        return ends[0]


def start_servers(proc: ServerProcess) -> ServerProcess:
    """Start ``proc``; with several serving processes, wait until all are forked."""
    proc.start()
    if proc.env_overrides.get("SERVICE_WORKERS", "1") != "1":
        deadline = time.monotonic() + 30
        while "serving processes" not in proc.logs():
            assert time.monotonic() < deadline, proc.logs()
            time.sleep(0.05)
    return proc


@dataclass(frozen=True)
class Call:
    """One request of a pipeline: method, path under /api/v1, credentials, JSON body."""

    method: str
    path: str
    auth: tuple[str, str]
    body: Any = None


def pipeline(server: ServerProcess, calls: list[Call]) -> list[tuple[int, bytes]]:
    """Send ``calls`` in one write on one connection (HTTP/1.1 pipelining) and read their
    answers: the server handles them back to back, with no client round trip in between,
    so what follows a change (a bucket deleted and created again) comes right after it."""
    wire = b""
    for call in calls:
        body = b"" if call.body is None else json.dumps(call.body).encode()
        token = base64.b64encode(":".join(call.auth).encode()).decode()
        wire += (
            f"{call.method} /api/v1{call.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Basic {token}\r\nContent-Length: {len(body)}\r\n"
            "Content-Type: application/json\r\n\r\n"
        ).encode() + body
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(wire)
        reader = sock.makefile("rb")
        answers = []
        for _ in calls:
            status = int(reader.readline().split()[1])
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            answers.append((status, reader.read(length)))
    return answers
