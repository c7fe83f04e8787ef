"""Requests the HTTP layer itself refuses, and the header deadline, over raw sockets.

The server's own protocol-level refusals carry ``X-Request-Id`` and the contract's envelope
(``service.http.protocol``); headers must be finished soon after their first byte, while an
idle keep-alive connection may still wait the whole idle timeout.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.http.test_hardening_numbers_json import raw_exchange
from tests.serverproc import ServerProcess

IDLE_TIMEOUT = 4.0  # so the header deadline is 2 s (half of it)


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path_factory.mktemp("protocol") / "data",
        env_overrides={"SERVICE_IDLE_TIMEOUT": str(IDLE_TIMEOUT)},
    )
    server.start()
    yield server
    server.stop()


def assert_envelope(status: int, headers: dict[str, str], body: bytes, code: str) -> None:
    assert status == 400
    request_id = headers.get("x-request-id")
    assert request_id
    error = json.loads(body)["error"]
    assert error["code"] == code and error["request_id"] == request_id and error["message"]
    assert headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /health HTTP/9.9\r\n\r\n",
        b"GET /health HTTP/1.1\r\nNo colon in this line\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n",
    ],
)
def test_unparsable_requests_get_the_envelope(proc: ServerProcess, request_bytes: bytes) -> None:
    status, headers, body = raw_exchange(proc, request_bytes)
    assert_envelope(status, headers, body, "InvalidArgument")
    assert headers.get("connection", "").lower() == "close"


def test_refusal_echoes_a_valid_request_id(proc: ServerProcess) -> None:
    request = (
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine-123\r\n"
        b"Content-Length: abc\r\n\r\n"
    )
    status, headers, body = raw_exchange(proc, request)
    assert_envelope(status, headers, body, "InvalidArgument")
    assert headers["x-request-id"] == "mine-123"


def test_slow_headers_are_cut_at_the_deadline(proc: ServerProcess) -> None:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        closed_after = None
        for _ in range(40):  # one header byte every 0.2 s, never finishing
            try:
                sock.sendall(b"X")
            except OSError:
                closed_after = time.monotonic() - started
                break
            time.sleep(0.2)
            sock.setblocking(False)
            try:
                if sock.recv(1) == b"":
                    closed_after = time.monotonic() - started
                    break
            except BlockingIOError:
                pass
            finally:
                sock.setblocking(True)
    assert closed_after is not None, "a slowloris client kept its connection"
    assert closed_after < IDLE_TIMEOUT - 0.5, closed_after


def test_idle_connection_may_wait_longer_than_the_header_deadline(proc: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        time.sleep(IDLE_TIMEOUT / 2 + 0.8)  # past the header deadline, within the idle timeout
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200")


def test_pipelined_requests_still_work(proc: ServerProcess) -> None:
    request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        sock.sendall(b"\r\n" + request + request)
        data = b""
        deadline = time.monotonic() + 5
        while data.count(b"HTTP/1.1 200") < 2 and time.monotonic() < deadline:
            data += sock.recv(65536)
    assert data.count(b"HTTP/1.1 200") == 2
