"""The HTTP edge's test kit: raw exchanges that keep every header line, and slow clients.

The edge tests are black-box over HTTP, so they hold for any connection implementation under
the application: they read the bytes of an answer themselves where a client library would
merge repeated headers (two ``Server`` lines) or hide an interim ``100 Continue``.
"""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from tests.serverproc import ServerProcess


@dataclass(frozen=True)
class RawAnswer:
    """One answer as it came off the wire: status, every header line in order, body."""

    status: int
    header_lines: list[tuple[str, str]]
    body: bytes

    def all(self, name: str) -> list[str]:
        """Every value of header ``name`` (any case), in the order sent."""
        return [value for key, value in self.header_lines if key.lower() == name.lower()]

    def get(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if values else None

    def error(self) -> dict[str, str]:
        document = json.loads(self.body)
        assert isinstance(document, dict)
        return dict(document["error"])


def parse_head(head: bytes) -> tuple[int, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    return status, headers


class RawConnection:
    """A client socket that reads answers head by head (interim ``100`` answers included)."""

    def __init__(self, port: int, timeout: float = 15.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self.buffer += chunk
        return True

    def read_head(self, timeout: float | None = None) -> tuple[int, list[tuple[str, str]]] | None:
        """The next status line and headers; None when nothing came within ``timeout``."""
        previous = self.sock.gettimeout()
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            while b"\r\n\r\n" not in self.buffer:
                if not self._fill():
                    raise ConnectionError("closed before an answer")
        except TimeoutError:
            return None
        finally:
            self.sock.settimeout(previous)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        return parse_head(head)

    def read_answer(self, *, head_only: bool = False) -> RawAnswer:
        """The next final answer (interim 1xx answers skipped); the body by its length, or
        to the end of the connection when it has none."""
        while True:
            got = self.read_head()
            assert got is not None
            status, headers = got
            if status >= 200:
                break
        lengths = [value for name, value in headers if name.lower() == "content-length"]
        if head_only or status in (204, 304):
            return RawAnswer(status, headers, b"")
        if lengths:
            length = int(lengths[0])
            while len(self.buffer) < length:
                if not self._fill():
                    break
            body, self.buffer = self.buffer[:length], self.buffer[length:]
        else:
            try:
                while self._fill():
                    pass
            except TimeoutError:
                pass
            body, self.buffer = self.buffer, b""
        return RawAnswer(status, headers, body)

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def raw_request(port: int, data: bytes, *, head_only: bool = False) -> RawAnswer:
    """Send ``data`` on a new connection and read one answer."""
    with RawConnection(port) as conn:
        conn.send(data)
        return conn.read_answer(head_only=head_only)


def basic(auth: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()


def request_bytes(
    method: str,
    target: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    host: str | None = "x",
) -> bytes:
    """A request's bytes; ``host`` None leaves ``Host`` out."""
    lines = [f"{method} {target} HTTP/1.1"]
    if host is not None:
        lines.append(f"Host: {host}")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    given = {name.lower() for name in headers or {}}
    if (body or method in ("PUT", "POST", "PATCH")) and "content-length" not in given:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def held_upload(
    server: ServerProcess, auth: tuple[str, str], path: str, size: int = 1000
) -> RawConnection:
    """A PUT that asked ``Expect: 100-continue`` and was told to go on: it holds an upload
    slot (``wait_continue`` first) until ``finish_upload`` sends its body or it is closed."""
    conn = RawConnection(server.port)
    conn.send(
        request_bytes(
            "PUT",
            f"/api/v1{path}",
            {
                "Authorization": basic(auth),
                "Content-Length": str(size),
                "Expect": "100-continue",
            },
        )
    )
    return conn


def wait_continue(conn: RawConnection, timeout: float) -> bool:
    """Whether ``100 Continue`` (the server took the request in) came within ``timeout``."""
    got = conn.read_head(timeout=timeout)
    if got is None:
        return False
    assert got[0] == 100, got
    return True


def finish_upload(conn: RawConnection, size: int = 1000) -> RawAnswer:
    conn.send(b"u" * size)
    return conn.read_answer()


def wait_until(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def system_info(api: httpx.Client) -> dict[str, object]:
    info = api.get("/system/info")
    assert info.status_code == 200, info.text
    return dict(info.json())
