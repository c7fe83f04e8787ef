"""Server behaviours the OpenAPI document and schemathesis showed wrong, now fixed, over HTTP.

Query values are taken as given: Tornado's default strips whitespace, so a listing by the
prefix " a" listed the keys under "a", a delimiter " " meant no delimiter, and
``?bucket=%20`` was "missing" (400) instead of a bucket that does not exist (404).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.serverproc import ServerProcess


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    server = ServerProcess(tmp_path_factory.mktemp("found") / "data")
    server.start()
    with server.client() as client:
        yield client
    server.stop()


@pytest.fixture(scope="module")
def spaced(api: httpx.Client) -> str:
    bucket = "spaced-keys"
    assert api.post("/buckets", json={"name": bucket}).status_code == 201
    for key in (" a1", "a2", "x y/z", "x y/w"):
        assert api.put(f"/buckets/{bucket}/objects/{key}", content=b"1").status_code == 200
    return bucket


def test_a_prefix_keeps_its_leading_space(api: httpx.Client, spaced: str) -> None:
    listing = api.get(f"/buckets/{spaced}/objects", params={"prefix": " a"}).json()
    assert [item["key"] for item in listing["objects"]] == [" a1"]
    versions = api.get(f"/buckets/{spaced}/versions", params={"prefix": " a"}).json()
    assert [item["key"] for item in versions["versions"]] == [" a1"]


def test_a_space_is_a_delimiter(api: httpx.Client, spaced: str) -> None:
    listing = api.get(f"/buckets/{spaced}/objects", params={"delimiter": " "}).json()
    assert listing["common_prefixes"] == [" ", "x "]
    assert [item["key"] for item in listing["objects"]] == ["a2"]


def test_a_blank_bucket_is_a_bucket_that_does_not_exist(api: httpx.Client) -> None:
    uploads = api.get("/multipart", params={"bucket": " "})
    assert uploads.status_code == 404
    assert uploads.json()["error"]["code"] == "NoSuchBucket"
    assert api.get("/multipart", params={"bucket": ""}).status_code == 400


def test_a_blank_job_status_is_refused(api: httpx.Client) -> None:
    jobs = api.get("/videos/jobs", params={"status": " "})
    assert jobs.status_code == 400
    assert jobs.json()["error"]["code"] == "InvalidArgument"
    assert api.get("/videos/jobs", params={"status": ""}).status_code == 200
