"""Listing (prefix, delimiter, pages, cursors) and versioning over HTTP."""

from __future__ import annotations

import httpx
import pytest

from tests.http.test_buckets import assert_error
from tests.http.test_objects import url


@pytest.fixture
def bucket(api: httpx.Client, bucket_name: str) -> str:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    return bucket_name


KEYS = ["a", "b/1", "b/2", "b/c/3", "c", "d/1", "d/2", "e"]


def list_all(api: httpx.Client, bucket: str, **params: str | int) -> tuple[list[str], list[str]]:
    keys: list[str] = []
    prefixes: list[str] = []
    cursor = None
    for _ in range(100):
        query = dict(params)
        if cursor:
            query["cursor"] = cursor
        page = api.get(f"/buckets/{bucket}/objects", params=query)
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["objects"]) + len(body["common_prefixes"]) <= int(params.get("limit", 1000))
        keys += [item["key"] for item in body["objects"]]
        prefixes += body["common_prefixes"]
        cursor = body["next_cursor"]
        if cursor is None:
            return keys, prefixes
    raise AssertionError("listing did not end")


def test_listing_pages_and_delimiters(api: httpx.Client, bucket: str) -> None:
    for key in KEYS:
        api.put(url(bucket, key), content=key.encode())
    for limit in (1, 2, 3, 1000):
        assert list_all(api, bucket, limit=limit) == (KEYS, [])
        assert list_all(api, bucket, limit=limit, delimiter="/") == (["a", "c", "e"], ["b/", "d/"])
        assert list_all(api, bucket, limit=limit, prefix="b/") == (["b/1", "b/2", "b/c/3"], [])
        assert list_all(api, bucket, limit=limit, prefix="b/", delimiter="/") == (
            ["b/1", "b/2"],
            ["b/c/"],
        )


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "abc"])
def test_bad_limit_is_invalid_argument(api: httpx.Client, bucket: str, limit: str) -> None:
    assert_error(
        api.get(f"/buckets/{bucket}/objects", params={"limit": limit}), 400, "InvalidArgument"
    )


def test_garbage_cursor_is_invalid_argument(api: httpx.Client, bucket: str) -> None:
    assert_error(
        api.get(f"/buckets/{bucket}/objects", params={"cursor": "!!!"}), 400, "InvalidArgument"
    )


def test_versioning_keeps_versions_and_delete_markers(api: httpx.Client, bucket: str) -> None:
    api.patch(f"/buckets/{bucket}", json={"versioning_enabled": True})
    first = api.put(url(bucket, "v"), content=b"one").json()
    second = api.put(url(bucket, "v"), content=b"two").json()
    assert (
        first["version_id"] and second["version_id"] and first["version_id"] != second["version_id"]
    )
    assert api.get(url(bucket, "v")).content == b"two"
    old = api.get(url(bucket, "v"), params={"version_id": first["version_id"]})
    assert old.content == b"one" and old.headers["X-Version-Id"] == first["version_id"]
    assert api.get(f"/buckets/{bucket}").json()["usage"] == {"object_count": 2, "size_bytes": 6}

    assert api.delete(url(bucket, "v")).status_code == 204
    assert_error(api.get(url(bucket, "v")), 404, "NoSuchKey")
    assert api.get(f"/buckets/{bucket}/objects").json()["objects"] == []
    versions = api.get(f"/buckets/{bucket}/versions").json()["versions"]
    assert [(item["is_latest"], item["is_delete_marker"]) for item in versions] == [
        (True, True),
        (False, False),
        (False, False),
    ]
    marker = versions[0]["version_id"]
    assert api.delete(url(bucket, "v"), params={"version_id": marker}).status_code == 204
    assert api.get(url(bucket, "v")).content == b"two"
    assert (
        api.delete(url(bucket, "v"), params={"version_id": second["version_id"]}).status_code == 204
    )
    assert api.get(url(bucket, "v")).content == b"one"
    assert_error(
        api.get(url(bucket, "v"), params={"version_id": second["version_id"]}), 404, "NoSuchVersion"
    )
    assert api.get(f"/buckets/{bucket}").json()["usage"] == {"object_count": 1, "size_bytes": 3}


def test_version_listing_pages(api: httpx.Client, bucket: str) -> None:
    api.patch(f"/buckets/{bucket}", json={"versioning_enabled": True})
    expected = []
    for key in ("k1", "k2"):
        for round_ in range(3):
            expected.append(
                (key, api.put(url(bucket, key), content=f"{round_}".encode()).json()["version_id"])
            )
    seen = []
    cursor = None
    while True:
        params: dict[str, str | int] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        body = api.get(f"/buckets/{bucket}/versions", params=params).json()
        seen += [(item["key"], item["version_id"]) for item in body["versions"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(expected)
    assert len(seen) == len(set(seen))
