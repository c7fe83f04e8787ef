"""Per-user caps that wait (API.md, Conventions; docs/security.md "Per-user caps that wait").

A request over a per-user cap (uploads in flight, open event streams) waits for a free slot
up to ``SERVICE_QUEUE_WAIT``, then is 429 TooManyRequests with ``Retry-After`` and the error
body. While it waits its body is not read (no ``100 Continue`` either), a client that goes
away frees its place, and a freed slot goes to the user holding the fewest slots, so a burst
of one user cannot starve the others. The same suite runs against two serving processes in
``tests/procs/test_edge_processes.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import httpx
import pytest

from tests.http.edgekit import (
    RawConnection,
    basic,
    finish_upload,
    held_upload,
    request_bytes,
    system_info,
    wait_continue,
    wait_until,
)
from tests.http.identitykit import Account, create_account
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

BURST = 64
BODY = b"b" * 4096


async def burst_of_puts(server: ServerProcess, bucket: str, count: int) -> list[int]:
    """``count`` concurrent 4 KiB PUTs by one key, each on its own connection."""
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(
        base_url=server.api, auth=server.auth, limits=limits, timeout=120.0
    ) as client:

        async def one(number: int) -> int:
            answer = await client.put(f"/buckets/{bucket}/objects/burst-{number}", content=BODY)
            return answer.status_code

        return list(await asyncio.gather(*(one(number) for number in range(count))))


def run_burst(server: ServerProcess, bucket: str) -> None:
    with server.client() as api:
        assert api.post("/buckets", json={"name": bucket}).status_code == 201
        statuses = asyncio.run(burst_of_puts(server, bucket, BURST))
        assert statuses == [200] * BURST, Counter(statuses)
        listed = api.get(f"/buckets/{bucket}/objects").json()["objects"]
        assert len(listed) == BURST and {item["size_bytes"] for item in listed} == {len(BODY)}


def test_64_concurrent_puts_by_one_key_all_succeed(server: ServerProcess) -> None:
    """Default settings: 16 uploads per user at once, the other 48 wait their turn."""
    run_burst(server, "burst-of-64")


# -- a cap that stays full ----------------------------------------------------------------


@pytest.fixture
def tight(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(SERVICE_MAX_UPLOADS_PER_USER="1", SERVICE_QUEUE_WAIT="1")


def test_a_cap_full_past_its_wait_is_429_with_retry_after(tight: ServerProcess) -> None:
    with tight.client() as api:
        assert api.post("/buckets", json={"name": "tight"}).status_code == 201
        holder = held_upload(tight, tight.auth, "/buckets/tight/objects/held")
        with holder:
            assert wait_continue(holder, 10)
            started = time.monotonic()
            refused = api.put("/buckets/tight/objects/late", content=b"late")
            waited = time.monotonic() - started
            assert_error(refused, 429, "TooManyRequests")
            assert waited >= 0.9, waited
            assert refused.headers["Retry-After"].isdigit()
            assert int(refused.headers["Retry-After"]) >= 1
            # A presigned PUT of the same user waits for the same slot.
            url = api.post(
                "/presign", json={"bucket": "tight", "key": "p", "method": "PUT"}
            ).json()["url"]
            assert_error(httpx.put(url, content=b"p"), 429, "TooManyRequests")
            head = finish_upload(holder)
            assert head.status == 200
        assert api.get("/buckets/tight/objects/late").status_code == 404
        assert api.put("/buckets/tight/objects/late", content=b"late").status_code == 200


def test_a_waiting_upload_goes_on_when_a_slot_frees(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory(SERVICE_MAX_UPLOADS_PER_USER="1", SERVICE_QUEUE_WAIT="30")
    with server.client() as api:
        assert api.post("/buckets", json={"name": "queued"}).status_code == 201
        holder = held_upload(server, server.auth, "/buckets/queued/objects/held")
        with holder:
            assert wait_continue(holder, 10)
            result: list[httpx.Response] = []
            waiter = threading.Thread(
                target=lambda: result.append(
                    api.put("/buckets/queued/objects/waited", content=b"waited")
                )
            )
            waiter.start()
            wait_until(lambda: system_info(api)["uploads_waiting"] == 1)
            assert finish_upload(holder).status == 200
            waiter.join(30)
        assert result and result[0].status_code == 200, result
        assert api.get("/buckets/queued/objects/waited").content == b"waited"


def test_a_waiting_body_is_not_read_until_its_turn(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """The interim ``100 Continue`` comes only once the upload has its slot."""
    server = server_factory(SERVICE_MAX_UPLOADS_PER_USER="1", SERVICE_QUEUE_WAIT="30")
    with server.client() as api:
        assert api.post("/buckets", json={"name": "unread"}).status_code == 201
        with ExitStack() as stack:
            first = stack.enter_context(
                held_upload(server, server.auth, "/buckets/unread/objects/a")
            )
            assert wait_continue(first, 10)
            second = stack.enter_context(
                held_upload(server, server.auth, "/buckets/unread/objects/b")
            )
            assert not wait_continue(second, 1.0)
            assert finish_upload(first).status == 200
            assert wait_continue(second, 10)
            assert finish_upload(second).status == 200


def test_a_waiting_client_that_leaves_frees_its_place(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory(SERVICE_MAX_UPLOADS_PER_USER="1", SERVICE_QUEUE_WAIT="60")
    with server.client() as api:
        assert api.post("/buckets", json={"name": "leaving"}).status_code == 201
        holder = held_upload(server, server.auth, "/buckets/leaving/objects/held")
        with holder:
            assert wait_continue(holder, 10)
            # One waiter sent its whole body along (no Expect), one did not.
            eager = RawConnection(server.port)
            eager.send(
                request_bytes(
                    "PUT",
                    "/api/v1/buckets/leaving/objects/eager",
                    {"Authorization": basic(server.auth)},
                    b"e" * 4096,
                )
            )
            shy = held_upload(server, server.auth, "/buckets/leaving/objects/shy")
            wait_until(lambda: system_info(api)["uploads_waiting"] == 2)
            eager.close()
            shy.close()
            wait_until(lambda: system_info(api)["uploads_waiting"] == 0, timeout=10)
            assert finish_upload(holder).status == 200
        wait_until(lambda: system_info(api)["uploads_in_flight"] == 0)
        for key in ("eager", "shy"):
            assert api.get(f"/buckets/leaving/objects/{key}").status_code == 404


# -- fairness -----------------------------------------------------------------------------


@pytest.fixture
def shared(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(
        SERVICE_MAX_CONCURRENT_UPLOADS="2",
        SERVICE_MAX_UPLOADS_PER_USER="2",
        SERVICE_QUEUE_WAIT="60",
    )


def test_a_freed_slot_goes_to_the_user_holding_fewer(shared: ServerProcess) -> None:
    """The hog holds both slots and queued three more before the other user queued one:
    the first slot freed goes to the other user, not to the hog's next request."""
    with shared.client() as api:
        hog: Account = create_account(api, prefix="hog")
        other: Account = create_account(api, prefix="other")
        for owner, name in ((hog, "hog-fair"), (other, "other-fair")):
            with owner.client(shared) as client:
                assert client.post("/buckets", json={"name": name}).status_code == 201
        with ExitStack() as stack:
            held = []
            for number in range(2):
                conn = held_upload(shared, hog.auth, f"/buckets/hog-fair/objects/held-{number}")
                stack.enter_context(conn)
                assert wait_continue(conn, 10)
                held.append(conn)
            queued = []
            for number in range(3):
                conn = held_upload(shared, hog.auth, f"/buckets/hog-fair/objects/queued-{number}")
                stack.enter_context(conn)
                queued.append(conn)
            wait_until(lambda: system_info(api)["uploads_waiting"] == 3)
            patient = held_upload(shared, other.auth, "/buckets/other-fair/objects/patient")
            stack.enter_context(patient)
            wait_until(lambda: system_info(api)["uploads_waiting"] == 4)
            assert finish_upload(held[0]).status == 200
            assert wait_continue(patient, 10), "the other user's upload was not served first"
            assert not any(wait_continue(conn, 0.3) for conn in queued)
            assert finish_upload(patient).status == 200
            # Then the hog's queue moves again, one slot at a time.
            assert wait_continue(queued[0], 10)


