"""The lean request paths over HTTP: small PUTs in one hop, reads from open descriptors.

One strict server for the module. What is checked is what a client could see go wrong:
bytes, checksums, refusals, staging files left behind, and descriptors that keep deleted
payloads open.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from service.ops.objects import SMALL_PUT_BYTES
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

BUCKET = "lean"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("lean") / "data",
        env_overrides={"SERVICE_DURABILITY": "strict"},
    )
    proc.start()
    with proc.client() as client:
        assert client.post("/buckets", json={"name": BUCKET}).status_code == 201
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def url(key: str) -> str:
    return f"/buckets/{BUCKET}/objects/{key}"


def open_payload_fds(server: ServerProcess) -> set[str]:
    """Paths of payload files the server process holds open (not the directories: a
    release's directory fsync may hold a fan-out directory open for a moment)."""
    assert server.process is not None
    fd_dir = f"/proc/{server.process.pid}/fd"
    paths = set()
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if "/payloads/" in target and not os.path.isdir(target):
            paths.add(target)
    return paths


@pytest.mark.parametrize("size", [0, 1, SMALL_PUT_BYTES, SMALL_PUT_BYTES + 1])
def test_bodies_either_side_of_the_small_put_threshold_round_trip(
    api: httpx.Client, server: ServerProcess, size: int
) -> None:
    data = os.urandom(size)
    put = api.put(url(f"edge-{size}"), content=data)
    assert put.status_code == 200, put.text
    assert put.json()["sha256_checksum"] == hashlib.sha256(data).hexdigest()
    assert api.get(url(f"edge-{size}")).content == data
    assert os.listdir(Path(server.data_dir) / "staging") == []


def test_a_small_put_with_a_wrong_checksum_stores_nothing(
    api: httpx.Client, server: ServerProcess
) -> None:
    response = api.put(url("bad"), content=b"abc", headers={"X-Checksum-Sha256": "0" * 64})
    assert_error(response, 400, "BadDigest")
    assert api.get(url("bad")).status_code == 404
    assert os.listdir(Path(server.data_dir) / "staging") == []


def test_concurrent_small_puts_all_land_with_their_own_bytes(api: httpx.Client) -> None:
    bodies = {f"many-{n}": os.urandom(4096) for n in range(48)}

    def put(item: tuple[str, bytes]) -> int:
        return api.put(url(item[0]), content=item[1]).status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(put, bodies.items())) == {200}
    for key, body in bodies.items():
        assert api.get(url(key)).content == body


def test_ranges_of_an_uncacheable_object_are_exact_and_repeatable(api: httpx.Client) -> None:
    data = os.urandom(1024 * 1024)  # above the body cache's entry limit
    assert api.put(url("ranged"), content=data).status_code == 200
    for _ in range(2):  # the first read opens the descriptor, the second uses it
        for start, end in ((0, 65535), (1000, 70000), (1024 * 1024 - 10, 1024 * 1024 - 1)):
            got = api.get(url("ranged"), headers={"Range": f"bytes={start}-{end}"})
            assert got.status_code == 206
            assert got.content == data[start : end + 1]
    whole_small = os.urandom(100 * 1024)  # above the body cache's entry limit, a small body
    assert api.put(url("mid"), content=whole_small).status_code == 200
    assert api.get(url("mid")).content == whole_small
    assert api.get(url("mid")).content == whole_small


def test_an_overwritten_or_deleted_object_keeps_no_descriptor_open(
    api: httpx.Client, server: ServerProcess
) -> None:
    first, second = os.urandom(300_000), os.urandom(300_000)
    assert api.put(url("swap"), content=first).status_code == 200
    before = open_payload_fds(server)
    assert api.get(url("swap"), headers={"Range": "bytes=0-99"}).content == first[:100]
    first_fds = open_payload_fds(server) - before
    assert len(first_fds) == 1, "the ranged read should have kept the payload's descriptor"
    assert api.put(url("swap"), content=second).status_code == 200
    assert api.get(url("swap"), headers={"Range": "bytes=0-99"}).content == second[:100]
    now = open_payload_fds(server)
    assert not first_fds & now
    second_fds = now - before
    assert len(second_fds) == 1
    assert api.delete(url("swap")).status_code == 204
    assert api.get(url("swap")).status_code == 404
    assert not second_fds & open_payload_fds(server)
