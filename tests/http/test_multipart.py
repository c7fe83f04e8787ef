"""Black-box tests of the Multipart uploads section over HTTP."""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.http.test_buckets import assert_error
from tests.http.test_objects import url
from tests.serverproc import ServerProcess


@pytest.fixture
def bucket(api: httpx.Client, bucket_name: str) -> str:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    return bucket_name


def init(api: httpx.Client, bucket: str, key: str, **extra: object) -> dict[str, object]:
    response = api.post("/multipart/init", json={"bucket": bucket, "key": key, **extra})
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def put_part(api: httpx.Client, upload_id: str, number: int, data: bytes) -> httpx.Response:
    return api.put(f"/multipart/{upload_id}/part", params={"partNumber": number}, content=data)


def test_out_of_order_parts_complete_to_exact_bytes(api: httpx.Client, bucket: str) -> None:
    session = init(api, bucket, "big.bin", content_type="video/mp4", custom_metadata={"a": "b"})
    assert session["recommended_part_size"] == 8 * 1024 * 1024
    assert isinstance(session["max_parallel_parts"], int) and session["max_parallel_parts"] >= 1
    upload_id = str(session["upload_id"])
    parts = [os.urandom(300_000), os.urandom(200_000), os.urandom(1)]
    for number in (3, 1, 2):
        response = put_part(api, upload_id, number, parts[number - 1])
        assert response.status_code == 200, response.text
        assert response.json() == {
            "part_number": number,
            "etag": hashlib.sha256(parts[number - 1]).hexdigest(),
            "size_bytes": len(parts[number - 1]),
        }
    status = api.get(f"/multipart/{upload_id}").json()
    assert [part["part_number"] for part in status["parts"]] == [1, 2, 3]
    manifest = [{"part_number": p["part_number"], "etag": p["etag"]} for p in status["parts"]]
    done = api.post(f"/multipart/{upload_id}/complete", json={"parts": manifest})
    assert done.status_code == 200, done.text
    whole = b"".join(parts)
    assert done.json()["etag"] == hashlib.sha256(whole).hexdigest()
    assert done.json()["content_type"] == "video/mp4"
    assert done.json()["custom_metadata"] == {"a": "b"}
    got = api.get(url(bucket, "big.bin"))
    assert got.content == whole and got.headers["Content-Type"] == "video/mp4"
    assert_error(api.get(f"/multipart/{upload_id}"), 404, "NoSuchUpload")


def test_concurrent_parts_and_replacement(api: httpx.Client, bucket: str) -> None:
    upload_id = str(init(api, bucket, "concurrent")["upload_id"])
    blobs = {number: os.urandom(100_000 + number) for number in range(1, 9)}
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: put_part(api, upload_id, n, blobs[n]), blobs))
    assert all(result.status_code == 200 for result in results)
    blobs[4] = b"replacement part four"
    assert put_part(api, upload_id, 4, blobs[4]).status_code == 200
    status = api.get(f"/multipart/{upload_id}").json()
    assert [part["size_bytes"] for part in status["parts"]] == [len(blobs[n]) for n in range(1, 9)]
    manifest = [{"part_number": p["part_number"], "etag": p["etag"]} for p in status["parts"]]
    assert api.post(f"/multipart/{upload_id}/complete", json={"parts": manifest}).status_code == 200
    assert api.get(url(bucket, "concurrent")).content == b"".join(blobs[n] for n in range(1, 9))


@pytest.mark.parametrize("number", ["0", "10001", "-1", "x", ""])
def test_bad_part_numbers(api: httpx.Client, bucket: str, number: str) -> None:
    upload_id = str(init(api, bucket, "k")["upload_id"])
    response = api.put(f"/multipart/{upload_id}/part", params={"partNumber": number}, content=b"x")
    assert_error(response, 400, "InvalidPartNumber")
    assert api.get(f"/multipart/{upload_id}").json()["parts"] == []


def test_other_methods_on_the_part_route_are_405_and_keep_the_connection(
    api: httpx.Client, bucket: str
) -> None:
    upload_id = str(init(api, bucket, "k")["upload_id"])
    for method in ("GET", "POST", "DELETE") * 3:
        response = api.request(method, f"/multipart/{upload_id}/part", params={"partNumber": 1})
        assert_error(response, 405, "MethodNotAllowed")
        assert api.get(f"/multipart/{upload_id}").json()["parts"] == []


