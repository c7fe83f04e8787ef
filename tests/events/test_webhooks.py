"""Webhooks over HTTP with a real local receiver: the configuration document, delivery in
sequence order after failures (exponential backoff, shortened by
``SERVICE_WEBHOOK_MAX_BACKOFF``), signatures, filters, status figures and metrics, and no
event lost across a SIGKILL of the server."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.events.receiver import Delivery, Receiver
from tests.serverproc import ServerProcess

SECRET = "whsec-test-secret"
FAST = {"SERVICE_WEBHOOK_MAX_BACKOFF": "0.1"}


@pytest.fixture(scope="module")
def wh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("webhooks") / "data", env_overrides=FAST)
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def api(wh_server: ServerProcess) -> Iterator[httpx.Client]:
    with wh_server.client() as client:
        yield client


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key)}"


def hook(url: str, **extra: object) -> dict[str, object]:
    return {"id": "main", "url": url, "secret": SECRET, **extra}


def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def unique_in_order(deliveries: list[Delivery]) -> list[Delivery]:
    seen: set[str] = set()
    out = []
    for delivery in deliveries:
        if delivery.event_id not in seen:
            seen.add(delivery.event_id)
            out.append(delivery)
    return out


def test_webhooks_are_stored_without_secrets_and_bad_ones_refused(
    api: httpx.Client, bucket_name: str
) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    url = f"/buckets/{bucket_name}/notifications"
    assert api.get(url).json() == {"webhooks": []}
    stored = api.put(url, json={"webhooks": [hook("http://127.0.0.1:9/x", prefix="a/")]})
    assert stored.status_code == 200, stored.text
    (only,) = stored.json()["webhooks"]
    assert "secret" not in only and SECRET not in stored.text
    assert (only["id"], only["url"], only["prefix"], only["events"]) == (
        "main",
        "http://127.0.0.1:9/x",
        "a/",
        [],
    )
    assert set(only["status"]) >= {
        "delivered",
        "pending",
        "failed_attempts",
        "last_error",
        "last_delivered_at",
    }
    bad_bodies: list[dict[str, object]] = [
        {"webhooks": [{"id": "x", "url": "ftp://h/", "secret": "s"}]},
        {"webhooks": [{"id": "x", "url": "not a url", "secret": "s"}]},
        {"webhooks": [{"id": "x", "url": "http://h/"}]},
        {"webhooks": [{"id": "x", "url": "http://h/", "secret": "s", "events": ["object.made"]}]},
        {"webhooks": [hook("http://h/"), hook("http://h/")]},
        {"webhooks": "none"},
    ]
    for body in bad_bodies:
        response = api.put(url, json=body)
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == "InvalidArgument"
    assert [w["url"] for w in api.get(url).json()["webhooks"]] == ["http://127.0.0.1:9/x"]
    assert api.delete(url).status_code == 204
    assert api.get(url).json() == {"webhooks": []}


def test_deliveries_are_retried_in_order_signed_and_counted(
    api: httpx.Client, bucket_name: str
) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    with Receiver(fail_first=3) as receiver:
        url = f"/buckets/{bucket_name}/notifications"
        assert api.put(url, json={"webhooks": [hook(receiver.url)]}).status_code == 200
        for number in range(5):
            api.put(obj(bucket_name, f"k{number}"), content=b"data")
        api.delete(obj(bucket_name, "k0"))
        wait_for(lambda: len(unique_in_order(receiver.received())) >= 6)
        got = unique_in_order(receiver.received())
    events = [delivery.event for delivery in got]
    assert [(e["type"], e["key"]) for e in events] == [
        *(("object.created", f"k{n}") for n in range(5)),
        ("object.deleted", "k0"),
    ]
    sequences = [e["sequence"] for e in events]
    assert sequences == sorted(sequences)
    assert all(d.signed_with(SECRET) and d.event_id == d.event["event_id"] for d in got)
    assert not got[0].signed_with("another secret")
    status = api.get(url).json()["webhooks"][0]["status"]
    assert status["delivered"] == 6 and status["pending"] == 0
    assert status["failed_attempts"] == 3
    assert status["last_error"] is None and status["last_delivered_at"]
    metrics = api.get("/metrics").text
    assert "service_webhook_deliveries_total" in metrics
    assert "service_webhook_failures_total" in metrics
    assert "service_webhook_pending" in metrics


def test_a_failing_receiver_shows_pending_and_its_error(
    api: httpx.Client, bucket_name: str
) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    with Receiver(fail_first=10**6) as receiver:
        url = f"/buckets/{bucket_name}/notifications"
        assert api.put(url, json={"webhooks": [hook(receiver.url)]}).status_code == 200
        for number in range(3):
            api.put(obj(bucket_name, f"k{number}"), content=b"data")

        def webhook_status() -> dict[str, Any]:
            return dict(api.get(url).json()["webhooks"][0]["status"])

        # The receiver counts an attempt as it arrives; the server records its failure once
        # the 500 came back, a moment later: wait for the server's own count.
        wait_for(lambda: receiver.attempts >= 3 and webhook_status()["failed_attempts"] >= 3)
        status = webhook_status()
    assert status["delivered"] == 0 and status["pending"] == 3
    assert status["failed_attempts"] >= 3 and status["last_error"] == "HTTP 500"
    api.delete(url)


def test_prefix_and_event_type_filters(api: httpx.Client, bucket_name: str) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    with Receiver() as receiver:
        url = f"/buckets/{bucket_name}/notifications"
        only_deletes = hook(receiver.url, prefix="img/", events=["object.deleted"])
        assert api.put(url, json={"webhooks": [only_deletes]}).status_code == 200
        for key in ("img/a", "doc/b"):
            api.put(obj(bucket_name, key), content=b"x")
        for key in ("doc/b", "img/a"):
            api.delete(obj(bucket_name, key))
        api.put(obj(bucket_name, "img/last"), content=b"x")
        api.delete(obj(bucket_name, "img/last"))
        wait_for(lambda: len(receiver.received()) >= 2)
        time.sleep(0.3)
        got = [(d.event["type"], d.event["key"]) for d in receiver.received()]
    assert got == [("object.deleted", "img/a"), ("object.deleted", "img/last")]


def test_no_event_is_lost_across_sigkills(server_factory: Callable[..., ServerProcess]) -> None:
    proc = server_factory(**FAST)
    acknowledged: list[str] = []
    rng = random.Random(17)
    with Receiver() as receiver:
        with proc.client() as api:
            assert api.post("/buckets", json={"name": "kills"}).status_code == 201
            body = {"webhooks": [hook(receiver.url)]}
            assert api.put("/buckets/kills/notifications", json=body).status_code == 200
        for cycle in range(3):
            with proc.client() as api:
                for number in range(rng.randint(5, 25)):
                    key = f"c{cycle}-{number}"
                    if api.put(obj("kills", key), content=b"v").status_code in (200, 201):
                        acknowledged.append(key)
            time.sleep(rng.uniform(0.0, 0.4))
            proc.kill()
            proc.start()
        wait_for(lambda: {d.event["key"] for d in receiver.received()} >= set(acknowledged))
        got = receiver.received()
    firsts = unique_in_order(got)
    sequences = [d.event["sequence"] for d in firsts]
    assert sequences == sorted(sequences), "delivered out of order"
    assert [d.event["key"] for d in firsts] == acknowledged
    for delivery in got:
        assert delivery.signed_with(SECRET)


def test_a_stop_waits_for_the_delivery_in_flight(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """A receiver that has the event and answers while the server stops is recorded as
    delivered: the restarted server does not send the event again."""
    proc = server_factory(**FAST)
    with Receiver(answer_delay=0.5) as receiver:
        with proc.client() as api:
            assert api.post("/buckets", json={"name": "inflight"}).status_code == 201
            body = {"webhooks": [hook(receiver.url)]}
            assert api.put("/buckets/inflight/notifications", json=body).status_code == 200
            assert api.put(obj("inflight", "one"), content=b"v").status_code == 200
        wait_for(lambda: len(receiver.received()) == 1)
        proc.stop()
        proc.start()
        with proc.client() as api:
            assert api.put(obj("inflight", "two"), content=b"v").status_code == 200
            wait_for(lambda: len(receiver.received()) >= 2)
            time.sleep(1.0)  # a repeat of "one" would have come first, before "two"
            status = api.get("/buckets/inflight/notifications").json()["webhooks"][0]["status"]
        keys = [d.event["key"] for d in receiver.received()]
    assert keys == ["one", "two"]
    assert status["delivered"] == 2
