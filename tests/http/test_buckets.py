"""Black-box tests of the Buckets section over HTTP."""

from __future__ import annotations

import re

import httpx
import pytest

RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["code"] == code
    assert body["error"]["request_id"] == response.headers["X-Request-Id"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_create_get_and_list_bucket(api: httpx.Client, bucket_name: str) -> None:
    created = api.post("/buckets", json={"name": bucket_name, "tags": {"team": "media"}})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["name"] == bucket_name
    assert body["versioning_enabled"] is False
    assert body["quota_bytes"] is None
    assert body["tags"] == {"team": "media"}
    assert body["usage"] == {"object_count": 0, "size_bytes": 0}
    assert RFC3339_MS.match(body["created_at"]) and RFC3339_MS.match(body["updated_at"])
    assert body["owner"].startswith("u_")
    fetched = api.get(f"/buckets/{bucket_name}")
    assert fetched.status_code == 200 and fetched.json() == body
    names = [bucket["name"] for bucket in api.get("/buckets").json()["buckets"]]
    assert bucket_name in names


def test_duplicate_bucket_is_conflict(api: httpx.Client, bucket_name: str) -> None:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    assert_error(api.post("/buckets", json={"name": bucket_name}), 409, "BucketAlreadyExists")


@pytest.mark.parametrize(
    "name",
    [
        "ab",
        "a" * 64,
        "Upper",
        "-start",
        "end-",
        "two..dots",
        "192.168.1.1",
        "under_score",
        "sp ace",
    ],
)
def test_invalid_bucket_names_are_refused(api: httpx.Client, name: str) -> None:
    assert_error(api.post("/buckets", json={"name": name}), 400, "InvalidBucketName")
    assert name not in [bucket["name"] for bucket in api.get("/buckets").json()["buckets"]]


def test_malformed_json_is_refused(api: httpx.Client) -> None:
    response = api.post(
        "/buckets", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "MalformedJSON")
    assert_error(api.post("/buckets", content=b"[1,2]"), 400, "MalformedJSON")


def test_bad_field_types_are_invalid_argument(api: httpx.Client, bucket_name: str) -> None:
    assert_error(
        api.post("/buckets", json={"name": bucket_name, "quota_bytes": -1}), 400, "InvalidArgument"
    )
    assert_error(
        api.post("/buckets", json={"name": bucket_name, "versioning_enabled": "yes"}),
        400,
        "InvalidArgument",
    )
    assert_error(api.get(f"/buckets/{bucket_name}"), 404, "NoSuchBucket")


def test_patch_bucket_changes_fields(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    patched = api.patch(
        f"/buckets/{bucket_name}",
        json={"quota_bytes": 1000, "versioning_enabled": True, "tags": {"a": "b"}},
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert (body["quota_bytes"], body["versioning_enabled"], body["tags"]) == (
        1000,
        True,
        {"a": "b"},
    )
    cleared = api.patch(f"/buckets/{bucket_name}", json={"quota_bytes": None})
    assert cleared.json()["quota_bytes"] is None
    assert cleared.json()["versioning_enabled"] is True


def test_missing_bucket_is_404_everywhere(api: httpx.Client) -> None:
    for response in (
        api.get("/buckets/no-such-bucket-here"),
        api.patch("/buckets/no-such-bucket-here", json={"tags": {}}),
        api.delete("/buckets/no-such-bucket-here"),
        api.get("/buckets/no-such-bucket-here/objects"),
        api.put("/buckets/no-such-bucket-here/objects/k", content=b"x"),
        api.get("/buckets/no-such-bucket-here/objects/k"),
    ):
        assert_error(response, 404, "NoSuchBucket")


def test_delete_non_empty_bucket_needs_force(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    assert api.put(f"/buckets/{bucket_name}/objects/a", content=b"hello").status_code == 200
    assert_error(api.delete(f"/buckets/{bucket_name}"), 409, "BucketNotEmpty")
    assert api.get(f"/buckets/{bucket_name}/objects/a").content == b"hello"
    assert api.delete(f"/buckets/{bucket_name}", params={"force": "true"}).status_code == 204
    assert_error(api.get(f"/buckets/{bucket_name}"), 404, "NoSuchBucket")


def test_empty_bucket_deletes_without_force(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    assert api.delete(f"/buckets/{bucket_name}").status_code == 204
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201


def test_usage_counts_objects_and_bytes(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    api.put(f"/buckets/{bucket_name}/objects/a", content=b"12345")
    api.put(f"/buckets/{bucket_name}/objects/b", content=b"123")
    api.put(f"/buckets/{bucket_name}/objects/a", content=b"1")
    usage = api.get(f"/buckets/{bucket_name}").json()["usage"]
    assert usage == {"object_count": 2, "size_bytes": 4}


def test_unknown_path_and_wrong_method_use_error_shape(api: httpx.Client) -> None:
    assert_error(api.get("/nothing-here"), 404, "NotFound")
    assert_error(api.put("/buckets", content=b"{}"), 405, "MethodNotAllowed")


def test_request_id_is_echoed_or_generated(api: httpx.Client) -> None:
    echoed = api.get("/buckets", headers={"X-Request-Id": "my-request-42"})
    assert echoed.headers["X-Request-Id"] == "my-request-42"
    generated = api.get("/buckets")
    assert generated.headers["X-Request-Id"]
    assert api.get("/buckets").headers["X-Request-Id"] != generated.headers["X-Request-Id"]
