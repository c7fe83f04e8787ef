"""Upload slots over HTTP: one user's slow uploads cannot take every slot, and an upload
slower than ``SERVICE_MIN_BODY_RATE`` is cut even when it is never quite silent.

A request over a cap waits ``SERVICE_QUEUE_WAIT`` (short here) before its refusal: 429 for
the user's own cap, 503 for the server's total (``test_edge_caps.py`` has the waiting)."""

from __future__ import annotations

import base64
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import httpx
import pytest

from tests.http.identitykit import Account, create_account
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess


def open_upload(server: ServerProcess, auth: tuple[str, str], path: str) -> socket.socket:
    """A PUT whose headers promise 1 MB and whose body has only begun (a slow client)."""
    token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(
        (
            f"PUT /api/v1{path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\n"
            "Content-Length: 1000000\r\n\r\n"
        ).encode()
        + b"x" * 100
    )
    return sock


def uploads_in_flight(api: httpx.Client) -> int:
    return int(api.get("/system/info").json()["uploads_in_flight"])


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


@pytest.fixture
def fair(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(
        SERVICE_MAX_CONCURRENT_UPLOADS="4",
        SERVICE_MAX_UPLOADS_PER_USER="2",
        SERVICE_QUEUE_WAIT="0.5",
    )


@pytest.fixture
def api_of(fair: ServerProcess) -> Iterator[httpx.Client]:
    with fair.client() as client:
        yield client


def test_one_users_slow_uploads_leave_slots_for_everyone_else(
    fair: ServerProcess, api_of: httpx.Client
) -> None:
    api = api_of
    hog: Account = create_account(api, prefix="hog")
    other: Account = create_account(api, prefix="other")
    for owner, name in ((hog, "hog-bucket"), (other, "other-bucket")):
        with owner.client(fair) as client:
            assert client.post("/buckets", json={"name": name}).status_code == 201
    with ExitStack() as stack:
        for number in range(2):
            sock = open_upload(fair, hog.auth, f"/buckets/hog-bucket/objects/slow-{number}")
            stack.callback(sock.close)
        wait_until(lambda: uploads_in_flight(api) == 2)
        with hog.client(fair) as as_hog:
            refused = as_hog.put("/buckets/hog-bucket/objects/third", content=b"abc")
            assert_error(refused, 429, "TooManyRequests")
            assert refused.headers["Retry-After"].isdigit()
            # The same user through a presigned URL counts against the same slots.
            url = as_hog.post(
                "/presign", json={"bucket": "hog-bucket", "key": "p", "method": "PUT"}
            ).json()["url"]
            assert_error(httpx.put(url, content=b"abc"), 429, "TooManyRequests")
        with other.client(fair) as as_other:
            put = as_other.put("/buckets/other-bucket/objects/fine", content=b"hello")
            assert put.status_code == 200, put.text
    # Once the slow uploads are gone their slots are free again.
    wait_until(lambda: uploads_in_flight(api) == 0)
    with hog.client(fair) as as_hog:
        assert as_hog.put("/buckets/hog-bucket/objects/later", content=b"x").status_code == 200


def test_the_total_cap_still_holds_across_users(fair: ServerProcess, api_of: httpx.Client) -> None:
    api = api_of
    accounts = [create_account(api, prefix=f"u{n}") for n in range(3)]
    with ExitStack() as stack:
        for number, account in enumerate(accounts[:2]):
            with account.client(fair) as client:
                assert client.post("/buckets", json={"name": f"cap-{number}"}).status_code == 201
            for slot in range(2):
                sock = open_upload(fair, account.auth, f"/buckets/cap-{number}/objects/{slot}")
                stack.callback(sock.close)
        wait_until(lambda: uploads_in_flight(api) == 4)
        busy = api.put("/buckets/cap-0/objects/admin-too", content=b"x")
        assert_error(busy, 503, "ServiceUnavailable")
        assert busy.headers["Retry-After"].isdigit()


def test_an_upload_below_the_minimum_rate_is_cut(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory(SERVICE_IDLE_TIMEOUT="2", SERVICE_MIN_BODY_RATE="10000")
    with server.client() as api:
        assert api.post("/buckets", json={"name": "drip"}).status_code == 201
        sock = open_upload(server, server.auth, "/buckets/drip/objects/slow")
        sock.settimeout(0.2)
        cut_after = None
        started = time.monotonic()
        # 10 bytes every 0.2 s: never silent for the 2 s idle timeout, far below 10 kB/s.
        while time.monotonic() - started < 12:
            try:
                sock.sendall(b"y" * 10)
                if sock.recv(1024) == b"":
                    cut_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except OSError:
                cut_after = time.monotonic() - started
                break
        sock.close()
        assert cut_after is not None, "a 50 B/s upload was never cut"
        assert cut_after < 8
        wait_until(lambda: uploads_in_flight(api) == 0)
        assert api.get("/buckets/drip/objects/slow").status_code == 404
        # A normal upload is untouched.
        assert api.put("/buckets/drip/objects/fast", content=b"z" * 100_000).status_code == 200
