"""Parts written once, in place, into their upload's file (``service.multipart.in_place``):
what the data dir holds as parts arrive, are replaced, survive a restart, complete and
abort, and that every completion has the exact bytes."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serverproc import ServerProcess

BUCKET = "direct"
S = 8 * 1024 * 1024
"""The recommended part size of an upload that declares no size: the stride of its parts."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("direct") / "data", env_overrides={"SERVICE_DURABILITY": "strict"}
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


def upload_file(server: ServerProcess, upload_id: str) -> Path:
    return Path(server.data_dir) / "assembly" / f"{upload_id}.direct"


def payload_files(server: ServerProcess) -> int:
    return sum(1 for path in (Path(server.data_dir) / "payloads").rglob("*") if path.is_file())


def sealed_in_place(server: ServerProcess, inode: int) -> bool:
    """Whether the upload file (by inode) became an object's payload (no join, no copy)."""
    files = (Path(server.data_dir) / "payloads").rglob("*")
    return any(path.is_file() and path.stat().st_ino == inode for path in files)


def start(api: httpx.Client, key: str) -> str:
    response = api.post("/multipart/init", json={"bucket": BUCKET, "key": key})
    assert response.status_code == 201, response.text
    assert response.json()["recommended_part_size"] == S
    return str(response.json()["upload_id"])


def put_part(api: httpx.Client, upload_id: str, number: int, data: bytes) -> str:
    response = api.put(f"/multipart/{upload_id}/part", params={"partNumber": number}, content=data)
    assert response.status_code == 200, response.text
    assert response.json()["etag"] == hashlib.sha256(data).hexdigest()
    return str(response.json()["etag"])


def complete(api: httpx.Client, upload_id: str, etags: dict[int, str]) -> httpx.Response:
    parts = [{"part_number": n, "etag": etags[n]} for n in sorted(etags)]
    return api.post(f"/multipart/{upload_id}/complete", json={"parts": parts}, timeout=60)


def assert_object(api: httpx.Client, key: str, data: bytes) -> None:
    response = api.get(f"/buckets/{BUCKET}/objects/{key}", timeout=60)
    assert response.status_code == 200
    assert len(response.content) == len(data)
    assert response.content == data
    assert response.headers["ETag"].strip('"') == hashlib.sha256(data).hexdigest()


def test_uniform_parts_land_in_the_upload_file_and_become_the_object(
    api: httpx.Client, server: ServerProcess
) -> None:
    upload_id = start(api, "uniform")
    bodies = {1: os.urandom(S), 2: os.urandom(S), 3: os.urandom(12345)}
    before = payload_files(server)
    etags = {3: put_part(api, upload_id, 3, bodies[3])}  # the short last part first
    etags[1] = put_part(api, upload_id, 1, bodies[1])
    etags[2] = put_part(api, upload_id, 2, bodies[2])
    region = upload_file(server, upload_id).read_bytes()
    assert region == bodies[1] + bodies[2] + bodies[3]
    assert payload_files(server) == before  # no part has a file of its own
    inode = upload_file(server, upload_id).stat().st_ino
    response = complete(api, upload_id, etags)
    assert response.status_code == 200, response.text
    whole = bodies[1] + bodies[2] + bodies[3]
    assert response.json()["sha256_checksum"] == hashlib.sha256(whole).hexdigest()
    assert_object(api, "uniform", whole)
    assert sealed_in_place(server, inode)
    assert not upload_file(server, upload_id).exists()
    assert payload_files(server) == before + 1


