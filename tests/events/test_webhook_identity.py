"""Webhooks belong to a bucket's identity, not its name: once a bucket is deleted and its
name created again (by another user), the old bucket's webhooks never deliver the new
bucket's events, and the new bucket's webhooks start with their own cursors and figures,
across a restart too."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from urllib.parse import quote

import httpx

from tests.events.receiver import Receiver
from tests.events.streamkit import Call, pipeline, start_servers
from tests.http.identitykit import Account, create_account
from tests.serverproc import ServerProcess

SECRET = "whsec-identity"
FAST = {"SERVICE_WEBHOOK_MAX_BACKOFF": "0.1"}


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key)}"


def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def configure(client: httpx.Client, bucket: str, url: str) -> None:
    response = client.put(f"/buckets/{bucket}/notifications", json=hook_body(url))
    assert response.status_code == 200, response.text


def status(client: httpx.Client, bucket: str) -> dict[str, object]:
    response = client.get(f"/buckets/{bucket}/notifications")
    assert response.status_code == 200, response.text
    (hook,) = response.json()["webhooks"]
    return dict(hook["status"])


def recreate(
    server: ServerProcess, first: Account, second: Account, bucket: str, *then: Call
) -> list[tuple[int, bytes]]:
    """``first`` deletes ``bucket``, ``second`` creates it again, then ``then``: all sent at
    once (``pipeline``), so nothing of the old bucket's upkeep runs in between by chance."""
    answers = pipeline(
        server,
        [
            Call("DELETE", f"/buckets/{bucket}?force=true", first.auth),
            Call("POST", "/buckets", second.auth, {"name": bucket}),
            *then,
        ],
    )
    assert [code for code, _ in answers[:2]] == [204, 201], answers
    return answers[2:]


def hook_body(url: str) -> dict[str, object]:
    return {"webhooks": [{"id": "main", "url": url, "secret": SECRET}]}


def test_the_old_buckets_webhook_never_gets_the_new_buckets_events(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = start_servers(server_factory(start=False, SERVICE_WORKERS="2", **FAST))
    with server.client() as admin:
        first, second = create_account(admin), create_account(admin)
    with Receiver() as old, Receiver() as new:
        with first.client(server) as client:
            assert client.post("/buckets", json={"name": "hooked"}).status_code == 201
            configure(client, "hooked", old.url)
            client.put(obj("hooked", "first-0"), content=b"x")
        wait_for(lambda: len(old.received()) >= 1)
        puts = [Call("PUT", obj("hooked", f"second-{n}"), second.auth, "x") for n in range(3)]
        answers = recreate(server, first, second, "hooked", *puts)
        assert [code for code, _ in answers] == [200, 200, 200]
        with second.client(server) as client:
            configure(client, "hooked", new.url)
            client.put(obj("hooked", "second-3"), content=b"x")
        wait_for(lambda: len(new.received()) >= 1)
        time.sleep(1.0)  # two reconciliations of the webhook workers: any stray would show
        got_old = [d.event["key"] for d in old.received()]
        got_new = [d.event["key"] for d in new.received()]
    assert got_old == ["first-0"]
    assert got_new == ["second-3"]


def test_a_recreated_buckets_webhook_starts_with_its_own_cursor_and_figures(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory(**FAST)
    with server.client() as admin:
        first, second = create_account(admin), create_account(admin)
    with Receiver(fail_first=10**6) as failing, Receiver() as working:
        with first.client(server) as client:
            assert client.post("/buckets", json={"name": "figures"}).status_code == 201
            configure(client, "figures", failing.url)
            for number in range(3):
                client.put(obj("figures", f"first-{number}"), content=b"x")
            wait_for(lambda: failing.attempts >= 2)
            before = status(client, "figures")
        assert before["failed_attempts"] and before["last_error"] == "HTTP 500"
        path = "/buckets/figures/notifications"
        answers = recreate(
            server,
            first,
            second,
            "figures",
            Call("PUT", path, second.auth, hook_body(working.url)),
            Call("GET", path, second.auth),
        )
        assert [code for code, _ in answers] == [200, 200], answers
        (hook,) = json.loads(answers[1][1])["webhooks"]
        fresh = hook["status"]
        with second.client(server) as client:
            assert (fresh["delivered"], fresh["failed_attempts"], fresh["pending"]) == (0, 0, 0)
            assert fresh["last_error"] is None and fresh["skipped"] == 0
            client.put(obj("figures", "second-0"), content=b"x")
            wait_for(lambda: len(working.received()) >= 1)
        server.stop()
        server.start()
        with second.client(server) as client:
            client.put(obj("figures", "second-1"), content=b"x")
            wait_for(lambda: len(working.received()) >= 2)
            time.sleep(0.5)
            after = status(client, "figures")
        keys = [d.event["key"] for d in working.received()]
    assert keys == ["second-0", "second-1"]
    assert after["delivered"] == 2 and after["failed_attempts"] == 0
    assert after["last_error"] is None
