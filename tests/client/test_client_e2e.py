"""The client against a real server: every operation, through both clients.

Each test takes ``client``, which is parametrized over ``ServiceClient`` and
``AsyncServiceClient`` (seen through ``dualclient.blocking_view``), so one body checks that
both flavours behave the same against the contract.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import io
import json
import os
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from service.client import (
    AsyncServiceClient,
    AuthenticationError,
    BucketClient,
    ByteRange,
    ConflictError,
    InvalidRangeError,
    NotFoundError,
    NotModifiedError,
    Object,
    PermissionDeniedError,
    PreconditionFailedError,
    QuotaExceededError,
    ServiceClient,
)

pytestmark = pytest.mark.e2e

MiB = 1024 * 1024


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- diagnostics -------------------------------------------------------------------------


def test_health_and_diagnostics(client: ServiceClient) -> None:
    health = client.health()
    assert health.status == "ok" and health.version
    info = client.system_info()
    assert {"version", "durability", "uptime_seconds", "journal", "disk"} <= set(info)
    performance = client.system_performance()
    assert {"window_seconds", "put", "get"} <= set(performance)
    assert "# TYPE" in client.metrics()


def test_health_needs_no_credentials(server: Any) -> None:
    with ServiceClient(server.url) as anonymous:
        assert anonymous.health().status == "ok"
        with pytest.raises(AuthenticationError) as raised:
            anonymous.buckets.list()
    assert raised.value.status == 401 and raised.value.request_id


def test_a_wrong_secret_is_an_authentication_error(server: Any) -> None:
    with (
        ServiceClient(
            base_url=server.url, access_key=server.access_key, secret_key="sk_wrong"
        ) as c,
        pytest.raises(AuthenticationError),
    ):
        c.buckets.list()


# -- buckets -----------------------------------------------------------------------------


def test_bucket_lifecycle(client: ServiceClient, bucket_name: str) -> None:
    created = client.buckets.create(bucket_name, quota_bytes=10 * MiB, tags={"team": "qa"})
    assert created.name == bucket_name and created.quota_bytes == 10 * MiB
    assert created.usage.object_count == 0 and created.tags == {"team": "qa"}
    assert bucket_name in [b.name for b in client.buckets.list()]
    assert client.buckets.get(bucket_name) == client.bucket(bucket_name).info()
    updated = client.buckets.update(bucket_name, quota_bytes=None, versioning_enabled=True)
    assert updated.quota_bytes is None and updated.versioning_enabled
    assert updated.tags == {"team": "qa"}
    with pytest.raises(ConflictError) as raised:
        client.buckets.create(bucket_name)
    assert raised.value.code == "BucketAlreadyExists"
    client.bucket(bucket_name).put("x", b"x")
    with pytest.raises(ConflictError) as raised:
        client.buckets.delete(bucket_name)
    assert raised.value.code == "BucketNotEmpty"
    client.buckets.delete(bucket_name, force=True)
    with pytest.raises(NotFoundError) as missing:
        client.buckets.get(bucket_name)
    assert missing.value.code == "NoSuchBucket"


def test_bucket_handle_updates_and_deletes_itself(client: ServiceClient, bucket_name: str) -> None:
    client.buckets.create(bucket_name)
    handle = client.bucket(bucket_name)
    assert handle.update(tags={"a": "1"}).tags == {"a": "1"}
    handle.delete_bucket()
    with pytest.raises(NotFoundError):
        handle.info()


# -- objects -----------------------------------------------------------------------------

KEYS = ["plain.txt", "with space/and ünïcode €.txt", "a/../b/./c", "q?x=1#frag%20", "🙂"]


@pytest.mark.parametrize("key", KEYS)
def test_any_key_round_trips(bucket: BucketClient, key: str) -> None:
    stored = bucket.put(key, b"payload")
    assert stored.key == key
    with bucket.get(key) as obj:
        assert obj.read() == b"payload"
    assert [o.key for o in bucket.list()] == [key]
    assert bucket.delete(key) is True


def test_put_accepts_every_kind_of_data(bucket: BucketClient, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "file.bin"
    path.write_bytes(b"from a path")
    sources: dict[str, Any] = {
        "bytes": b"raw bytes",
        "bytearray": bytearray(b"a bytearray"),
        "memoryview": memoryview(b"a memoryview"),
        "str": "text é",
        "path": path,
        "file": io.BytesIO(b"a file object"),
        "iterable": iter([b"chunk one, ", b"chunk two"]),
    }
    expected = {
        "bytes": b"raw bytes",
        "bytearray": b"a bytearray",
        "memoryview": b"a memoryview",
        "str": "text é".encode(),
        "path": b"from a path",
        "file": b"a file object",
        "iterable": b"chunk one, chunk two",
    }
    for name, data in sources.items():
        stored = bucket.put(name, data)
        assert stored.size_bytes == len(expected[name]), name
        assert stored.sha256_checksum == sha256(expected[name]), name
        assert bucket.get(name).read() == expected[name], name
    assert bucket.put_file("put-file", str(path)).size_bytes == len(b"from a path")


def test_get_exposes_headers_and_readers(bucket: BucketClient, tmp_path: pathlib.Path) -> None:
    document = {"hello": ["world", 1]}
    data = json.dumps(document).encode()
    bucket.put("doc.json", data, content_type="application/json", metadata={"Origin": "test-suite"})
    with bucket.get("doc.json") as obj:
        meta = obj.metadata
        assert obj.status == 200 and obj.bucket == bucket.name and obj.key == "doc.json"
        assert meta.content_length == len(data) and meta.content_type == "application/json"
        assert meta.etag == meta.sha256 == sha256(data)
        assert meta.accept_ranges == "bytes" and meta.version_id is None
        assert meta.custom_metadata == {"origin": "test-suite"}
        assert isinstance(meta.last_modified, datetime.datetime)
        assert obj.json() == document
    assert bucket.get("doc.json").text() == data.decode()
    target = tmp_path / "copy.json"
    assert bucket.get("doc.json").write_to_file(target) == len(data)
    assert target.read_bytes() == data
    sink = io.BytesIO()
    bucket.get("doc.json").pipe_to(sink)
    assert sink.getvalue() == data
    assert b"".join(bucket.get("doc.json").iter_bytes()) == data
    head = bucket.head("doc.json")
    assert head.content_length == len(data) and head.sha256 == sha256(data)
    assert bucket.exists("doc.json") and not bucket.exists("nope")


def test_ranges_in_all_three_forms(bucket: BucketClient) -> None:
    data = bytes(range(256)) * 4
    bucket.put("r", data)
    for form in (ByteRange(10, 19), (10, 19), "bytes=10-19"):
        with bucket.get_range("r", form) as window:
            assert window.status == 206
            assert window.read() == data[10:20]
            assert window.metadata.content_range is not None
            assert window.metadata.content_range.size == len(data)
    assert bucket.get_range("r", ByteRange(suffix=5)).read() == data[-5:]
    assert bucket.get_range("r", ByteRange(start=1000)).read() == data[1000:]
    assert bucket.get_range("r", (1020, 5000)).read() == data[1020:]
    with pytest.raises(InvalidRangeError) as raised:
        bucket.get_range("r", (5000, 6000))
    assert raised.value.object_size == len(data)


def test_missing_objects_and_conditions(bucket: BucketClient) -> None:
    with pytest.raises(NotFoundError) as raised:
        bucket.get("missing")
    assert raised.value.code == "NoSuchKey"
    assert bucket.delete("missing") is False
    first = bucket.put("c", b"v1")
    with pytest.raises(PreconditionFailedError):
        bucket.put("c", b"v2", if_none_match="*")
    with pytest.raises(PreconditionFailedError):
        bucket.put("c", b"v2", if_match="0" * 64)
    assert bucket.put("c", b"v2", if_match=first.etag).etag == sha256(b"v2")
    with pytest.raises(NotModifiedError):
        bucket.get("c", if_none_match=sha256(b"v2"))
    assert bucket.get("c", if_none_match=first.etag).read() == b"v2"


def test_a_wrong_checksum_is_refused_and_nothing_is_kept(bucket: BucketClient) -> None:
    from service.client import BadRequestError

    with pytest.raises(BadRequestError) as raised:
        bucket.put("bad", iter([b"data"]), checksum="0" * 64)
    assert raised.value.code == "BadDigest"
    assert not bucket.exists("bad")


def test_quota_is_enforced(client: ServiceClient, bucket_name: str) -> None:
    client.buckets.create(bucket_name, quota_bytes=1000)
    handle = client.bucket(bucket_name)
    handle.put("small", b"x" * 600)
    with pytest.raises(QuotaExceededError) as raised:
        handle.put("big", b"x" * 600)
    assert raised.value.status == 413
    with pytest.raises(QuotaExceededError):
        handle.put("streamed", iter([b"x" * 300] * 3))
    assert [o.key for o in handle.list()] == ["small"]
    handle.delete_bucket(force=True)


# -- listing -----------------------------------------------------------------------------


def test_listing_pages_lazily_and_groups_by_delimiter(bucket: BucketClient) -> None:
    keys = [f"logs/{n:02d}" for n in range(7)] + ["photos/a", "photos/b", "top"]
    for key in keys:
        bucket.put(key, key.encode())
    first = bucket.list_page(limit=3)
    assert [o.key for o in first.objects] == sorted(keys)[:3] and first.next_cursor
    second = bucket.list_page(limit=3, cursor=first.next_cursor)
    assert [o.key for o in second.objects] == sorted(keys)[3:6]
    assert [o.key for o in bucket.list(page_size=2)] == sorted(keys)
    assert [o.key for o in bucket.list(prefix="logs/", page_size=3)] == keys[:7]
    grouped = bucket.list_page(delimiter="/")
    assert grouped.common_prefixes == ["logs/", "photos/"]
    assert [o.key for o in grouped.objects] == ["top"]
    lazily = bucket.list(page_size=1)
    assert next(iter(lazily)).key == sorted(keys)[0]


def test_versions_are_listed_and_readable(client: ServiceClient, bucket_name: str) -> None:
    client.buckets.create(bucket_name, versioning_enabled=True)
    handle = client.bucket(bucket_name)
    v1 = handle.put("doc", b"one")
    v2 = handle.put("doc", b"two")
    assert v1.version_id and v2.version_id and v1.version_id != v2.version_id
    assert handle.get("doc", version_id=v1.version_id).read() == b"one"
    assert handle.delete("doc") is True
    with pytest.raises(NotFoundError):
        handle.get("doc")
    versions = list(handle.list_versions(page_size=1))
    assert sum(v.is_delete_marker for v in versions) == 1
    assert {v.version_id for v in versions} >= {v1.version_id, v2.version_id}
    page = handle.list_versions_page(prefix="doc")
    assert page.versions and page.versions[0].is_latest
    assert handle.delete("doc", version_id=v1.version_id) is True
    handle.delete_bucket(force=True)


# -- presigned URLs ----------------------------------------------------------------------


def test_presigned_urls_work_without_credentials(bucket: BucketClient) -> None:
    bucket.put("shared.txt", b"shared")
    get = bucket.presign_get("shared.txt", expires_in=60)
    assert get.method == "GET" and get.expires_in == 60
    assert httpx.get(get.url).content == b"shared"
    head = bucket.presign_head("shared.txt")
    assert httpx.head(head.url).headers["Content-Length"] == "6"
    put = bucket.presign_put("upload.txt", content_type="text/plain")
    answer = httpx.put(put.url, content=b"via url", headers={"Content-Type": "text/plain"})
    assert answer.status_code == 200
    assert bucket.get("upload.txt").read() == b"via url"
    tampered = get.url.replace("shared.txt", "upload.txt")
    assert httpx.get(tampered).status_code == 403
    assert bucket.presign("shared.txt", "GET", 10).expires_in == 10


# -- multipart ---------------------------------------------------------------------------


def test_multipart_session_by_hand(bucket: BucketClient) -> None:
    upload = bucket.create_multipart_upload("mp", content_type="text/plain", metadata={"k": "v"})
    assert upload.upload_id and upload.recommended_part_size > 0
    assert upload.max_parallel_parts >= 1 and upload.expires_at > datetime.datetime.now(
        datetime.UTC
    )
    upload.upload_part(2, b"world")
    first = upload.upload_part(1, b"hello ")
    assert first.etag == sha256(b"hello ") and first.size_bytes == 6
    assert [p.part_number for p in upload.status().parts] == [1, 2]
    assert upload.upload_id in [s.upload_id for s in bucket.list_multipart_uploads()]
    obj = upload.complete()
    assert obj.size_bytes == 11 and obj.sha256_checksum == sha256(b"hello world")
    assert obj.content_type == "text/plain" and obj.custom_metadata == {"k": "v"}
    assert bucket.get("mp").read() == b"hello world"
    doomed = bucket.create_multipart_upload("doomed")
    doomed.upload_part(1, b"x")
    doomed.abort()
    with pytest.raises(NotFoundError) as raised:
        doomed.status()
    assert raised.value.code == "NoSuchUpload"


def test_upload_multipart_from_each_kind_of_source(
    bucket: BucketClient, tmp_path: pathlib.Path
) -> None:
    data = os.urandom(3 * MiB + 12345)
    path = tmp_path / "source.bin"
    path.write_bytes(data)
    chunks = [data[i : i + 70_000] for i in range(0, len(data), 70_000)]
    progress: list[tuple[int, int | None]] = []
    sources: dict[str, Any] = {
        "path": str(path),
        "pathlike": path,
        "file": path.open("rb"),
        "bytes": data,
        "iterable": iter(chunks),
    }
    try:
        for name, source in sources.items():
            obj = bucket.upload_multipart(
                name,
                source,
                part_size=MiB,
                max_parallel=3,
                content_type="application/x-test",
                metadata={"source": name},
                progress=lambda done, total: progress.append((done, total)),
            )
            assert obj.size_bytes == len(data) and obj.sha256_checksum == sha256(data), name
            assert obj.custom_metadata == {"source": name}
            assert bucket.head(name).sha256 == sha256(data)
    finally:
        sources["file"].close()
    assert progress[-1] == (len(data), None)
    assert (len(data), len(data)) in progress


def test_upload_multipart_from_an_async_iterable(server: Any, bucket_name: str) -> None:
    data = os.urandom(2 * MiB + 7)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(data), 100_000):
            yield data[start : start + 100_000]
            await asyncio.sleep(0)

    async def scenario() -> Object:
        async with AsyncServiceClient(server.connection_string) as client:
            await client.buckets.create(bucket_name)
            bucket = client.bucket(bucket_name)
            obj = await bucket.upload_multipart("async", chunks(), part_size=MiB)
            async with await bucket.get("async") as stream:
                assert await stream.read() == data
            await bucket.delete_bucket(force=True)
            return obj

    assert asyncio.run(scenario()).sha256_checksum == sha256(data)


def test_a_kept_upload_resumes_skipping_stored_parts(
    bucket: BucketClient, tmp_path: pathlib.Path
) -> None:
    data = os.urandom(4 * MiB)
    path = tmp_path / "resume.bin"
    path.write_bytes(data)
    upload = bucket.create_multipart_upload("resumed")
    upload.upload_part(1, data[:MiB])
    upload.upload_part(2, data[MiB : 2 * MiB])
    upload.upload_part(3, b"stale bytes")
    progress: list[int] = []
    obj = bucket.upload_multipart(
        "resumed",
        path,
        part_size=MiB,
        upload_id=upload.upload_id,
        progress=lambda done, _: progress.append(done),
    )
    assert obj.sha256_checksum == sha256(data)
    # parts 1 and 2 were skipped at once (reported first), 3 and 4 were uploaded
    assert progress[:2] == [MiB, 2 * MiB] and progress[-1] == 4 * MiB


# -- users, tokens and access keys -------------------------------------------------------


def test_users_tokens_and_access_keys(client: ServiceClient, server: Any, bucket_name: str) -> None:
    username = f"user-{bucket_name}"
    user = client.users.create(username, "correct horse battery", role="user")
    assert user.username == username and user.role == "user" and user.status == "active"
    assert client.users.get(user.user_id) == user
    assert username in [u.username for u in client.users.list()]
    token = client.login(username, "correct horse battery")
    assert token.user.user_id == user.user_id and token.expires_at > datetime.datetime.now(
        datetime.UTC
    )
    with ServiceClient(base_url=server.url, token=token.token) as as_user:
        as_user.buckets.create(bucket_name)
        assert [b.name for b in as_user.buckets.list()] == [bucket_name]
        key = as_user.access_keys.create(name="ci")
        assert key.secret_key and key.access_key_id.startswith("bk_")
    with ServiceClient(
        base_url=server.url, access_key=key.access_key_id, secret_key=key.secret_key
    ) as with_key:
        assert with_key.bucket(bucket_name).put("k", b"v").size_bytes == 1
        listed = client.access_keys.list()
        assert key.access_key_id in [k.access_key_id for k in listed]
        assert all(k.secret_key is None for k in listed)
        revoked = client.access_keys.revoke(key.access_key_id)
        assert revoked.status == "revoked"
        with pytest.raises(AuthenticationError):
            with_key.buckets.list()
    client.access_keys.delete(key.access_key_id)
    disabled = client.users.update(user.user_id, status="disabled")
    assert disabled.status == "disabled"
    with pytest.raises(PermissionDeniedError) as raised:
        client.login(username, "correct horse battery")
    assert raised.value.code == "AccountDisabled"
    client.bucket(bucket_name).delete_bucket(force=True)
    client.users.delete(user.user_id)
    with pytest.raises(NotFoundError):
        client.users.get(user.user_id)


# -- images and videos -------------------------------------------------------------------


def png_bytes(width: int = 40, height: int = 20) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_images_are_transformed_and_optimized(bucket: BucketClient) -> None:
    from PIL import Image

    bucket.put("red.png", png_bytes(), content_type="image/png")
    with bucket.image("red.png", width=10, format="jpeg", quality=80) as small:
        assert small.metadata.content_type == "image/jpeg"
        assert Image.open(io.BytesIO(small.read())).size == (10, 5)
    optimized = bucket.optimize("red.png", width=20, format="webp", target_key="red.webp")
    assert (optimized.key, optimized.width, optimized.height) == ("red.webp", 20, 10)
    assert optimized.source_size_bytes == len(png_bytes())
    assert bucket.get("red.webp").read()[:4] == b"RIFF"


def make_clip(path: pathlib.Path, seconds: int = 2) -> None:
    """A tiny H.264 clip made with PyAV: grey frames growing lighter."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(seconds * 10):
            frame = av.VideoFrame(64, 48, "yuv420p")
            for number, plane in enumerate(frame.planes):
                shade = (index * 10) % 256 if number == 0 else 128  # luma grows lighter
                plane.update(bytes([shade]) * plane.buffer_size)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def test_video_thumbnail_job_and_share(
    client: ServiceClient, bucket: BucketClient, tmp_path: pathlib.Path
) -> None:
    clip = tmp_path / "clip.mp4"
    make_clip(clip)
    bucket.put("clip.mp4", clip, content_type="video/mp4")
    thumb = client.videos.thumbnail(bucket.name, "clip.mp4", at_seconds=0.5, width=32)
    assert thumb.size_bytes > 0 and bucket.exists(thumb.key)
    job = client.videos.create_job(bucket.name, "clip.mp4", formats=["hls"], segment_seconds=1)
    assert job.status in ("queued", "processing", "completed")
    assert job.job_id in [j.job_id for j in client.videos.list_jobs(bucket=bucket.name)]
    done = client.videos.wait_for_job(job.job_id, poll_interval=0.2, timeout=120)
    assert done.status == "completed", done.error
    assert client.videos.get_job(job.job_id).outputs["hls"]
    share = client.videos.create_share(job.job_id, expires_in=300)
    assert share.hls_url is not None
    playlist = httpx.get(share.hls_url)
    assert playlist.status_code == 200 and playlist.text.startswith("#EXTM3U")
    client.videos.revoke_share(share.share_id)
    assert httpx.get(share.hls_url).status_code == 404
    client.videos.cancel_job(job.job_id)
    with pytest.raises(NotFoundError):
        client.videos.get_job(job.job_id)