def test_a_resent_part_takes_its_own_file_and_is_what_completes(
    api: httpx.Client, server: ServerProcess
) -> None:
    upload_id = start(api, "resent")
    one, two, again = os.urandom(S), os.urandom(1000), os.urandom(S)
    etags = {1: put_part(api, upload_id, 1, one), 2: put_part(api, upload_id, 2, two)}
    before = payload_files(server)
    etags[1] = put_part(api, upload_id, 1, again)
    # The stored bytes were not overwritten in place: the new part has a file of its own.
    assert upload_file(server, upload_id).read_bytes()[:S] == one
    assert payload_files(server) == before + 1
    response = complete(api, upload_id, etags)
    assert response.status_code == 200, response.text
    assert_object(api, "resent", again + two)
    assert not upload_file(server, upload_id).exists()
    assert payload_files(server) == before + 1  # the object; the replaced part file is gone


def test_a_subset_manifest_and_odd_sizes_complete_exactly(
    api: httpx.Client, server: ServerProcess
) -> None:
    upload_id = start(api, "subset")
    bodies = {1: os.urandom(S), 2: os.urandom(S), 3: os.urandom(77)}
    etags = {n: put_part(api, upload_id, n, body) for n, body in bodies.items()}
    response = complete(api, upload_id, {1: etags[1], 2: etags[2]})
    assert response.status_code == 200, response.text
    assert_object(api, "subset", bodies[1] + bodies[2])
    assert not upload_file(server, upload_id).exists()

    odd = start(api, "odd")
    short, full = os.urandom(5000), os.urandom(S)
    etags = {1: put_part(api, odd, 1, short), 2: put_part(api, odd, 2, full)}
    response = complete(api, odd, etags)
    assert response.status_code == 200, response.text
    assert_object(api, "odd", short + full)


def test_a_wrong_checksum_stores_nothing_and_the_part_can_be_sent_again(
    api: httpx.Client,
) -> None:
    upload_id = start(api, "digest")
    body = os.urandom(4096)
    response = api.put(
        f"/multipart/{upload_id}/part",
        params={"partNumber": 1},
        content=body,
        headers={"X-Checksum-Sha256": "0" * 64},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "BadDigest"
    assert api.get(f"/multipart/{upload_id}").json()["parts"] == []
    etags = {1: put_part(api, upload_id, 1, body)}
    assert complete(api, upload_id, etags).status_code == 200
    assert_object(api, "digest", body)


def test_abort_removes_the_upload_file(api: httpx.Client, server: ServerProcess) -> None:
    upload_id = start(api, "aborted")
    put_part(api, upload_id, 1, os.urandom(2048))
    assert upload_file(server, upload_id).exists()
    assert api.delete(f"/multipart/{upload_id}").status_code == 204
    assert not upload_file(server, upload_id).exists()


def test_parts_written_in_place_survive_a_restart(
    tmp_path: Path,
) -> None:
    server = ServerProcess(tmp_path / "data", env_overrides={"SERVICE_DURABILITY": "strict"})
    server.start()
    try:
        with server.client() as api:
            assert api.post("/buckets", json={"name": BUCKET}).status_code == 201
            upload_id = start(api, "restarted")
            one, two = os.urandom(S), os.urandom(3333)
            etags = {1: put_part(api, upload_id, 1, one), 2: put_part(api, upload_id, 2, two)}
            closed = start(api, "closed-while-down")
            put_part(api, closed, 1, b"x" * 100)
            assert api.delete(f"/multipart/{closed}").status_code == 204
        server.stop()
        server.start()
        with server.client() as api:
            listed = api.get(f"/multipart/{upload_id}").json()["parts"]
            assert [(p["part_number"], p["etag"]) for p in listed] == sorted(etags.items())
            # Sent again after the restart: part 2 was stored in place, so it is not
            # overwritten there; the completion takes the new bytes.
            two = os.urandom(4444)
            etags[2] = put_part(api, upload_id, 2, two)
            inode = upload_file(server, upload_id).stat().st_ino
            response = complete(api, upload_id, etags)
            assert response.status_code == 200, response.text
            assert_object(api, "restarted", one + two)
            assert sealed_in_place(server, inode)  # part 2 copied into place, not joined
            assert not upload_file(server, upload_id).exists()
            assert not upload_file(server, closed).exists()
    finally:
        server.stop()
