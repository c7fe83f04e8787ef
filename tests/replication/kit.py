"""The replication tests' kit: a primary and its standby as real server processes, a
populated primary, and a comparison of everything a client can read on either.

A standby is a ``ServerProcess`` started with ``SERVICE_FOLLOW`` naming the primary and the
primary's root key as ``SERVICE_FOLLOW_CREDENTIALS``; it copies the primary's users and keys,
so the same key reads both.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.http.videokit import run_job, share
from tests.serverproc import ServerProcess

Factory = Callable[..., ServerProcess]


def standby_env(primary: ServerProcess, **more: str) -> dict[str, str]:
    return {
        "SERVICE_FOLLOW": primary.url,
        "SERVICE_FOLLOW_CREDENTIALS": f"{primary.access_key}:{primary.secret_key}",
        **more,
    }


def start_standby(factory: Factory, primary: ServerProcess, **more: str) -> ServerProcess:
    return factory(**standby_env(primary, **more))


def status(client: httpx.Client) -> dict[str, Any]:
    answer = client.get("/replication")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def wait_caught_up(primary: httpx.Client, standby: httpx.Client, timeout: float = 90.0) -> int:
    """Wait until the standby applied every record the primary has now; that sequence."""
    target = status(primary)["last_sequence"]
    deadline = time.monotonic() + timeout
    while True:
        got = status(standby)
        if got["applied_sequence"] >= target:
            return int(got["applied_sequence"])
        assert time.monotonic() < deadline, (target, got)
        time.sleep(0.05)


def populate(client: httpx.Client, clip: bytes | None = None) -> dict[str, Any]:
    """A primary holding a bit of everything: plain and versioned objects, a delete marker,
    a multipart object, a user and a key, lifecycle rules, a webhook; with ``clip``, a
    packaged video and a share of it. What was made, for the checks."""
    made: dict[str, Any] = {}
    assert client.post("/buckets", json={"name": "photos"}).status_code == 201
    created = client.post("/buckets", json={"name": "docs", "versioning_enabled": True})
    assert created.status_code == 201, created.text
    for n in range(12):
        put = client.put(f"/buckets/photos/objects/p{n:02d}.bin", content=os.urandom(500 + 77 * n))
        assert put.status_code == 200, put.text
    assert client.delete("/buckets/photos/objects/p00.bin").status_code == 204
    for n in range(3):
        assert client.put("/buckets/docs/objects/report", content=f"v{n}".encode()).is_success
    assert client.delete("/buckets/docs/objects/report").status_code == 204  # a delete marker
    big = os.urandom(2 * 1024 * 1024 + 5)
    assert client.put("/buckets/photos/objects/big.bin", content=big).is_success
    made["multipart"] = multipart(client, "photos", "parts.bin")
    user = client.post("/users", json={"username": "carol", "password": "carol-password-1"})
    assert user.status_code == 201, user.text
    key = client.post("/access-keys", json={"user_id": user.json()["user_id"], "name": "k"})
    assert key.status_code == 201, key.text
    made["key"] = key.json()
    rules = {"rules": [{"id": "old", "prefix": "tmp/", "expire_after_days": 30}]}
    assert client.put("/buckets/photos/lifecycle", json=rules).status_code == 200
    hooks = {
        "webhooks": [
            {"id": "h1", "url": "http://127.0.0.1:9/hook", "secret": "s3cr3t-s3cr3t"},
        ]
    }
    put_hooks = client.put("/buckets/docs/notifications", json=hooks)
    assert put_hooks.status_code == 200, put_hooks.text
    if clip is not None:
        assert client.post("/buckets", json={"name": "media"}).status_code == 201
        assert client.put("/buckets/media/objects/clip.mp4", content=clip).is_success
        job = run_job(client, "media")
        made["share"] = share(client, job["job_id"])
    return made


def multipart(client: httpx.Client, bucket: str, key: str) -> bytes:
    session = client.post("/multipart/init", json={"bucket": bucket, "key": key})
    assert session.status_code == 201, session.text
    upload = session.json()["upload_id"]
    size = session.json()["recommended_part_size"]
    parts, whole = [], b""
    for number, body in ((1, os.urandom(size)), (2, os.urandom(1000))):
        put = client.put(f"/multipart/{upload}/part", params={"partNumber": number}, content=body)
        assert put.status_code == 200, put.text
        parts.append({"part_number": number, "etag": put.json()["etag"]})
        whole += body
    done = client.post(f"/multipart/{upload}/complete", json={"parts": parts})
    assert done.status_code == 200, done.text
    return whole


def everything(client: httpx.Client) -> dict[str, Any]:
    """What a client reads: buckets, listings, versions, users, keys, lifecycle rules,
    webhooks (less their delivery status), and the SHA-256 of every version's bytes."""
    out: dict[str, Any] = {}
    buckets = client.get("/buckets").json()["buckets"]
    out["buckets"] = buckets
    for bucket in buckets:
        name = bucket["name"]
        out[f"{name}/objects"] = client.get(f"/buckets/{name}/objects").json()
        versions = client.get(f"/buckets/{name}/versions").json()
        out[f"{name}/versions"] = versions
        for version in versions["versions"]:
            if version["is_delete_marker"]:
                continue
            params = {"version_id": version["version_id"]} if version["version_id"] else {}
            got = client.get(f"/buckets/{name}/objects/{version['key']}", params=params)
            assert got.status_code == 200, (name, version, got.text)
            out[f"{name}/{version['key']}@{version['version_id']}"] = hashlib.sha256(
                got.content
            ).hexdigest()
        out[f"{name}/lifecycle"] = client.get(f"/buckets/{name}/lifecycle").json()
        hooks = client.get(f"/buckets/{name}/notifications").json()
        for hook in hooks.get("webhooks", []):
            hook.pop("status", None)
        out[f"{name}/notifications"] = hooks
    out["users"] = client.get("/users").json()
    out["keys"] = [
        {name: value for name, value in key.items() if name != "last_used_at"}
        for key in client.get("/access-keys").json()["access_keys"]
    ]
    return out


class Writers:
    """``count`` threads PUTting small objects into ``bucket`` of ``server`` until stopped (or
    the server is gone); ``acknowledged`` maps each key answered 200 to its etag."""

    def __init__(self, server: ServerProcess, bucket: str, count: int, *, prefix: str, repeat: int):
        self.acknowledged: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server, self._bucket = server, bucket
        self._prefix, self._repeat = prefix, repeat
        self._threads = [threading.Thread(target=self._write, args=(n,)) for n in range(count)]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _write(self, number: int) -> None:
        with self._server.client() as client:
            n = 0
            while not self._stop.is_set():
                key = f"{self._prefix}{number}-{n}"
                try:
                    answer = client.put(
                        f"/buckets/{self._bucket}/objects/{key}",
                        content=key.encode() * self._repeat,
                    )
                except httpx.HTTPError:
                    return  # the server is gone
                if answer.status_code == 200:
                    with self._lock:
                        self.acknowledged[key] = answer.json()["etag"]
                n += 1
