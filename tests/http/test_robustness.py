"""Hostile and unlucky clients, restarts and cleanup: the server keeps nothing partial."""

from __future__ import annotations

import base64
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

ServerFactory = Callable[..., ServerProcess]


def raw_put_headers(proc: ServerProcess, path: str, length: int) -> bytes:
    import base64

    token = base64.b64encode(f"{proc.access_key}:{proc.secret_key}".encode()).decode()
    return (
        f"PUT /api/v1{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic {token}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def staging_files(proc: ServerProcess) -> list[str]:
    staging = proc.data_dir / "staging"
    return sorted(os.listdir(staging)) if staging.exists() else []


def payload_files(proc: ServerProcess) -> set[str]:
    found = set()
    for _root, _, files in os.walk(proc.data_dir / "payloads"):
        found.update(files)
    return found


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def test_disconnect_mid_body_leaves_nothing(server_factory: ServerFactory) -> None:
    proc = server_factory()
    with proc.client() as api:
        api.post("/buckets", json={"name": "cut"})
    with socket.create_connection(("127.0.0.1", proc.port)) as sock:
        sock.sendall(raw_put_headers(proc, "/buckets/cut/objects/partial", 10_000_000))
        sock.sendall(b"x" * 1_000_000)
        wait_until(lambda: len(staging_files(proc)) == 1)
    wait_until(lambda: staging_files(proc) == [])
    with proc.client() as api:
        assert_error(api.get("/buckets/cut/objects/partial"), 404, "NoSuchKey")
    assert payload_files(proc) == set()


def test_stalled_upload_is_cut_off_and_cleaned(server_factory: ServerFactory) -> None:
    proc = server_factory(SERVICE_IDLE_TIMEOUT="1")
    with proc.client() as api:
        api.post("/buckets", json={"name": "stall"})
    with socket.create_connection(("127.0.0.1", proc.port)) as sock:
        sock.sendall(raw_put_headers(proc, "/buckets/stall/objects/slow", 1000))
        sock.sendall(b"0123456789")
        sock.settimeout(10)
        started = time.monotonic()
        while sock.recv(65536):  # the server closes the connection
            pass
        assert time.monotonic() - started < 8
    wait_until(lambda: staging_files(proc) == [])
    with proc.client() as api:
        assert_error(api.get("/buckets/stall/objects/slow"), 404, "NoSuchKey")


def test_upload_cap_answers_503_with_retry_after_its_wait(server_factory: ServerFactory) -> None:
    proc = server_factory(SERVICE_MAX_CONCURRENT_UPLOADS="1", SERVICE_QUEUE_WAIT="0.5")
    with proc.client() as api:
        api.post("/buckets", json={"name": "cap"})
        with socket.create_connection(("127.0.0.1", proc.port)) as sock:
            sock.sendall(raw_put_headers(proc, "/buckets/cap/objects/first", 1_000_000))
            sock.sendall(b"x" * 10)
            wait_until(lambda: len(staging_files(proc)) == 1)
            refused = api.put("/buckets/cap/objects/second", content=b"hello")
            assert_error(refused, 503, "ServiceUnavailable")
            assert refused.headers["Retry-After"]
        wait_until(lambda: staging_files(proc) == [])
        assert api.put("/buckets/cap/objects/second", content=b"hello").status_code == 200


def test_oversized_headers_are_refused_without_harm(server_factory: ServerFactory) -> None:
    proc = server_factory(SERVICE_MAX_HEADER_BYTES="8192")
    with socket.create_connection(("127.0.0.1", proc.port)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        sock.settimeout(10)
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except ConnectionResetError:
            pass
        assert not reply.startswith(b"HTTP/1.1 200")
    assert httpx.get(proc.url + "/health").status_code == 200


def test_startup_removes_stale_staging_and_orphans(server_factory: ServerFactory) -> None:
    proc = server_factory(SERVICE_STAGING_TTL="60")
    with proc.client() as api:
        api.post("/buckets", json={"name": "gc-test"})
        api.put("/buckets/gc-test/objects/kept", content=b"kept")
    proc.stop()
    kept = payload_files(proc)
    assert len(kept) == 1
    orphan_dir = proc.data_dir / "payloads" / "ab" / "cd"
    orphan_dir.mkdir(parents=True, exist_ok=True)
    orphan = orphan_dir / ("abcd" + "0" * 28)
    orphan.write_bytes(b"orphan")
    stale, fresh = proc.data_dir / "staging" / "stale.part", proc.data_dir / "staging" / "new.part"
    stale.write_bytes(b"old")
    fresh.write_bytes(b"new")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    proc.start()
    # The orphans' sweep runs right after the start (a walk of every payload file).
    deadline = time.monotonic() + 10
    while orphan.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not orphan.exists()
    assert not stale.exists()
    assert fresh.exists()  # younger than SERVICE_STAGING_TTL
    assert payload_files(proc) == kept
    with proc.client() as api:
        assert api.get("/buckets/gc-test/objects/kept").content == b"kept"


def test_graceful_shutdown_keeps_everything(server_factory: ServerFactory) -> None:
    proc = server_factory()
    with proc.client() as api:
        api.post("/buckets", json={"name": "graceful"})
        for index in range(20):
            api.put(f"/buckets/graceful/objects/k{index}", content=f"v{index}".encode())
    assert proc.stop() == 0
    proc.start()
    with proc.client() as api:
        for index in range(20):
            assert api.get(f"/buckets/graceful/objects/k{index}").content == f"v{index}".encode()


def test_sigterm_lets_an_upload_in_flight_finish(server_factory: ServerFactory) -> None:
    proc = server_factory()
    body = os.urandom(64 * 1024)
    with proc.client() as api:
        api.post("/buckets", json={"name": "draining"})

        def slow_body() -> Iterator[bytes]:
            yield body[:1024]
            assert proc.process is not None
            proc.process.send_signal(signal.SIGTERM)  # the server stops mid-body
            time.sleep(0.5)
            yield body[1024:]

        stored = api.put("/buckets/draining/objects/late", content=slow_body())
        assert stored.status_code == 200, stored.text
    assert proc.process is not None and proc.process.wait(30) == 0
    proc.process = None
    proc.start()
    with proc.client() as api:
        assert api.get("/buckets/draining/objects/late").content == body


def test_crash_keeps_acknowledged_writes(server_factory: ServerFactory) -> None:
    proc = server_factory()
    with proc.client() as api:
        api.post("/buckets", json={"name": "crash"})
        for index in range(20):
            api.put(f"/buckets/crash/objects/k{index}", content=f"v{index}".encode())
        api.delete("/buckets/crash/objects/k3")
    proc.restart(crash=True)
    with proc.client() as api:
        for index in range(20):
            got = api.get(f"/buckets/crash/objects/k{index}")
            if index == 3:
                assert got.status_code == 404
            else:
                assert got.content == f"v{index}".encode()


def test_overwrite_during_read_still_streams_the_old_bytes(server_factory: ServerFactory) -> None:
    proc = server_factory()
    old = os.urandom(8 * 1024 * 1024)
    with proc.client() as api:
        api.post("/buckets", json={"name": "race"})
        api.put("/buckets/race/objects/k", content=old)
        with api.stream("GET", "/buckets/race/objects/k") as response:
            chunks = response.iter_bytes(65536)
            received = [next(chunks)]
            assert api.put("/buckets/race/objects/k", content=b"new").status_code == 200
            assert api.delete("/buckets/race/objects/k").status_code == 204
            received.extend(chunks)
        assert b"".join(received) == old


def test_data_dir_layout_never_uses_keys(server_factory: ServerFactory) -> None:
    proc = server_factory()
    with proc.client() as api:
        api.post("/buckets", json={"name": "names"})
        api.put("/buckets/names/objects/..%2F..%2Fescape", content=b"x")
        api.put("/buckets/names/objects/secret-name.txt", content=b"x")
    names = [str(path) for path in Path(proc.data_dir).rglob("*")]
    assert not any("escape" in name or "secret-name" in name for name in names)
    assert not (proc.data_dir.parent / "escape").exists()


def test_a_reader_that_hangs_up_mid_body_leaves_no_request_in_flight(
    server_factory: ServerFactory,
) -> None:
    proc = server_factory()
    body = os.urandom(24 * 1024 * 1024)  # far more than the socket buffers hold
    with proc.client() as api:
        api.post("/buckets", json={"name": "hangup"})
        assert api.put("/buckets/hangup/objects/big", content=body).status_code == 200
        credentials = base64.b64encode(f"{proc.access_key}:{proc.secret_key}".encode())
        head = (
            "GET /api/v1/buckets/hangup/objects/big HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Basic {credentials.decode()}\r\n\r\n"
        )
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", proc.port)) as sock:
                sock.sendall(head.encode())
                assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        # The server noticed each hang-up: others are served, and a graceful stop does
        # not wait for the abandoned downloads.
        assert api.get("/buckets/hangup/objects/big").content == body
    assert proc.stop() == 0
    assert "in-flight requests did not finish" not in proc.logs()


def test_a_405_on_a_streaming_route_keeps_the_connection_for_the_next_request(
    server_factory: ServerFactory,
) -> None:
    """Two requests in one write: the 405 must not close the connection before the second
    is answered (Tornado refuses unsupported methods before reading the body and then
    closes; the streaming handlers answer 405 only after it)."""
    proc = server_factory()
    with proc.client() as api:
        api.post("/buckets", json={"name": "pipelined"})
        api.put("/buckets/pipelined/objects/k", content=b"kept")
        upload_id = api.post("/multipart/init", json={"bucket": "pipelined", "key": "m"}).json()[
            "upload_id"
        ]
    credentials = base64.b64encode(f"{proc.access_key}:{proc.secret_key}".encode()).decode()
    for path in ("/api/v1/buckets/pipelined/objects/k", f"/api/v1/multipart/{upload_id}/part"):
        first = f"PATCH {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        second = (
            "GET /api/v1/buckets/pipelined/objects/k HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Basic {credentials}\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
            sock.sendall((first + second).encode())
            received = b""
            while received.count(b"HTTP/1.1 ") < 2 or not received.endswith(b"kept"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        assert received.startswith(b"HTTP/1.1 405"), received[:200]
        assert b"HTTP/1.1 200" in received and received.endswith(b"kept"), received[-300:]
