"""Black-box tests of object PUT/GET/HEAD/DELETE over HTTP."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess


@pytest.fixture
def bucket(api: httpx.Client, bucket_name: str) -> str:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    return bucket_name


def url(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key, safe='/')}"


def test_put_then_get_round_trips_bytes_and_headers(api: httpx.Client, bucket: str) -> None:
    data = b"hello object store" * 1000
    digest = hashlib.sha256(data).hexdigest()
    put = api.put(
        url(bucket, "docs/a.txt"),
        content=data,
        headers={"Content-Type": "text/plain", "X-Meta-Owner": "alice", "X-Meta-Project": "x1"},
    )
    assert put.status_code == 200, put.text
    body = put.json()
    assert body["etag"] == body["sha256_checksum"] == digest
    assert body["size_bytes"] == len(data)
    assert body["content_type"] == "text/plain"
    assert body["custom_metadata"] == {"owner": "alice", "project": "x1"}
    assert body["version_id"] is None
    assert put.headers["ETag"] == f'"{digest}"'
    assert put.headers["X-Checksum-Sha256"] == digest
    got = api.get(url(bucket, "docs/a.txt"))
    assert got.status_code == 200
    assert got.content == data
    assert got.headers["Content-Length"] == str(len(data))
    assert got.headers["Content-Type"] == "text/plain"
    assert got.headers["ETag"] == f'"{digest}"'
    assert got.headers["Accept-Ranges"] == "bytes"
    assert got.headers["X-Meta-Owner"] == "alice"
    assert got.headers["Last-Modified"].endswith("GMT")
    head = api.head(url(bucket, "docs/a.txt"))
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Length"] == str(len(data))


def test_large_object_streams_whole_and_ranged(api: httpx.Client, bucket: str) -> None:
    data = bytes(range(256)) * (5 * 4096 + 7)  # ~5 MiB, above the small-body path
    assert api.put(url(bucket, "big"), content=data).status_code == 200
    got = api.get(url(bucket, "big"))
    assert got.status_code == 200 and got.content == data
    ranged = api.get(url(bucket, "big"), headers={"Range": "bytes=1000000-3999999"})
    assert ranged.status_code == 206
    assert ranged.content == data[1000000:4000000]


def test_chunked_put_without_length(api: httpx.Client, bucket: str) -> None:
    parts = [b"a" * 100_000, b"b" * 300_000, b"c"]

    def body() -> Iterator[bytes]:
        yield from parts

    put = api.put(url(bucket, "chunked"), content=body())
    assert put.status_code == 200, put.text
    assert api.get(url(bucket, "chunked")).content == b"".join(parts)


@pytest.mark.parametrize(
    "key", ["with space", "ünïcödé/ключ", "a/b/c/d", "percent%20literal", "q?mark#hash", "x" * 1024]
)
def test_unusual_keys_round_trip(api: httpx.Client, bucket: str, key: str) -> None:
    assert api.put(url(bucket, key), content=key.encode()).status_code == 200
    got = api.get(url(bucket, key))
    assert got.status_code == 200 and got.content == key.encode()
    listed = api.get(f"/buckets/{bucket}/objects").json()["objects"]
    assert [item["key"] for item in listed] == [key]


@pytest.mark.parametrize("key", ["x" * 1025, "nul\x00byte", "tab\tkey", "é" * 513])
def test_invalid_keys_are_refused(api: httpx.Client, bucket: str, key: str) -> None:
    assert_error(api.put(url(bucket, key), content=b"x"), 400, "InvalidKey")
    assert api.get(f"/buckets/{bucket}/objects").json()["objects"] == []


def test_missing_key_is_no_such_key(api: httpx.Client, bucket: str) -> None:
    assert_error(api.get(url(bucket, "missing")), 404, "NoSuchKey")
    head = api.head(url(bucket, "missing"))
    assert head.status_code == 404 and head.content == b""
    assert_error(api.delete(url(bucket, "missing")), 404, "NoSuchKey")


def test_bad_digest_keeps_nothing(api: httpx.Client, bucket: str) -> None:
    wrong = hashlib.sha256(b"other").hexdigest()
    response = api.put(url(bucket, "k"), content=b"data", headers={"X-Checksum-Sha256": wrong})
    assert_error(response, 400, "BadDigest")
    assert_error(api.get(url(bucket, "k")), 404, "NoSuchKey")
    right = hashlib.sha256(b"data").hexdigest()
    ok = api.put(url(bucket, "k"), content=b"data", headers={"X-Checksum-Sha256": right})
    assert ok.status_code == 200


def test_overwrite_replaces_content(api: httpx.Client, bucket: str) -> None:
    api.put(url(bucket, "k"), content=b"first version")
    api.put(url(bucket, "k"), content=b"second")
    assert api.get(url(bucket, "k")).content == b"second"


def test_conditional_put(api: httpx.Client, bucket: str) -> None:
    first = api.put(url(bucket, "k"), content=b"one", headers={"If-None-Match": "*"})
    assert first.status_code == 200
    assert_error(
        api.put(url(bucket, "k"), content=b"two", headers={"If-None-Match": "*"}),
        412,
        "PreconditionFailed",
    )
    etag = first.headers["ETag"]
    assert_error(
        api.put(url(bucket, "k"), content=b"two", headers={"If-Match": '"' + "0" * 64 + '"'}),
        412,
        "PreconditionFailed",
    )
    assert api.get(url(bucket, "k")).content == b"one"
    assert api.put(url(bucket, "k"), content=b"two", headers={"If-Match": etag}).status_code == 200
    assert api.get(url(bucket, "k")).content == b"two"


@pytest.mark.parametrize(
    ("header", "status", "window"),
    [
        ("bytes=0-9", 206, (0, 10)),
        ("bytes=10-", 206, (10, 100)),
        ("bytes=-5", 206, (95, 100)),
        ("bytes=95-1000", 206, (95, 100)),
        ("bytes=0-0", 206, (0, 1)),
        ("bytes=-1000", 206, (0, 100)),
        ("bytes=0-1,5-6", 200, (0, 100)),
        ("items=0-5", 200, (0, 100)),
    ],
)
def test_ranges(
    api: httpx.Client, bucket: str, header: str, status: int, window: tuple[int, int]
) -> None:
    data = bytes(range(100))
    api.put(url(bucket, "r"), content=data)
    response = api.get(url(bucket, "r"), headers={"Range": header})
    assert response.status_code == status
    assert response.content == data[window[0] : window[1]]
    if status == 206:
        assert response.headers["Content-Range"] == f"bytes {window[0]}-{window[1] - 1}/100"


@pytest.mark.parametrize("header", ["bytes=100-", "bytes=500-600", "bytes=-0"])
def test_unsatisfiable_range_is_416(api: httpx.Client, bucket: str, header: str) -> None:
    api.put(url(bucket, "r"), content=bytes(100))
    response = api.get(url(bucket, "r"), headers={"Range": header})
    assert_error(response, 416, "InvalidRange")
    assert response.headers["Content-Range"] == "bytes */100"


def test_empty_object(api: httpx.Client, bucket: str) -> None:
    put = api.put(url(bucket, "empty"), content=b"")
    assert put.status_code == 200
    assert put.json()["etag"] == hashlib.sha256(b"").hexdigest()
    got = api.get(url(bucket, "empty"))
    assert got.status_code == 200 and got.content == b""
    ranged = api.get(url(bucket, "empty"), headers={"Range": "bytes=0-0"})
    assert_error(ranged, 416, "InvalidRange")
    assert ranged.headers["Content-Range"] == "bytes */0"


def test_conditional_get(api: httpx.Client, bucket: str) -> None:
    put = api.put(url(bucket, "c"), content=b"conditional")
    etag = put.headers["ETag"]
    not_modified = api.get(url(bucket, "c"), headers={"If-None-Match": etag})
    assert not_modified.status_code == 304 and not_modified.content == b""
    assert api.get(url(bucket, "c"), headers={"If-None-Match": '"other"'}).status_code == 200
    assert_error(
        api.get(url(bucket, "c"), headers={"If-Match": '"other"'}), 412, "PreconditionFailed"
    )
    assert api.get(url(bucket, "c"), headers={"If-Match": etag}).status_code == 200
    last_modified = api.head(url(bucket, "c")).headers["Last-Modified"]
    assert (
        api.get(url(bucket, "c"), headers={"If-Modified-Since": last_modified}).status_code == 304
    )
    assert (
        api.get(
            url(bucket, "c"), headers={"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"}
        ).status_code
        == 200
    )


def test_if_range(api: httpx.Client, bucket: str) -> None:
    put = api.put(url(bucket, "c"), content=b"0123456789")
    etag = put.headers["ETag"]
    matched = api.get(url(bucket, "c"), headers={"Range": "bytes=0-3", "If-Range": etag})
    assert matched.status_code == 206 and matched.content == b"0123"
    stale = api.get(url(bucket, "c"), headers={"Range": "bytes=0-3", "If-Range": '"stale"'})
    assert stale.status_code == 200 and stale.content == b"0123456789"


def test_delete_removes_object(api: httpx.Client, bucket: str) -> None:
    api.put(url(bucket, "d"), content=b"x")
    assert api.delete(url(bucket, "d")).status_code == 204
    assert_error(api.get(url(bucket, "d")), 404, "NoSuchKey")
    assert api.get(f"/buckets/{bucket}").json()["usage"] == {"object_count": 0, "size_bytes": 0}


def test_quota_refuses_up_front_and_mid_stream(api: httpx.Client, bucket: str) -> None:
    api.patch(f"/buckets/{bucket}", json={"quota_bytes": 1000})
    assert api.put(url(bucket, "a"), content=b"x" * 600).status_code == 200
    assert_error(api.put(url(bucket, "b"), content=b"x" * 500), 413, "QuotaExceeded")
    # Replacing an object counts net of the bytes it replaces.
    assert api.put(url(bucket, "a"), content=b"y" * 900).status_code == 200

    def chunks() -> Iterator[bytes]:
        for _ in range(50):
            yield b"z" * 1000

    # Refused as the body crosses the quota; the rest is drained so the client hears why.
    assert_error(api.put(url(bucket, "c"), content=chunks()), 413, "QuotaExceeded")
    assert_error(api.get(url(bucket, "c")), 404, "NoSuchKey")
    assert api.get(f"/buckets/{bucket}").json()["usage"] == {"object_count": 1, "size_bytes": 900}


def test_unauthenticated_requests_get_401(
    server: ServerProcess, api: httpx.Client, bucket: str
) -> None:
    base = server.api
    anonymous = httpx.get(f"{base}/buckets/{bucket}/objects/x")
    assert_error(anonymous, 401, "Unauthorized")
    assert "WWW-Authenticate" in anonymous.headers
    wrong = httpx.get(f"{base}/buckets", auth=("bk_testroot", "sk_wrong-secret-value"))
    assert_error(wrong, 401, "Unauthorized")


# -- the read path below RequestHandler (service.http.object_reads) -----------------------


def test_a_key_that_is_not_utf8_is_invalid_key_on_get_and_head(
    api: httpx.Client, bucket: str
) -> None:
    assert_error(api.get(f"/buckets/{bucket}/objects/bad%FFkey"), 400, "InvalidKey")
    head = api.head(f"/buckets/{bucket}/objects/bad%FFkey")
    assert head.status_code == 400 and head.content == b""
    assert head.headers["X-Request-Id"]


def test_reads_echo_the_request_id_on_success_and_on_error(api: httpx.Client, bucket: str) -> None:
    api.put(url(bucket, "traced"), content=b"x")
    got = api.get(url(bucket, "traced"), headers={"X-Request-Id": "read-42"})
    assert got.status_code == 200 and got.headers["X-Request-Id"] == "read-42"
    missing = api.get(url(bucket, "absent"), headers={"X-Request-Id": "read-43"})
    assert_error(missing, 404, "NoSuchKey")
    assert missing.headers["X-Request-Id"] == "read-43"
    ids = {api.get(url(bucket, "traced")).headers["X-Request-Id"] for _ in range(3)}
    assert len(ids) == 3


def test_head_of_a_missing_object_is_404_without_a_body(api: httpx.Client, bucket: str) -> None:
    head = api.head(url(bucket, "absent"))
    assert head.status_code == 404 and head.content == b""
    assert head.headers["Content-Length"] == "0"
    assert head.headers["Cache-Control"] == "no-store"


def test_methods_other_than_reads_and_writes_are_405_and_keep_the_connection(
    api: httpx.Client, bucket: str
) -> None:
    api.put(url(bucket, "k"), content=b"x")
    for method, body in [("PATCH", b""), ("POST", b'{"a": 1}'), ("OPTIONS", b"")] * 5:
        assert_error(api.request(method, url(bucket, "k"), content=body), 405, "MethodNotAllowed")
        # The same keep-alive connection answers next: it was not closed under the client.
        assert api.get(url(bucket, "k")).content == b"x"


def test_object_reads_are_counted_and_logged_with_the_route_template(
    server: ServerProcess, api: httpx.Client, bucket: str
) -> None:
    api.put(url(bucket, "secret-key-name"), content=b"12345")
    assert api.get(url(bucket, "secret-key-name"), headers={"X-Request-Id": "logged-7"}).content
    deadline = time.monotonic() + 5
    lines: list[str] = []
    while not lines and time.monotonic() < deadline:
        lines = [line for line in server.logs().splitlines() if "request_id=logged-7" in line]
        time.sleep(0.05)
    assert len(lines) == 1
    for field in ("method=GET", "route=/api/v1/buckets/{bucket}/objects/{key}", "status=200"):
        assert field in lines[0]
    assert "bytes_out=5" in lines[0] and "secret-key-name" not in lines[0]
    metrics = api.get("/metrics").text
    assert 'route="/api/v1/buckets/{bucket}/objects/{key}"' in metrics
