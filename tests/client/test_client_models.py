"""Typed results parsed from the contract's JSON documents and headers."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import httpx
import pytest

from service.client import (
    AccessKey,
    Bucket,
    ContentRange,
    Job,
    ListPage,
    Object,
    ObjectHeaders,
    OptimizedImage,
    PresignedUrl,
    Session,
    Share,
    Token,
    UnexpectedResponseError,
    User,
    VersionPage,
)
from service.client._models import parse

T0 = "2026-11-22T08:41:44.123Z"
MOMENT = datetime.datetime(2026, 11, 22, 8, 41, 44, 123000, tzinfo=datetime.UTC)
SHA = "a" * 64

OBJECT = {
    "bucket": "photos",
    "key": "cats/tom.jpg",
    "size_bytes": 1234,
    "content_type": "image/jpeg",
    "etag": SHA,
    "sha256_checksum": SHA,
    "version_id": None,
    "custom_metadata": {"color": "grey"},
    "created_at": T0,
    "updated_at": T0,
    "retention": None,
    "legal_hold": False,
}
USER = {
    "user_id": "u_1",
    "username": "alice",
    "role": "user",
    "status": "active",
    "created_at": T0,
    "updated_at": T0,
}


def _field_names(cls: type) -> set[str]:
    return {field.name for field in dataclasses.fields(cls)}


def test_object_fields_carry_the_contract_names_and_values() -> None:
    obj = Object.from_json(OBJECT)
    assert _field_names(Object) == set(OBJECT)
    assert obj.key == "cats/tom.jpg" and obj.size_bytes == 1234
    assert obj.custom_metadata == {"color": "grey"}
    assert obj.created_at == MOMENT and obj.created_at.tzinfo is not None
    assert obj.retention is None and obj.legal_hold is False
    locked = Object.from_json(
        {**OBJECT, "retention": {"mode": "compliance", "retain_until": T0}, "legal_hold": True}
    )
    assert locked.retention is not None and locked.retention.retain_until == MOMENT
    assert (locked.retention.mode, locked.legal_hold) == ("compliance", True)


def test_bucket_parses_with_its_usage_and_optional_quota() -> None:
    document = {
        "name": "photos",
        "owner": "u_1",
        "quota_bytes": None,
        "versioning_enabled": True,
        "tags": {"team": "a"},
        "created_at": T0,
        "updated_at": T0,
        "usage": {"object_count": 3, "size_bytes": 99},
        "object_lock_enabled": False,
        "default_retention": None,
    }
    bucket = Bucket.from_json(document)
    assert _field_names(Bucket) == set(document)
    assert bucket.quota_bytes is None and bucket.versioning_enabled
    assert (bucket.usage.object_count, bucket.usage.size_bytes) == (3, 99)
    assert Bucket.from_json({**document, "quota_bytes": 10}).quota_bytes == 10
    locked = Bucket.from_json(
        {
            **document,
            "object_lock_enabled": True,
            "default_retention": {"mode": "governance", "days": 0.5},
        }
    )
    assert locked.object_lock_enabled and locked.default_retention is not None
    assert (locked.default_retention.mode, locked.default_retention.days) == ("governance", 0.5)


def test_list_page_and_version_page_parse_their_items() -> None:
    page = ListPage.from_json(
        {"objects": [OBJECT], "common_prefixes": ["cats/"], "next_cursor": "c1"}
    )
    assert [o.key for o in page.objects] == ["cats/tom.jpg"]
    assert page.common_prefixes == ["cats/"] and page.next_cursor == "c1"
    marker = {
        **OBJECT,
        "etag": None,
        "sha256_checksum": None,
        "content_type": None,
        "size_bytes": 0,
        "is_latest": True,
        "is_delete_marker": True,
    }
    versions = VersionPage.from_json({"versions": [marker], "next_cursor": None})
    assert versions.versions[0].is_delete_marker and versions.versions[0].etag == ""
    assert versions.next_cursor is None


def test_session_parses_with_and_without_parts() -> None:
    document = {
        "upload_id": "up_1",
        "bucket": "b",
        "key": "k",
        "recommended_part_size": 8 << 20,
        "max_parallel_parts": 4,
        "expires_at": T0,
        "created_at": T0,
    }
    assert Session.from_json(document).parts == []
    parts = [{"part_number": 1, "etag": SHA, "size_bytes": 5}]
    session = Session.from_json({**document, "parts": parts})
    assert session.parts[0].part_number == 1 and session.parts[0].etag == SHA
    assert session.expires_at == MOMENT


def test_access_key_keeps_the_secret_out_of_its_repr() -> None:
    key = AccessKey.from_json(
        {
            "access_key_id": "bk_1",
            "user_id": "u_1",
            "name": "ci",
            "status": "active",
            "created_at": T0,
            "last_used_at": None,
            "secret_key": "sk_secret",
        }
    )
    assert key.secret_key == "sk_secret" and key.last_used_at is None
    assert "sk_secret" not in repr(key)


def test_login_token_keeps_the_token_out_of_its_repr() -> None:
    token = Token.from_json({"token": "tok.secret", "expires_at": T0, "user": USER})
    assert token.user == User.from_json(USER)
    assert "tok.secret" not in repr(token)


def test_job_share_presigned_url_and_optimized_image_parse() -> None:
    job = Job.from_json(
        {
            "job_id": "j1",
            "bucket": "b",
            "key": "v.mp4",
            "status": "completed",
            "progress": 1,
            "params": {"formats": ["hls"]},
            "output_prefix": "v.mp4.out/",
            "outputs": {"hls": "v.mp4.out/master.m3u8", "dash": None},
            "error": None,
            "created_at": T0,
            "updated_at": T0,
        }
    )
    assert job.finished and job.outputs == {"hls": "v.mp4.out/master.m3u8"}
    share = Share.from_json(
        {
            "share_id": "s1",
            "token": "t",
            "expires_at": T0,
            "hls_url": "http://h/x.m3u8",
            "dash_url": None,
        }
    )
    assert share.hls_url == "http://h/x.m3u8" and share.dash_url is None
    url = PresignedUrl.from_json(
        {"url": "http://h/p?X-Signature=1", "method": "GET", "expires_at": T0, "expires_in": 60}
    )
    assert url.expires_in == 60 and url.expires_at == MOMENT
    image = OptimizedImage.from_json(
        {
            "bucket": "b",
            "source_key": "a.jpg",
            "key": "a.webp",
            "format": "webp",
            "width": 10,
            "height": 5,
            "size_bytes": 100,
            "source_size_bytes": 1000,
            "sha256_checksum": SHA,
            "content_type": "image/webp",
        }
    )
    assert (image.width, image.height, image.format) == (10, 5, "webp")


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    assert Object.from_json({**OBJECT, "storage_class": "cold"}) == Object.from_json(OBJECT)


@pytest.mark.parametrize(
    "document",
    [
        {k: v for k, v in OBJECT.items() if k != "key"},
        {**OBJECT, "size_bytes": "many"},
        {**OBJECT, "created_at": "yesterday"},
        ["not", "an", "object"],
    ],
)
def test_a_malformed_document_is_an_unexpected_response(document: Any) -> None:
    with pytest.raises(UnexpectedResponseError):
        parse(Object.from_json, document)


def test_object_headers_parse_every_field() -> None:
    headers = httpx.Headers(
        {
            "Content-Length": "10",
            "Content-Type": "text/plain; charset=utf-8",
            "ETag": f'"{SHA}"',
            "X-Checksum-Sha256": SHA,
            "Last-Modified": "Sun, 22 Nov 2026 08:41:44 GMT",
            "Accept-Ranges": "bytes",
            "Content-Range": "bytes 10-19/100",
            "X-Version-Id": "v_7",
            "X-Meta-Color": "blue",
            "x-meta-Shape": "round",
        }
    )
    parsed = ObjectHeaders.from_headers(headers)
    assert parsed.content_length == 10 and parsed.size == 100
    assert parsed.etag == SHA and parsed.sha256 == SHA
    assert parsed.last_modified == MOMENT.replace(microsecond=0)
    assert parsed.accept_ranges == "bytes"
    assert parsed.content_range == ContentRange(10, 19, 100)
    assert parsed.version_id == "v_7"
    assert parsed.custom_metadata == {"color": "blue", "shape": "round"}


def test_object_headers_of_an_unversioned_object_have_no_version() -> None:
    parsed = ObjectHeaders.from_headers(httpx.Headers({"X-Version-Id": "null"}))
    assert parsed.version_id is None and parsed.content_length is None
    assert parsed.custom_metadata == {}
