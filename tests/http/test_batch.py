"""Batch upload (``POST /api/v1/buckets/{bucket}/batch``) against a real server: each regular
file of a tar stream becomes an object, each member's refusal is reported on its own, and a
body that is not a valid tar stores nothing."""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import socket
import tarfile
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.events.test_event_stream import read_events
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

_names = itertools.count()


def make_tar(
    members: Sequence[tuple[str, bytes] | tarfile.TarInfo],
    *,
    pax: dict[str, dict[str, str]] | None = None,
) -> bytes:
    """A pax tar of ``(name, data)`` files and ready ``TarInfo`` entries (no data)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                archive.addfile(member)
                continue
            name, data = member
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.pax_headers = dict((pax or {}).get(name, {}))
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def post_batch(api: httpx.Client, bucket: str, body: bytes, **params: str) -> httpx.Response:
    return api.post(
        f"/buckets/{bucket}/batch",
        content=body,
        params=params,
        headers={"Content-Type": "application/x-tar"},
    )


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key, safe='/')}"


def keys_of(api: httpx.Client, bucket: str) -> list[str]:
    listing = api.get(f"/buckets/{bucket}/objects").json()
    return [item["key"] for item in listing["objects"]]


def payload_files(server: ServerProcess) -> set[str]:
    root = server.data_dir / "payloads"
    return {path.name for path in root.rglob("*") if path.is_file()}


@pytest.fixture(scope="module")
def batch_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("batch") / "data")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def api(batch_server: ServerProcess) -> Iterator[httpx.Client]:
    with batch_server.client() as client:
        yield client


@pytest.fixture
def bucket(api: httpx.Client) -> str:
    name = f"batch-{next(_names)}"
    assert api.post("/buckets", json={"name": name}).status_code == 201
    return name


def test_nested_unicode_names_round_trip_byte_exact(api: httpx.Client, bucket: str) -> None:
    files = {
        "a.txt": b"alpha\n" * 100,
        "dir/sub/b.bin": bytes(range(256)) * 40,
        "dir/naïve café/ü.txt": "grüße".encode() * 50,
        "日本/写真.jpg": b"\xff\xd8" + b"j" * 3000,
        "empty": b"",
        "big.dat": bytes(range(251)) * 3000,  # ~750 KiB: the streamed path, not the small one
        "x" * 200 + "/long-name": b"long",
    }
    directory = tarfile.TarInfo("dir/")
    directory.type = tarfile.DIRTYPE
    body = make_tar([directory, *files.items()])
    answer = post_batch(api, bucket, body, prefix="up/")
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["stored"] == len(files) and document["failed"] == 0
    results = document["results"]
    assert [item["key"] for item in results] == [f"up/{name}" for name in files]
    for item, (name, data) in zip(results, files.items(), strict=True):
        digest = hashlib.sha256(data).hexdigest()
        assert item["etag"] == item["sha256_checksum"] == digest
        assert item["size_bytes"] == len(data) and item["bucket"] == bucket
        got = api.get(obj(bucket, f"up/{name}"))
        assert got.status_code == 200 and got.content == data, name
    assert results[0]["content_type"] == "text/plain"  # guessed from the key, as for a PUT
    assert results[3]["content_type"] == "image/jpeg"
    assert sorted(keys_of(api, bucket)) == sorted(f"up/{name}" for name in files)
    usage = api.get(f"/buckets/{bucket}").json()["usage"]
    assert usage == {"object_count": len(files), "size_bytes": sum(map(len, files.values()))}


def test_pax_records_set_type_metadata_and_verified_checksum(
    api: httpx.Client, bucket: str
) -> None:
    data = b"with extras"
    pax = {
        "x.bin": {
            "SERVICE.content_type": "text/markdown",
            "SERVICE.meta.Owner": "zoë",
            "SERVICE.sha256": hashlib.sha256(data).hexdigest().upper(),
        }
    }
    answer = post_batch(api, bucket, make_tar([("x.bin", data)], pax=pax))
    assert answer.status_code == 200, answer.text
    item = answer.json()["results"][0]
    assert item["content_type"] == "text/markdown"
    assert item["custom_metadata"] == {"owner": "zoë"}
    head = api.head(obj(bucket, "x.bin"))
    assert head.headers["Content-Type"] == "text/markdown"


def test_members_failing_their_own_checks_are_reported_and_the_rest_land(
    api: httpx.Client, bucket: str
) -> None:
    assert api.patch(f"/buckets/{bucket}", json={"quota_bytes": 5000}).status_code == 200
    link = tarfile.TarInfo("link")
    link.type = tarfile.SYMTYPE
    link.linkname = "good-1"
    members: list[tuple[str, bytes] | tarfile.TarInfo] = [
        ("good-1", b"1" * 1000),
        ("bad\x01key", b"control character"),
        ("bad-digest", b"damaged on the way"),
        link,
        ("bad-meta", b"m"),
        ("too-big", b"q" * 4500),  # 1000 + 4500 > 5000: over the quota
        ("good-2", b"2" * 1000),
    ]
    pax = {
        "bad-digest": {"SERVICE.sha256": "0" * 64},
        "bad-meta": {"SERVICE.meta.x": "line\nbreak"},
    }
    answer = post_batch(api, bucket, make_tar(members, pax=pax))
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert (document["stored"], document["failed"]) == (2, 5)
    errors = {item["key"]: item["error"] for item in document["results"] if "error" in item}
    assert {key: error["code"] for key, error in errors.items()} == {
        "bad\x01key": "InvalidKey",
        "bad-digest": "BadDigest",
        "link": "InvalidArgument",
        "bad-meta": "InvalidArgument",
        "too-big": "QuotaExceeded",
    }
    assert errors["too-big"]["status"] == 413 and errors["too-big"]["message"]
    assert sorted(keys_of(api, bucket)) == ["good-1", "good-2"]
    assert api.get(obj(bucket, "good-2")).content == b"2" * 1000
    usage = api.get(f"/buckets/{bucket}").json()["usage"]
    assert usage == {"object_count": 2, "size_bytes": 2000}


@pytest.mark.parametrize(
    "damage",
    ["truncated_in_member", "truncated_at_boundary", "bad_header_checksum", "not_a_tar", "empty"],
)
def test_a_body_that_is_not_a_valid_tar_is_400_and_stores_nothing(
    api: httpx.Client, bucket: str, batch_server: ServerProcess, damage: str
) -> None:
    body = make_tar([(f"f{n}", bytes([n]) * 700) for n in range(6)])
    if damage == "truncated_in_member":
        body = body[: 512 * 8 + 100]
    elif damage == "truncated_at_boundary":
        body = body[: 512 * 12]  # whole members, then no end-of-archive block
    elif damage == "bad_header_checksum":
        corrupt = bytearray(body)
        corrupt[512 * 9 + 10] ^= 0x20  # a name byte of the fourth member's pax header
        body = bytes(corrupt)
    elif damage == "not_a_tar":
        body = b"certainly not a tar archive " * 40
    else:
        body = b""
    before = payload_files(batch_server)
    answer = post_batch(api, bucket, body)
    assert_error(answer, 400, "InvalidArgument")
    assert keys_of(api, bucket) == []
    assert api.get(f"/buckets/{bucket}").json()["usage"]["object_count"] == 0
    assert payload_files(batch_server) == before  # the members staged before the damage: gone


def test_an_extended_header_over_64_kib_is_400_before_it_is_read_whole(
    api: httpx.Client, bucket: str, batch_server: ServerProcess
) -> None:
    fits = {"f0": {"SERVICE.meta.note": "n" * 7000}}
    answer = post_batch(api, bucket, make_tar([("f0", b"kept")], pax=fits))
    assert answer.status_code == 200 and answer.json()["stored"] == 1, answer.text
    huge = {"f2": {"SCHILY.xattr.user.blob": "x" * (65 * 1024)}}
    before = payload_files(batch_server)
    answer = post_batch(api, bucket, make_tar([("f1", b"a"), ("f2", b"b")], pax=huge))
    assert_error(answer, 400, "InvalidArgument")
    assert "extended header" in answer.json()["error"]["message"]
    assert keys_of(api, bucket) == ["f0"]
    assert payload_files(batch_server) == before


def test_a_batch_of_only_directories_and_an_empty_archive_store_nothing(
    api: httpx.Client, bucket: str
) -> None:
    directory = tarfile.TarInfo("only/")
    directory.type = tarfile.DIRTYPE
    for body in (make_tar([directory]), make_tar([])):
        answer = post_batch(api, bucket, body)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"results": [], "stored": 0, "failed": 0}


def test_too_many_members_is_400(api: httpx.Client, bucket: str) -> None:
    directories = []
    for n in range(10_001):
        info = tarfile.TarInfo(f"d{n}/")
        info.type = tarfile.DIRTYPE
        directories.append(info)
    answer = post_batch(api, bucket, make_tar([("kept-not", b"x"), *directories]))
    assert_error(answer, 400, "InvalidArgument")
    assert "10000" in answer.json()["error"]["message"]
    assert keys_of(api, bucket) == []


def test_refusals_before_the_body(
    api: httpx.Client, bucket: str, batch_server: ServerProcess
) -> None:
    body = make_tar([("a", b"a")])
    assert_error(post_batch(api, "no-such-bucket-here", body), 404, "NoSuchBucket")
    wrong = api.post(
        f"/buckets/{bucket}/batch", content=body, headers={"Content-Type": "application/json"}
    )
    assert_error(wrong, 400, "InvalidArgument")
    assert_error(post_batch(api, bucket, body, prefix="bad\x7f"), 400, "InvalidKey")
    anonymous = httpx.post(f"{batch_server.api}/buckets/{bucket}/batch", content=body)
    assert_error(anonymous, 401, "Unauthorized")
    assert_error(api.put(f"/buckets/{bucket}/batch", content=body), 405, "MethodNotAllowed")
    assert keys_of(api, bucket) == []


def test_versioned_bucket_keeps_each_member_as_a_version_and_events_list_each(
    api: httpx.Client, bucket: str
) -> None:
    assert api.patch(f"/buckets/{bucket}", json={"versioning_enabled": True}).status_code == 200
    members = [("k", b"first"), ("k", b"second"), ("other", b"o")]
    answer = post_batch(api, bucket, make_tar(members))
    assert answer.status_code == 200, answer.text
    results: list[dict[str, Any]] = answer.json()["results"]
    assert all(item["version_id"] for item in results)
    assert api.get(obj(bucket, "k")).content == b"second"  # stream order: the later one wins
    versions = api.get(f"/buckets/{bucket}/versions").json()["versions"]
    assert sorted(item["key"] for item in versions) == ["k", "k", "other"]
    events = read_events(api, bucket, 3, params={"since": "0"})
    assert [(event["type"], event["key"]) for event in events] == [
        ("object.created", "k"),
        ("object.created", "k"),
        ("object.created", "other"),
    ]
    assert [event["version_id"] for event in events] == [item["version_id"] for item in results]


def test_two_serving_processes(server_factory: Any) -> None:
    server = server_factory(SERVICE_WORKERS="2")
    with server.client() as api:
        assert api.post("/buckets", json={"name": "multi"}).status_code == 201
        files = {f"p/{n:03d}.txt": f"file {n}\n".encode() * (n + 1) for n in range(120)}
        for _ in range(4):  # the requests land on either process
            answer = post_batch(api, "multi", make_tar(list(files.items())))
            assert answer.status_code == 200, answer.text
            assert answer.json()["stored"] == len(files)
        for name, data in itertools.islice(files.items(), 0, None, 17):
            assert api.get(obj("multi", name)).content == data
        assert api.get("/buckets/multi").json()["usage"]["object_count"] == len(files)


def test_a_client_that_goes_away_mid_body_leaves_nothing(
    api: httpx.Client, bucket: str, batch_server: ServerProcess
) -> None:
    before = payload_files(batch_server)
    body = make_tar([(f"m{n}", bytes([n]) * 3000) for n in range(50)])
    credentials = base64.b64encode(":".join(batch_server.auth).encode()).decode()
    head = (
        f"POST /api/v1/buckets/{bucket}/batch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Basic {credentials}\r\nContent-Type: application/x-tar\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", batch_server.port)) as connection:
        connection.sendall(head + body[: len(body) // 2])  # 25 members, then the client dies
        deadline = time.monotonic() + 10
        while len(payload_files(batch_server) - before) < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(payload_files(batch_server) - before) >= 10  # staged while the body came
    deadline = time.monotonic() + 10
    while payload_files(batch_server) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert payload_files(batch_server) == before
    assert keys_of(api, bucket) == []
