"""Request building and answer handling of each operation, without a network (sans-I/O)."""

from __future__ import annotations

import datetime
import hashlib
import io
import pathlib

import pytest

from service.client import (
    UNSET,
    IntegrityError,
    NotFoundError,
    Object,
    Rendition,
    RequestTimeoutError,
)
from service.client import _ops_admin as admin
from service.client import _ops_multipart as multipart
from service.client import _ops_objects as objects
from service.client import _ops_videos as videos
from service.client._flow import Call
from service.client._payload import FileBody, MemoryBody, PathBody, body_from
from tests.client.flowkit import ScriptedDriver, reply

T0 = "2026-11-22T08:41:44.123Z"


def object_json(key: str = "k", sha: str = "0" * 64, **extra: object) -> dict[str, object]:
    return {
        "bucket": "b",
        "key": key,
        "size_bytes": 5,
        "content_type": "text/plain",
        "etag": sha,
        "sha256_checksum": sha,
        "version_id": None,
        "custom_metadata": {},
        "created_at": T0,
        "updated_at": T0,
        **extra,
    }


def session_json(parts: list[dict[str, object]] | None = None) -> dict[str, object]:
    document: dict[str, object] = {
        "upload_id": "up_1",
        "bucket": "b",
        "key": "big",
        "recommended_part_size": 4,
        "max_parallel_parts": 2,
        "expires_at": T0,
        "created_at": T0,
    }
    if parts is not None:
        document["parts"] = parts
    return document


def test_put_of_bytes_sends_its_sha256_metadata_and_content_type() -> None:
    sha = hashlib.sha256(b"hello").hexdigest()
    driver = ScriptedDriver(lambda call: reply(200, object_json(sha=sha)))
    stored = driver.run(
        objects.put_object(
            "b",
            "dir/a b.txt",
            body_from(b"hello"),
            content_type="text/plain",
            metadata={"Color": "blue"},
            checksum=None,
            if_none_match="*",
        )
    )
    (call,) = driver.calls
    assert (call.method, call.path) == ("PUT", "/api/v1/buckets/b/objects/dir/a%20b.txt")
    assert call.headers == {
        "Content-Type": "text/plain",
        "X-Meta-Color": "blue",
        "X-Checksum-Sha256": sha,
        "If-None-Match": "*",
    }
    assert call.body == MemoryBody(b"hello")
    assert isinstance(stored, Object) and stored.sha256_checksum == sha


def test_put_of_a_stream_sends_no_checksum_unless_given() -> None:
    driver = ScriptedDriver(lambda call: reply(200, object_json()))
    driver.run(
        objects.put_object(
            "b", "k", body_from(iter([b"x"])), content_type=None, metadata=None, checksum=None
        )
    )
    assert "X-Checksum-Sha256" not in driver.calls[0].headers
    assert "Content-Type" not in driver.calls[0].headers


def test_put_detects_a_server_that_stored_other_bytes() -> None:
    driver = ScriptedDriver(lambda call: reply(200, object_json(sha="f" * 64)))
    with pytest.raises(IntegrityError):
        driver.run(
            objects.put_object(
                "b", "k", body_from(b"hello"), content_type=None, metadata=None, checksum=None
            )
        )


@pytest.mark.parametrize(
    ("metadata", "content_type"),
    [
        ({"bad name": "x"}, None),
        ({"ok": "line\nbreak"}, None),
        ({"ok": "nul\x00"}, None),
        ({}, "a\r"),
    ],
)
def test_header_values_that_cannot_travel_are_refused_before_sending(
    metadata: dict[str, str], content_type: str | None
) -> None:
    driver = ScriptedDriver(lambda call: reply(200, object_json()))
    with pytest.raises(ValueError):
        driver.run(
            objects.put_object(
                "b",
                "k",
                body_from(b"x"),
                content_type=content_type,
                metadata=metadata,
                checksum=None,
            )
        )
    assert driver.calls == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"raw", MemoryBody(b"raw")),
        (bytearray(b"ba"), MemoryBody(b"ba")),
        (memoryview(b"mv"), MemoryBody(b"mv")),
        ("text é", MemoryBody("text é".encode())),
        (pathlib.Path("/tmp/x"), PathBody("/tmp/x")),
    ],
)
def test_put_accepts_every_in_memory_kind_and_paths(data: object, expected: object) -> None:
    assert body_from(data) == expected


def test_get_streams_and_asks_for_identity_encoding_and_the_range() -> None:
    driver = ScriptedDriver(lambda call: reply(206))
    since = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    driver.run(
        objects.get_object(
            "b",
            "k",
            byte_range=(0, 9),
            version_id="v1",
            if_none_match="abc",
            if_modified_since=since,
        )
    )
    (call,) = driver.calls
    assert call.stream and call.method == "GET"
    assert call.params == {"version_id": "v1"}
    assert call.headers == {
        "Accept-Encoding": "identity",
        "Range": "bytes=0-9",
        "If-None-Match": '"abc"',
        "If-Modified-Since": "Fri, 02 Jan 2026 03:04:05 GMT",
    }


