"""Replaying a backlog never stalls the process: many streams resuming from ``since=0`` take
turns, one bounded slice each, and a plain request sent while they replay is answered before
any of them has sent its whole backlog.

Asserted by order, not by time: the streams are read on raw sockets as fast as they come,
and the test notes which finished first, the plain request or any replay. With the backlog
in memory and in the event log's files (``SERVICE_EVENTS_RECENT``, test-only), with one
serving process and with two (a worker forwards streams to the writer; ``/health`` is the
writer's too).
"""

from __future__ import annotations

import base64
import io
import selectors
import socket
import tarfile
import threading
import time
from collections.abc import Callable

import pytest

from tests.events.streamkit import start_servers
from tests.serverproc import ServerProcess

BACKLOG = 3_000
"""Three event-log segments of 1,000 (from files); 12 slices of 256 for each stream."""
STREAMS = 40
READ_BYTES = 1 << 20


def tar_of(count: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for number in range(count):
            info = tarfile.TarInfo(f"k{number:05d}")
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
    return buffer.getvalue()


class Race:
    """Raw sockets read on one thread: which of them finished, in what order."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.order: list[str] = []
        self.lock = threading.Lock()
        self._tails: dict[socket.socket, tuple[str, bytes, bytes]] = {}

    def add(self, name: str, sock: socket.socket, done_marker: bytes) -> None:
        sock.setblocking(False)
        self._tails[sock] = (name, done_marker, b"")
        self.selector.register(sock, selectors.EVENT_READ)

    def run(self, wanted: int, deadline: float) -> None:
        while len(self.order) < wanted and time.monotonic() < deadline:
            for key, _ in self.selector.select(0.5):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                data = sock.recv(READ_BYTES)
                name, marker, tail = self._tails[sock]
                tail = tail[-len(marker) :] + data
                if marker in tail or not data:
                    with self.lock:
                        self.order.append(name)
                    self.selector.unregister(sock)
                    sock.close()
                    continue
                self._tails[sock] = (name, marker, tail)


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-processes"])
@pytest.mark.parametrize("recent", ["10000", "100"], ids=["from-memory", "from-files"])
def test_a_plain_request_is_answered_while_many_backlogs_replay(
    server_factory: Callable[..., ServerProcess], workers: str, recent: str
) -> None:
    server = server_factory(
        start=False,
        SERVICE_WORKERS=workers,
        SERVICE_DURABILITY="balanced",
        SERVICE_EVENTS_RECENT=recent,
        SERVICE_EVENTS_SEGMENT_EVENTS="1000",
    )
    start_servers(server)
    with server.client() as api:
        assert api.post("/buckets", json={"name": "backlog"}).status_code == 201
        stored = api.post(
            "/buckets/backlog/batch",
            content=tar_of(BACKLOG),
            headers={"Content-Type": "application/x-tar"},
            timeout=600,
        )
        assert stored.status_code == 200 and stored.json()["stored"] == BACKLOG
        last = api.get("/system/info").json()["journal"]["last_sequence"]
    credentials = base64.b64encode(f"{server.access_key}:{server.secret_key}".encode()).decode()
    stream_request = (
        "GET /api/v1/buckets/backlog/events?since=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Basic {credentials}\r\n\r\n"
    ).encode()
    race = Race()
    sockets = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(STREAMS)]
    plain = socket.create_connection(("127.0.0.1", server.port))
    for number, sock in enumerate(sockets):
        sock.sendall(stream_request)
        race.add(f"stream-{number}", sock, f"id: {last}\n".encode())
    plain.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    race.add("plain", plain, b"\r\n\r\n{")
    race.run(STREAMS + 1, time.monotonic() + 600)
    assert len(race.order) == STREAMS + 1, race.order
    assert race.order[0] == "plain", race.order