# -- event streams ------------------------------------------------------------------------

STREAMS = 16


def open_stream(server: ServerProcess, auth: tuple[str, str], bucket: str) -> RawConnection:
    conn = RawConnection(server.port, timeout=30)
    conn.send(
        request_bytes("GET", f"/api/v1/buckets/{bucket}/events", {"Authorization": basic(auth)})
    )
    return conn


def stream_status(conn: RawConnection, timeout: float = 30.0) -> int:
    got = conn.read_head(timeout=timeout)
    assert got is not None, "no answer"
    return got[0]


@pytest.fixture
def streams(server_factory: Callable[..., ServerProcess]) -> Iterator[ServerProcess]:
    yield server_factory(SERVICE_QUEUE_WAIT="1")


def test_the_17th_stream_of_a_user_waits_then_is_429(streams: ServerProcess) -> None:
    with streams.client() as api, ExitStack() as stack:
        assert api.post("/buckets", json={"name": "watched"}).status_code == 201
        second_key = api.post("/access-keys", json={"name": "second"}).json()
        keys = [streams.auth, (second_key["access_key_id"], second_key["secret_key"])]
        for number in range(STREAMS):
            conn = stack.enter_context(open_stream(streams, keys[number % 2], "watched"))
            assert stream_status(conn) == 200
        started = time.monotonic()
        refused = api.get("/buckets/watched/events")
        assert time.monotonic() - started >= 0.9
        assert_error(refused, 429, "TooManyRequests")
        assert refused.headers["Retry-After"].isdigit()
        # Another user is not held up by this one's streams.
        other = create_account(api, prefix="watcher")
        with other.client(streams) as client:
            assert client.post("/buckets", json={"name": "watched-too"}).status_code == 201
        theirs = stack.enter_context(open_stream(streams, other.auth, "watched-too"))
        assert stream_status(theirs, timeout=5) == 200


def test_a_waiting_stream_opens_when_another_ends(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory(SERVICE_QUEUE_WAIT="30", SERVICE_MAX_STREAMS_PER_USER="2")
    with server.client() as api, ExitStack() as stack:
        assert api.post("/buckets", json={"name": "watched"}).status_code == 201
        first = open_stream(server, server.auth, "watched")
        assert stream_status(first) == 200
        # The second must hold its slot before the third asks: with several processes the two
        # requests reach the writer in either order.
        assert (
            stream_status(stack.enter_context(open_stream(server, server.auth, "watched"))) == 200
        )
        waiting = stack.enter_context(open_stream(server, server.auth, "watched"))
        assert waiting.read_head(timeout=1.0) is None
        first.close()
        assert stream_status(waiting) == 200
        assert api.put("/buckets/watched/objects/k", content=b"x").status_code == 200
        deadline = time.monotonic() + 10
        while b"object.created" not in waiting.buffer and time.monotonic() < deadline:
            waiting._fill()
        assert b"object.created" in waiting.buffer