def test_delete_is_true_when_deleted_and_false_when_the_key_was_missing() -> None:
    assert ScriptedDriver(lambda call: reply(204)).run(objects.delete_object("b", "k")) is True
    missing = NotFoundError("no", status=404, code="NoSuchKey")
    assert ScriptedDriver(lambda call: missing).run(objects.delete_object("b", "k")) is False


def test_delete_in_a_missing_bucket_is_an_error() -> None:
    missing_bucket = NotFoundError("no", status=404, code="NoSuchBucket")
    with pytest.raises(NotFoundError):
        ScriptedDriver(lambda call: missing_bucket).run(objects.delete_object("b", "k"))


def test_exists_is_a_head_that_answers_false_on_404() -> None:
    driver = ScriptedDriver(lambda call: NotFoundError("no", status=404))
    assert driver.run(objects.object_exists("b", "k")) is False
    assert driver.calls[0].method == "HEAD"
    assert ScriptedDriver(lambda call: reply(200)).run(objects.object_exists("b", "k")) is True


def test_listing_sends_only_the_given_parameters() -> None:
    page = {"objects": [object_json("a")], "common_prefixes": ["d/"], "next_cursor": None}
    driver = ScriptedDriver(lambda call: reply(200, page))
    result = driver.run(objects.list_objects("b", prefix="p/", delimiter="/", limit=10))
    assert driver.calls[0].path == "/api/v1/buckets/b/objects"
    assert driver.calls[0].params == {"prefix": "p/", "delimiter": "/", "limit": "10"}
    assert result.common_prefixes == ["d/"] and result.objects[0].key == "a"


@pytest.mark.parametrize("limit", [0, 1001, -5])
def test_listing_limits_outside_the_contract_are_refused(limit: int) -> None:
    with pytest.raises(ValueError):
        ScriptedDriver(lambda call: reply(200)).run(objects.list_objects("b", limit=limit))


def test_bucket_update_distinguishes_clearing_from_leaving_alone() -> None:
    bucket = {
        "name": "b",
        "owner": "u",
        "quota_bytes": None,
        "versioning_enabled": False,
        "tags": {},
        "created_at": T0,
        "updated_at": T0,
        "usage": {"object_count": 0, "size_bytes": 0},
    }
    driver = ScriptedDriver(lambda call: reply(200, bucket))
    driver.run(objects.update_bucket("b", quota_bytes=None))
    driver.run(objects.update_bucket("b", tags={"a": "1"}, versioning_enabled=True))
    assert [c.json for c in driver.calls] == [
        {"quota_bytes": None},
        {"versioning_enabled": True, "tags": {"a": "1"}},
    ]
    assert driver.calls[0].method == "PATCH"
    with pytest.raises(ValueError):
        driver.run(objects.update_bucket("b", quota_bytes=UNSET))


def test_bucket_delete_sends_force_only_when_asked() -> None:
    driver = ScriptedDriver(lambda call: reply(204))
    driver.run(objects.delete_bucket("b", force=False))
    driver.run(objects.delete_bucket("b", force=True))
    assert [c.params for c in driver.calls] == [{}, {"force": "true"}]


def test_presign_builds_the_contract_request_and_validates_it() -> None:
    answer = {"url": "http://h/x", "method": "PUT", "expires_at": T0, "expires_in": 60}
    driver = ScriptedDriver(lambda call: reply(200, answer))
    url = driver.run(
        objects.presign("b", "k", method="put", expires_in=60, content_type="text/plain")
    )
    assert driver.calls[0].json == {
        "bucket": "b",
        "key": "k",
        "method": "PUT",
        "expires_in": 60,
        "content_type": "text/plain",
    }
    assert url.url == "http://h/x"
    for bad in ({"method": "DELETE"}, {"expires_in": 0}, {"expires_in": 604_801}):
        with pytest.raises(ValueError):
            driver.run(objects.presign("b", "k", **bad))  # type: ignore[arg-type]


def test_image_transform_parameters_are_query_strings() -> None:
    driver = ScriptedDriver(lambda call: reply(200))
    driver.run(objects.image("b", "a b.jpg", width=64, fit="cover", enlarge=True))
    (call,) = driver.calls
    assert call.path == "/api/v1/buckets/b/images/a%20b.jpg" and call.stream
    assert call.params == {"width": "64", "fit": "cover", "enlarge": "true"}


