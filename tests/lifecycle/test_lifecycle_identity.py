"""Lifecycle rules belong to a bucket's identity, not its name: a pass applying the rules of a
bucket that is deleted and created again (by another user) meanwhile never applies them to
the new bucket, and the new bucket starts without rules."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from urllib.parse import quote

import httpx

from tests.http.identitykit import create_account
from tests.http.test_batch import make_tar, post_batch
from tests.serverproc import ServerProcess

TINY = 0.00001
"""0.864 seconds, in days."""
PAUSE_SECONDS = 4.0
"""The pass sleeps this long after each page: the bucket is re-created during the first."""
PAGE = 200
"""Entries per page of the pass (``service.upkeep.lifecycle.PAGE``)."""


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key)}"


def test_a_pass_never_applies_a_deleted_buckets_rules_to_its_successor(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory(SERVICE_LIFECYCLE_PASS_PAUSE=str(PAUSE_SECONDS))
    with server.client() as admin:
        first, second = create_account(admin), create_account(admin)
    name = "lc-identity"
    with first.client(server) as client:
        assert client.post("/buckets", json={"name": name}).status_code == 201
        members = [(f"a-{number:03d}", b"x") for number in range(PAGE + 1)]
        assert post_batch(client, name, make_tar(members)).status_code == 200
        rules = {
            "rules": [
                {"id": "old-a", "prefix": "a-", "expire_after_days": TINY},
                {"id": "old-b", "prefix": "b-", "expire_after_days": TINY},
            ]
        }
        assert client.put(f"/buckets/{name}/lifecycle", json=rules).status_code == 200
    time.sleep(1.0)  # every a- object is past TINY
    answers: list[httpx.Response] = []

    def run() -> None:
        with server.client() as admin:
            answers.append(admin.post("/system/lifecycle/run", timeout=120))

    runner = threading.Thread(target=run)
    runner.start()
    with first.client(server) as client:
        deadline = time.monotonic() + 60
        while len(client.get(f"/buckets/{name}/objects").json()["objects"]) > 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)  # the first page is gone: the pass sleeps before the next
        assert client.delete(f"/buckets/{name}", params={"force": "true"}).status_code == 204
    with second.client(server) as client:
        assert client.post("/buckets", json={"name": name}).status_code == 201
        assert client.put(obj(name, "b-keep"), content=b"mine").status_code == 200
        assert client.get(f"/buckets/{name}/lifecycle").json() == {"rules": []}
    runner.join(120)
    assert answers and answers[0].status_code == 200, answers
    with second.client(server) as client:
        kept = client.get(obj(name, "b-keep"))
        assert kept.status_code == 200 and kept.content == b"mine"
        versions = client.get(f"/buckets/{name}/versions").json()["versions"]
    assert [(v["key"], v["is_delete_marker"]) for v in versions] == [("b-keep", False)]
