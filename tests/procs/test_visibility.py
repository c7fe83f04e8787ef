"""Read-your-writes across serving processes, and caches that follow other processes' writes.

One two-process server (a writer and a worker). Every write goes through one keep-alive
connection; every read that checks it comes on a new connection, which either process may
accept. A write acknowledged by one process must be what the next request sees on every
process: objects, overwrites, deletes, buckets, users and keys.
"""

from __future__ import annotations

import hashlib
import io
import itertools

import httpx
from PIL import Image

from tests.procs.prockit import answering_process, fresh_get
from tests.serverproc import ServerProcess

_names = itertools.count()
ROUNDS = 30
READS = 4


def new_bucket(api: httpx.Client) -> str:
    name = f"procs-{next(_names)}"
    assert api.post("/buckets", json={"name": name}).status_code == 201
    return name


def test_a_put_is_seen_by_the_next_request_on_every_process(server: ServerProcess) -> None:
    writers, readers, crossed = set(), set(), 0
    with server.client() as api:
        bucket = new_bucket(api)
        for round_number in range(ROUNDS):
            body = f"version {round_number}".encode()
            put = api.put(f"/buckets/{bucket}/objects/doc.txt", content=body)
            assert put.status_code == 200, put.text
            writers.add(answering_process(put))
            for _ in range(READS):
                got = fresh_get(server, f"/buckets/{bucket}/objects/doc.txt")
                assert got.status_code == 200 and got.content == body
                readers.add(answering_process(got))
                crossed += answering_process(got) != answering_process(put)
    assert len(writers | readers) == 2, "both processes should have answered"
    assert crossed > 0, "no read came to the other process than the write"


def test_overwrites_and_deletes_reach_every_process_cache(server: ServerProcess) -> None:
    """Small bodies are cached in memory by payload id in each process: another process's
    overwrite or delete must never be answered from a stale entry."""
    path_of = "/buckets/{}/objects/hot.bin"
    with server.client() as api:
        bucket = new_bucket(api)
        path = path_of.format(bucket)
        for round_number in range(10):
            body = bytes([round_number]) * 1000
            assert api.put(path, content=body).status_code == 200
            for _ in range(READS):  # warm both processes' caches with this body
                got = fresh_get(server, path)
                assert got.content == body
                assert got.headers["ETag"].strip('"') == hashlib.sha256(body).hexdigest()
        assert api.delete(path).status_code == 204
        for _ in range(2 * READS):
            assert fresh_get(server, path).status_code == 404
        listing = fresh_get(server, f"/buckets/{bucket}/objects")
        assert listing.json()["objects"] == []


def test_buckets_users_and_keys_are_seen_everywhere_at_once(server: ServerProcess) -> None:
    with server.client() as api:
        for _ in range(5):
            bucket = new_bucket(api)
            for _ in range(READS):
                got = fresh_get(server, f"/buckets/{bucket}")
                assert got.status_code == 200 and got.json()["name"] == bucket
        username = f"procs-user-{next(_names)}"
        user = api.post("/users", json={"username": username, "password": "long-enough-pw"})
        assert user.status_code == 201, user.text
        for _ in range(READS):
            assert fresh_get(server, f"/users/{user.json()['user_id']}").status_code == 200
        key = api.post("/access-keys", json={"user_id": user.json()["user_id"]})
        assert key.status_code == 201
        credentials = (key.json()["access_key_id"], key.json()["secret_key"])
        for _ in range(2 * READS):
            with httpx.Client(base_url=server.api, auth=credentials) as client:
                assert client.get("/buckets").status_code == 200
        revoked = api.patch(f"/access-keys/{credentials[0]}", json={"status": "revoked"})
        assert revoked.status_code == 200
        for _ in range(2 * READS):
            with httpx.Client(base_url=server.api, auth=credentials) as client:
                assert client.get("/buckets").status_code == 401


def test_usage_and_listings_follow_writes_from_any_process(server: ServerProcess) -> None:
    with server.client() as api:
        bucket = new_bucket(api)
        for number in range(12):
            with httpx.Client(base_url=server.api, auth=server.auth) as one_off:
                put = one_off.put(f"/buckets/{bucket}/objects/k{number}", content=b"x" * 10)
                assert put.status_code == 200
            info = fresh_get(server, f"/buckets/{bucket}").json()
            assert info["usage"] == {"object_count": number + 1, "size_bytes": 10 * (number + 1)}
            listing = fresh_get(server, f"/buckets/{bucket}/objects").json()
            assert len(listing["objects"]) == number + 1


def png(color: tuple[int, int, int]) -> bytes:
    sink = io.BytesIO()
    Image.new("RGB", (32, 16), color).save(sink, format="PNG")
    return sink.getvalue()


def test_image_variants_follow_an_overwrite_on_every_process(server: ServerProcess) -> None:
    """Variants are cached per process (on disk, shared); an overwrite on one process must
    never be answered with the old source's variant by another."""
    with server.client() as api:
        bucket = new_bucket(api)
        for color in ((255, 0, 0), (0, 0, 255), (0, 255, 0)):
            put = api.put(
                f"/buckets/{bucket}/objects/pic.png",
                content=png(color),
                headers={"Content-Type": "image/png"},
            )
            assert put.status_code == 200
            for _ in range(READS):  # each process renders or finds the variant
                got = fresh_get(server, f"/buckets/{bucket}/images/pic.png?w=8&format=png")
                assert got.status_code == 200, got.text
                pixel = Image.open(io.BytesIO(got.content)).convert("RGB").getpixel((4, 2))
                assert pixel == color