def test_bad_manifests_change_nothing(api: httpx.Client, bucket: str) -> None:
    upload_id = str(init(api, bucket, "k")["upload_id"])
    etags = {n: put_part(api, upload_id, n, f"part{n}".encode()).json()["etag"] for n in (1, 2, 3)}
    cases = [
        (
            [{"part_number": 2, "etag": etags[2]}, {"part_number": 1, "etag": etags[1]}],
            "InvalidPartOrder",
        ),
        (
            [{"part_number": 1, "etag": etags[1]}, {"part_number": 1, "etag": etags[1]}],
            "InvalidPartOrder",
        ),
        ([{"part_number": 1, "etag": "0" * 64}], "InvalidPart"),
        ([{"part_number": 4, "etag": etags[1]}], "InvalidPart"),
        ([], "InvalidPart"),
    ]
    for parts, code in cases:
        response = api.post(f"/multipart/{upload_id}/complete", json={"parts": parts})
        assert_error(response, 400, code)
    assert len(api.get(f"/multipart/{upload_id}").json()["parts"]) == 3
    assert_error(api.get(url(bucket, "k")), 404, "NoSuchKey")
    subset = [{"part_number": 1, "etag": etags[1]}, {"part_number": 3, "etag": etags[3]}]
    assert api.post(f"/multipart/{upload_id}/complete", json={"parts": subset}).status_code == 200
    assert api.get(url(bucket, "k")).content == b"part1part3"


def test_abort_purges_session(api: httpx.Client, bucket: str) -> None:
    upload_id = str(init(api, bucket, "k")["upload_id"])
    put_part(api, upload_id, 1, b"data")
    listed = api.get("/multipart", params={"bucket": bucket}).json()["uploads"]
    assert [item["upload_id"] for item in listed] == [upload_id]
    assert api.delete(f"/multipart/{upload_id}").status_code == 204
    assert_error(api.get(f"/multipart/{upload_id}"), 404, "NoSuchUpload")
    assert_error(put_part(api, upload_id, 2, b"x"), 404, "NoSuchUpload")
    assert api.get("/multipart", params={"bucket": bucket}).json()["uploads"] == []


def test_unknown_upload_is_404(api: httpx.Client) -> None:
    assert_error(api.get("/multipart/nope"), 404, "NoSuchUpload")
    assert_error(api.delete("/multipart/nope"), 404, "NoSuchUpload")
    assert_error(api.post("/multipart/nope/complete", json={"parts": []}), 404, "NoSuchUpload")


def test_expired_session_answers_404_and_is_reaped(server_factory: object) -> None:
    proc: ServerProcess = server_factory(SERVICE_MULTIPART_TTL="2")  # type: ignore[operator]
    with proc.client() as api:
        api.post("/buckets", json={"name": "expiry"})
        upload_id = str(init(api, "expiry", "k")["upload_id"])
        assert put_part(api, upload_id, 1, b"part").status_code == 200
        time.sleep(3.5)
        assert_error(api.get(f"/multipart/{upload_id}"), 404, "NoSuchUpload")
        assert api.get("/multipart", params={"bucket": "expiry"}).json()["uploads"] == []


def test_sessions_survive_restart_and_complete(server_factory: object) -> None:
    proc: ServerProcess = server_factory()  # type: ignore[operator]
    with proc.client() as api:
        api.post("/buckets", json={"name": "restart"})
        upload_id = str(init(api, "restart", "k")["upload_id"])
        first = os.urandom(50_000)
        put_part(api, upload_id, 1, first)
    proc.restart(crash=True)
    with proc.client() as api:
        status = api.get(f"/multipart/{upload_id}").json()
        assert [part["part_number"] for part in status["parts"]] == [1]
        second = os.urandom(40_000)
        etag2 = put_part(api, upload_id, 2, second).json()["etag"]
        manifest = [
            {"part_number": 1, "etag": status["parts"][0]["etag"]},
            {"part_number": 2, "etag": etag2},
        ]
        done = api.post(f"/multipart/{upload_id}/complete", json={"parts": manifest})
        assert done.status_code == 200
        assert done.json()["sha256_checksum"] == hashlib.sha256(first + second).hexdigest()
        assert api.get(url("restart", "k")).content == first + second
