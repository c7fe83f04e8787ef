"""Lifecycle rules over HTTP: the rules document, each action with fractional days, prefixes,
versioned and unversioned buckets, the run endpoint and the background pass.

Days are fractions so the tests stay fast: ``TINY`` (0.00001 days) is 0.864 s. A rule is
first stored with a long threshold to show nothing young is touched, then with ``TINY``.
One server per module; every test removes its bucket (and so its rules) when it ends, since
a pass applies the rules of every bucket.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.serverproc import ServerProcess

TINY = 0.00001
"""0.864 seconds, in days."""
PAST_TINY = 1.0
"""Seconds to wait so that anything written before is older than ``TINY``."""


@pytest.fixture(scope="module")
def lc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("lifecycle") / "data")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def api(lc_server: ServerProcess) -> Iterator[httpx.Client]:
    with lc_server.client() as client:
        yield client


@pytest.fixture
def make_bucket(api: httpx.Client, bucket_name: str) -> Iterator[Callable[[bool], str]]:
    made: list[str] = []

    def make(versioned: bool = False) -> str:
        name = f"{bucket_name}-{len(made)}"
        assert api.post("/buckets", json={"name": name}).status_code == 201
        if versioned:
            api.patch(f"/buckets/{name}", json={"versioning_enabled": True})
        made.append(name)
        return name

    yield make
    for name in made:
        api.delete(f"/buckets/{name}", params={"force": "true"})


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key)}"


def put_rules(api: httpx.Client, bucket: str, *rules: dict[str, object]) -> httpx.Response:
    return api.put(f"/buckets/{bucket}/lifecycle", json={"rules": list(rules)})


def run_pass(api: httpx.Client) -> dict[str, int]:
    response = api.post("/system/lifecycle/run")
    assert response.status_code == 200, response.text
    counts = response.json()
    assert set(counts) == {"expired", "noncurrent_removed", "uploads_aborted"}
    return counts  # type: ignore[no-any-return]


def keys(api: httpx.Client, bucket: str) -> list[str]:
    return [o["key"] for o in api.get(f"/buckets/{bucket}/objects").json()["objects"]]


def versions(api: httpx.Client, bucket: str) -> list[tuple[str, bool, bool]]:
    listed = api.get(f"/buckets/{bucket}/versions").json()["versions"]
    return [(v["key"], v["is_latest"], v["is_delete_marker"]) for v in listed]


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


# -- the rules document ----------------------------------------------------------------------


def test_rules_are_stored_with_defaults_read_back_and_removed(
    api: httpx.Client, make_bucket: Callable[[bool], str]
) -> None:
    bucket = make_bucket(False)
    assert api.get(f"/buckets/{bucket}/lifecycle").json() == {"rules": []}
    stored = put_rules(api, bucket, {"id": "logs", "prefix": "logs/", "expire_after_days": 7.5})
    assert stored.status_code == 200, stored.text
    expected = {
        "rules": [
            {
                "id": "logs",
                "prefix": "logs/",
                "enabled": True,
                "expire_after_days": 7.5,
                "noncurrent_expire_after_days": None,
                "abort_multipart_after_days": None,
            }
        ]
    }
    assert stored.json() == expected
    assert api.get(f"/buckets/{bucket}/lifecycle").json() == expected
    assert api.delete(f"/buckets/{bucket}/lifecycle").status_code == 204
    assert api.get(f"/buckets/{bucket}/lifecycle").json() == {"rules": []}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"rules": [{"id": "a"}]}, "at least one"),
        ({"rules": [{"id": "a", "expire_after_days": 0}]}, "positive"),
        ({"rules": [{"id": "a", "expire_after_days": -1}]}, "positive"),
        ({"rules": [{"id": "a", "expire_after_days": "1"}]}, "positive"),
        ({"rules": [{"id": "a", "expire_after_days": True}]}, "positive"),
        ({"rules": [{"expire_after_days": 1}]}, "id"),
        ({"rules": [{"id": "a", "expire_after_days": 1, "colour": "red"}]}, "unknown"),
        ({"rules": [{"id": "a", "expire_after_days": 1, "enabled": "yes"}]}, "enabled"),
        ({"rules": [{"id": "a", "expire_after_days": 1, "prefix": 3}]}, "prefix"),
        ({"rules": [{"id": "a", "expire_after_days": 1}] * 2}, "twice"),
        ({"rules": [{"id": str(n), "expire_after_days": 1} for n in range(101)]}, "100"),
        ({"rules": "all"}, "list"),
        ({}, "list"),
    ],
)
def test_bad_rules_are_refused_and_change_nothing(
    api: httpx.Client, make_bucket: Callable[[bool], str], body: dict[str, object], problem: str
) -> None:
    bucket = make_bucket(False)
    assert put_rules(api, bucket, {"id": "kept", "expire_after_days": 3}).status_code == 200
    response = api.put(f"/buckets/{bucket}/lifecycle", json=body)
    assert_error(response, 400, "InvalidArgument")
    assert problem in response.json()["error"]["message"]
    assert [r["id"] for r in api.get(f"/buckets/{bucket}/lifecycle").json()["rules"]] == ["kept"]


def test_rules_of_a_missing_bucket_are_404(api: httpx.Client) -> None:
    assert_error(api.get("/buckets/no-such-bucket-lc/lifecycle"), 404, "NoSuchBucket")
    response = put_rules(api, "no-such-bucket-lc", {"id": "a", "expire_after_days": 1})
    assert_error(response, 404, "NoSuchBucket")


# -- actions ---------------------------------------------------------------------------------


def test_expiry_in_an_unversioned_bucket_deletes_only_old_keys_under_the_prefix(
    api: httpx.Client, make_bucket: Callable[[bool], str]
) -> None:
    bucket = make_bucket(False)
    for key in ("logs/a", "logs/b", "logsx", "keep/c"):
        assert api.put(obj(bucket, key), content=key.encode()).status_code in (200, 201)
    assert put_rules(api, bucket, {"id": "r", "prefix": "logs/", "expire_after_days": 1}).is_success
    assert run_pass(api)["expired"] == 0
    assert keys(api, bucket) == ["keep/c", "logs/a", "logs/b", "logsx"]
    assert put_rules(api, bucket, {"id": "r", "prefix": "logs/", "expire_after_days": TINY})
    time.sleep(PAST_TINY)
    assert run_pass(api)["expired"] == 2
    assert keys(api, bucket) == ["keep/c", "logsx"]
    assert_error(api.get(obj(bucket, "logs/a")), 404, "NoSuchKey")
    assert versions(api, bucket) == [("keep/c", True, False), ("logsx", True, False)]
    assert api.get(f"/buckets/{bucket}").json()["usage"]["object_count"] == 2
    assert run_pass(api)["expired"] == 0


def test_expiry_in_a_versioned_bucket_leaves_a_delete_marker_and_noncurrent_versions_go(
    api: httpx.Client, make_bucket: Callable[[bool], str]
) -> None:
    bucket = make_bucket(True)
    api.put(obj(bucket, "k"), content=b"one")
    api.put(obj(bucket, "k"), content=b"two")
    assert put_rules(api, bucket, {"id": "e", "expire_after_days": TINY}).is_success
    time.sleep(PAST_TINY)
    assert run_pass(api) == {"expired": 1, "noncurrent_removed": 0, "uploads_aborted": 0}
    assert_error(api.get(obj(bucket, "k")), 404, "NoSuchKey")
    assert versions(api, bucket) == [("k", True, True), ("k", False, False), ("k", False, False)]

    assert put_rules(api, bucket, {"id": "n", "noncurrent_expire_after_days": 1}).is_success
    assert run_pass(api)["noncurrent_removed"] == 0
    assert put_rules(api, bucket, {"id": "n", "noncurrent_expire_after_days": TINY}).is_success
    time.sleep(PAST_TINY)
    # Both old versions go; the delete marker, then alone, goes in the next pass.
    assert run_pass(api)["noncurrent_removed"] == 2
    assert versions(api, bucket) == [("k", True, True)]
    assert run_pass(api)["noncurrent_removed"] == 1
    assert versions(api, bucket) == []
    assert api.get(f"/buckets/{bucket}").json()["usage"] == {"object_count": 0, "size_bytes": 0}


def test_noncurrent_age_counts_from_when_a_version_stopped_being_current(
    api: httpx.Client, make_bucket: Callable[[bool], str]
) -> None:
    bucket = make_bucket(True)
    old = api.put(obj(bucket, "doc"), content=b"v1").json()["version_id"]
    assert put_rules(
        api, bucket, {"id": "n", "prefix": "doc", "noncurrent_expire_after_days": TINY}
    ).is_success
    time.sleep(PAST_TINY)
    # v1 is old but was current until just now: not due yet.
    api.put(obj(bucket, "doc"), content=b"v2")
    assert run_pass(api)["noncurrent_removed"] == 0
    time.sleep(PAST_TINY)
    assert run_pass(api)["noncurrent_removed"] == 1
    assert_error(api.get(obj(bucket, "doc"), params={"version_id": old}), 404, "NoSuchVersion")
    assert api.get(obj(bucket, "doc")).content == b"v2"


def test_old_multipart_sessions_under_the_prefix_are_aborted(
    api: httpx.Client, make_bucket: Callable[[bool], str]
) -> None:
    bucket = make_bucket(False)
    uploads = {}
    for key in ("tmp/a", "other/b"):
        response = api.post("/multipart/init", json={"bucket": bucket, "key": key})
        assert response.status_code == 201, response.text
        uploads[key] = response.json()["upload_id"]
        part = api.put(f"/multipart/{uploads[key]}/part", params={"partNumber": 1}, content=b"part")
        assert part.is_success
    rule = {"id": "mp", "prefix": "tmp/", "abort_multipart_after_days": TINY}
    assert put_rules(api, bucket, rule).is_success
    time.sleep(PAST_TINY)
    assert run_pass(api)["uploads_aborted"] == 1
    assert_error(api.get(f"/multipart/{uploads['tmp/a']}"), 404, "NoSuchUpload")
    assert api.get(f"/multipart/{uploads['other/b']}").status_code == 200


def test_a_disabled_rule_does_nothing(
    api: httpx.Client, make_bucket: Callable[[bool], str]
) -> None:
    bucket = make_bucket(False)
    api.put(obj(bucket, "x"), content=b"x")
    rule = {"id": "off", "enabled": False, "expire_after_days": TINY}
    assert put_rules(api, bucket, rule).is_success
    time.sleep(PAST_TINY)
    assert run_pass(api)["expired"] == 0
    assert keys(api, bucket) == ["x"]


def test_expiry_walks_many_pages(api: httpx.Client, make_bucket: Callable[[bool], str]) -> None:
    bucket = make_bucket(False)
    for number in range(450):
        api.put(obj(bucket, f"p/{number:04d}"), content=b".")
    assert put_rules(api, bucket, {"id": "all", "expire_after_days": TINY}).is_success
    time.sleep(PAST_TINY)
    assert run_pass(api)["expired"] == 450
    assert keys(api, bucket) == []


# -- durability and the background pass ------------------------------------------------------


def test_rules_survive_a_crash_and_a_restart(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    proc = server_factory(SERVICE_SNAPSHOT_EVERY="3")
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "durable-rules"}).status_code == 201
        for n in range(4):
            rule = {"id": f"r{n}", "prefix": f"{n}/", "expire_after_days": n + 1}
            assert put_rules(api, "durable-rules", rule).is_success
        before = api.get("/buckets/durable-rules/lifecycle").json()
    proc.restart(crash=True)
    with proc.client() as api:
        assert api.get("/buckets/durable-rules/lifecycle").json() == before
    proc.restart()
    with proc.client() as api:
        assert api.get("/buckets/durable-rules/lifecycle").json() == before
        api.delete("/buckets/durable-rules", params={"force": "true"})
        assert api.post("/buckets", json={"name": "durable-rules"}).status_code == 201
        assert api.get("/buckets/durable-rules/lifecycle").json() == {"rules": []}


def test_the_background_pass_applies_rules_on_its_own(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory(SERVICE_LIFECYCLE_INTERVAL="0.3")
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "auto-expiry"}).status_code == 201
        api.put(obj("auto-expiry", "gone"), content=b"x")
        assert put_rules(api, "auto-expiry", {"id": "e", "expire_after_days": TINY}).is_success
        deadline = time.monotonic() + 10
        while keys(api, "auto-expiry") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert keys(api, "auto-expiry") == []
        metrics = api.get("/metrics").text
        assert "service_lifecycle_actions_total" in metrics