def test_login_users_and_access_keys_hit_their_endpoints() -> None:
    user = {
        "user_id": "u 1",
        "username": "a",
        "role": "user",
        "status": "active",
        "created_at": T0,
        "updated_at": T0,
    }
    driver = ScriptedDriver(lambda call: reply(200, user))
    driver.run(admin.update_user("u 1", status="disabled"))
    assert (driver.calls[-1].method, driver.calls[-1].path) == ("PATCH", "/api/v1/users/u%201")
    assert driver.calls[-1].json == {"status": "disabled"}
    driver = ScriptedDriver(lambda call: reply(200, {"token": "t", "expires_at": T0, "user": user}))
    assert driver.run(admin.login("a", "pw")).user.username == "a"
    assert driver.calls[0].json == {"username": "a", "password": "pw"}


def test_video_job_request_carries_renditions() -> None:
    job = {
        "job_id": "j",
        "bucket": "b",
        "key": "v",
        "status": "queued",
        "progress": 0,
        "params": {},
        "output_prefix": "o/",
        "outputs": {},
        "error": None,
        "created_at": T0,
        "updated_at": T0,
    }
    driver = ScriptedDriver(lambda call: reply(202, job))
    driver.run(
        videos.create_job(
            "b", "v", formats=["hls"], renditions=[Rendition(360, 800)], segment_seconds=2
        )
    )
    assert driver.calls[0].json == {
        "bucket": "b",
        "key": "v",
        "formats": ["hls"],
        "renditions": [{"height": 360, "video_bitrate_kbps": 800}],
        "segment_seconds": 2,
    }


def test_waiting_for_a_job_polls_until_it_finishes() -> None:
    statuses = iter(["queued", "processing", "completed"])
    base = {
        "job_id": "j",
        "bucket": "b",
        "key": "v",
        "progress": 0.5,
        "params": {},
        "output_prefix": "o/",
        "outputs": {},
        "error": None,
        "created_at": T0,
        "updated_at": T0,
    }
    driver = ScriptedDriver(lambda call: reply(200, {**base, "status": next(statuses)}))
    job = driver.run(videos.wait_for_job("j", poll_interval=0.25, timeout=10))
    assert job.status == "completed" and driver.sleeps == [0.25, 0.25]


def test_waiting_for_a_job_gives_up_after_the_timeout() -> None:
    base = {
        "job_id": "j",
        "bucket": "b",
        "key": "v",
        "status": "processing",
        "progress": 0.5,
        "params": {},
        "output_prefix": "o/",
        "outputs": {},
        "error": None,
        "created_at": T0,
        "updated_at": T0,
    }
    driver = ScriptedDriver(lambda call: reply(200, base))
    with pytest.raises(RequestTimeoutError):
        driver.run(videos.wait_for_job("j", poll_interval=1.0, timeout=3))
    assert len(driver.calls) == 4 and sum(driver.sleeps) == 3.0


def test_part_upload_sends_part_number_and_checksum() -> None:
    sha = hashlib.sha256(b"part").hexdigest()
    driver = ScriptedDriver(
        lambda call: reply(200, {"part_number": 3, "etag": sha, "size_bytes": 4})
    )
    part = driver.run(multipart.upload_part("up 1", 3, body_from(b"part")))
    (call,) = driver.calls
    assert (call.method, call.path) == ("PUT", "/api/v1/multipart/up%201/part")
    assert call.params == {"partNumber": "3"}
    assert call.headers == {"X-Checksum-Sha256": sha}
    assert part.etag == sha


@pytest.mark.parametrize("number", [0, 10_001])
def test_part_numbers_outside_the_contract_are_refused(number: int) -> None:
    with pytest.raises(ValueError):
        ScriptedDriver(lambda call: reply(200)).run(
            multipart.upload_part("u", number, body_from(b"x"))
        )


def test_complete_without_parts_uses_every_stored_part_in_order() -> None:
    parts = [
        {"part_number": 2, "etag": "e2", "size_bytes": 1},
        {"part_number": 1, "etag": "e1", "size_bytes": 1},
    ]

    def respond(call: Call) -> object:
        if call.method == "GET":
            return reply(200, session_json(parts))
        return reply(200, object_json("big"))

    driver = ScriptedDriver(respond)  # type: ignore[arg-type]
    driver.run(multipart.complete("up_1", None))
    assert driver.calls[-1].json == {
        "parts": [{"part_number": 1, "etag": "e1"}, {"part_number": 2, "etag": "e2"}]
    }


def test_file_objects_are_described_from_their_current_position() -> None:
    file = io.BytesIO(b"0123456789")
    file.seek(4)
    body = body_from(file)
    assert isinstance(body, FileBody) and body.start == 4
    with pytest.raises(TypeError):
        body_from(io.StringIO("text"))
    with pytest.raises(TypeError):
        body_from(12345)
