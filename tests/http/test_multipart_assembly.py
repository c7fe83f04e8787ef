"""Multipart assembly over HTTP: what the assembly directory holds as parts arrive, are
replaced, completed and aborted, and that every completion has the exact bytes.

This is the fallback for parts that cannot be written in place (``test_multipart_direct``
covers those): the parts here are sent chunked, with no declared length."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serverproc import ServerProcess

BUCKET = "asm"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("asm") / "data", env_overrides={"SERVICE_DURABILITY": "strict"}
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


def assembly_files(server: ServerProcess, upload_id: str) -> list[Path]:
    return sorted((Path(server.data_dir) / "assembly").glob(f"*.{upload_id}.part"))


def assembled_bytes(server: ServerProcess, upload_id: str) -> int | None:
    files = assembly_files(server, upload_id)
    assert len(files) <= 1
    return files[0].stat().st_size if files else None


def start(api: httpx.Client, key: str) -> str:
    response = api.post("/multipart/init", json={"bucket": BUCKET, "key": key})
    assert response.status_code == 201, response.text
    return str(response.json()["upload_id"])


def put_part(api: httpx.Client, upload_id: str, number: int, data: bytes) -> str:
    response = api.put(
        f"/multipart/{upload_id}/part", params={"partNumber": number}, content=iter([data])
    )
    assert response.status_code == 200, response.text
    return str(response.json()["etag"])


def complete(api: httpx.Client, upload_id: str, parts: list[tuple[int, str]]) -> httpx.Response:
    manifest = [{"part_number": number, "etag": etag} for number, etag in parts]
    return api.post(f"/multipart/{upload_id}/complete", json={"parts": manifest})


def test_the_contiguous_prefix_is_assembled_as_parts_arrive(
    api: httpx.Client, server: ServerProcess
) -> None:
    upload_id = start(api, "prefix")
    bodies = {n: os.urandom(100_000 + n) for n in (1, 2, 3, 4)}
    etags = {2: put_part(api, upload_id, 2, bodies[2])}
    assert assembled_bytes(server, upload_id) is None  # no part 1: nothing to assemble
    etags[1] = put_part(api, upload_id, 1, bodies[1])
    assert assembled_bytes(server, upload_id) == len(bodies[1]) + len(bodies[2])
    etags[4] = put_part(api, upload_id, 4, bodies[4])
    assert assembled_bytes(server, upload_id) == len(bodies[1]) + len(bodies[2])
    etags[3] = put_part(api, upload_id, 3, bodies[3])
    assert assembled_bytes(server, upload_id) == sum(len(body) for body in bodies.values())
    done = complete(api, upload_id, sorted(etags.items()))
    assert done.status_code == 200, done.text
    whole = b"".join(bodies[n] for n in (1, 2, 3, 4))
    assert done.json()["etag"] == hashlib.sha256(whole).hexdigest()
    assert api.get(f"/buckets/{BUCKET}/objects/prefix").content == whole
    assert assembly_files(server, upload_id) == []


def test_a_part_replaced_after_it_was_assembled_is_what_completes(
    api: httpx.Client, server: ServerProcess
) -> None:
    upload_id = start(api, "replaced")
    one, two, three = os.urandom(50_000), os.urandom(60_000), os.urandom(70_000)
    etags = {1: put_part(api, upload_id, 1, one), 2: put_part(api, upload_id, 2, two)}
    etags[3] = put_part(api, upload_id, 3, three)
    new_two = os.urandom(10_000)
    etags[2] = put_part(api, upload_id, 2, new_two)
    assert assembled_bytes(server, upload_id) == len(one) + len(new_two) + len(three)
    done = complete(api, upload_id, sorted(etags.items()))
    assert done.status_code == 200, done.text
    assert api.get(f"/buckets/{BUCKET}/objects/replaced").content == one + new_two + three


def test_a_manifest_that_skips_assembled_parts_still_completes_exactly(
    api: httpx.Client, server: ServerProcess
) -> None:
    upload_id = start(api, "skips")
    bodies = {n: os.urandom(40_000 + n) for n in (1, 2, 3)}
    etags = {n: put_part(api, upload_id, n, body) for n, body in bodies.items()}
    done = complete(api, upload_id, [(1, etags[1]), (3, etags[3])])
    assert done.status_code == 200, done.text
    assert api.get(f"/buckets/{BUCKET}/objects/skips").content == bodies[1] + bodies[3]
    other = start(api, "skips-first")
    etags = {n: put_part(api, other, n, body) for n, body in bodies.items()}
    done = complete(api, other, [(2, etags[2]), (3, etags[3])])
    assert done.status_code == 200, done.text
    assert api.get(f"/buckets/{BUCKET}/objects/skips-first").content == bodies[2] + bodies[3]
    assert assembly_files(server, upload_id) == assembly_files(server, other) == []


def test_an_aborted_upload_leaves_no_assembly(api: httpx.Client, server: ServerProcess) -> None:
    upload_id = start(api, "aborted")
    put_part(api, upload_id, 1, os.urandom(30_000))
    assert assembled_bytes(server, upload_id) == 30_000
    assert api.delete(f"/multipart/{upload_id}").status_code == 204
    assert assembly_files(server, upload_id) == []


def test_after_a_restart_the_old_assembly_goes_and_complete_joins(
    server_factory: object,
) -> None:
    proc = server_factory()  # type: ignore[operator]
    with proc.client() as api:
        assert api.post("/buckets", json={"name": BUCKET}).status_code == 201
        upload_id = start(api, "restarted")
        one, two = os.urandom(20_000), os.urandom(30_000)
        etags = [(1, put_part(api, upload_id, 1, one)), (2, put_part(api, upload_id, 2, two))]
        assert assembled_bytes(proc, upload_id) == 50_000
    proc.restart(crash=True)
    assert assembly_files(proc, upload_id) == []
    with proc.client() as api:
        done = complete(api, upload_id, etags)
        assert done.status_code == 200, done.text
        assert api.get(f"/buckets/{BUCKET}/objects/restarted").content == one + two


def test_a_one_part_upload_completes_as_its_parts_own_file(server_factory: object) -> None:
    """Without an assembly (a restart dropped it) a one-part upload's object is its part's
    payload file itself, shared by reference (no copy, no second hash), and it outlives the
    part's release."""
    proc = server_factory()  # type: ignore[operator]
    data = os.urandom(40_000)
    with proc.client() as api:
        assert api.post("/buckets", json={"name": BUCKET}).status_code == 201
        upload_id = start(api, "one")
        etag = put_part(api, upload_id, 1, data)
        assert etag == hashlib.sha256(data).hexdigest()
    proc.restart(crash=True)
    files = payload_files(proc)
    with proc.client() as api:
        done = complete(api, upload_id, [(1, etag)])
        assert done.status_code == 200, done.text
        assert done.json()["etag"] == etag
    proc.restart()  # the part's release is durable; the object's file is still held
    with proc.client() as api:
        assert api.get(f"/buckets/{BUCKET}/objects/one").content == data
    assert payload_files(proc) == files
    with proc.client() as api:
        assert api.delete(f"/buckets/{BUCKET}/objects/one").status_code == 204


def payload_files(server: ServerProcess) -> set[Path]:
    return {path for path in server.data_dir.rglob("payloads/*/*/*") if path.is_file()}
