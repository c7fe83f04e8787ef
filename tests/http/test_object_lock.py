"""Object lock and legal hold over HTTP: every rule of the contract's section.

A lock bucket (``object_lock_enabled``, versioning on for good, an optional default
retention); per-version retention (governance, compliance) and legal hold, their endpoints,
fields and headers; and every path that could remove a locked version refused: DELETE of the
version (423), lifecycle with tiny days, forced bucket deletion (409), multipart abort,
batch, GC and the scrub (quarantine, never delete). Governance gives way only to an admin
sending the bypass header; compliance to no one; a retention ends on time; a legal hold lasts
until turned off. The clock rule (a start behind the newest journaled time unlocks nothing)
runs on servers started with the test-only ``SERVICE_CLOCK_OFFSET``.
"""

from __future__ import annotations

import datetime
import io
import tarfile
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.http.identitykit import Account, create_account
from tests.http.test_buckets import assert_error
from tests.scrub.test_scrub import flip_a_byte, payload_file, scrub_now
from tests.serverproc import ServerProcess

BYPASS = {"X-Bypass-Governance-Retention": "true"}


def iso(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def in_seconds(seconds: float) -> str:
    return iso(datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds))


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key, safe='')}"


def lock_bucket(api: httpx.Client, name: str, **extra: Any) -> dict[str, Any]:
    created = api.post("/buckets", json={"name": name, "object_lock_enabled": True, **extra})
    assert created.status_code == 201, created.text
    return created.json()  # type: ignore[no-any-return]


def put(api: httpx.Client, bucket: str, key: str, body: bytes = b"locked bytes") -> str:
    stored = api.put(obj(bucket, key), content=body)
    assert stored.status_code == 200, stored.text
    return str(stored.json()["version_id"])


def retain(
    client: httpx.Client,
    bucket: str,
    key: str,
    version_id: str | None,
    mode: str | None,
    until: str | None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    params = {} if version_id is None else {"version_id": version_id}
    return client.put(
        obj(bucket, key) + "/retention",
        params=params,
        json={"mode": mode, "retain_until": until},
        headers=headers or {},
    )


def hold(
    client: httpx.Client, bucket: str, key: str, version_id: str, status: str
) -> httpx.Response:
    return client.put(
        obj(bucket, key) + "/legal-hold", params={"version_id": version_id}, json={"status": status}
    )


def delete_version(client: httpx.Client, bucket: str, key: str, version_id: str) -> httpx.Response:
    return client.delete(obj(bucket, key), params={"version_id": version_id})


def versions(api: httpx.Client, bucket: str) -> list[str]:
    listed = api.get(f"/buckets/{bucket}/versions")
    assert listed.status_code == 200, listed.text
    return [v["version_id"] for v in listed.json()["versions"] if not v["is_delete_marker"]]


@pytest.fixture
def owner(api: httpx.Client) -> Iterator[Account]:
    yield create_account(api, prefix="locker")


@pytest.fixture
def user_api(owner: Account, server: ServerProcess) -> Iterator[httpx.Client]:
    with owner.client(server) as client:
        yield client


# -- buckets ------------------------------------------------------------------------------------


def test_a_lock_bucket_shows_its_lock_and_keeps_versioning_on(
    api: httpx.Client, bucket_name: str
) -> None:
    body = lock_bucket(api, bucket_name, default_retention={"mode": "governance", "days": 1})
    assert body["object_lock_enabled"] is True and body["versioning_enabled"] is True
    assert body["default_retention"] == {"mode": "governance", "days": 1}
    assert_error(
        api.patch(f"/buckets/{bucket_name}", json={"versioning_enabled": False}),
        409,
        "InvalidState",
    )
    assert_error(
        api.patch(f"/buckets/{bucket_name}", json={"object_lock_enabled": False}),
        409,
        "InvalidState",
    )
    changed = api.patch(
        f"/buckets/{bucket_name}", json={"default_retention": {"mode": "compliance", "days": 0.5}}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["default_retention"] == {"mode": "compliance", "days": 0.5}
    cleared = api.patch(f"/buckets/{bucket_name}", json={"default_retention": None})
    assert cleared.json()["default_retention"] is None


def test_a_plain_bucket_has_no_lock_and_cannot_get_one(api: httpx.Client, bucket_name: str) -> None:
    created = api.post("/buckets", json={"name": bucket_name})
    assert created.json()["object_lock_enabled"] is False
    assert created.json()["default_retention"] is None
    assert_error(
        api.patch(f"/buckets/{bucket_name}", json={"object_lock_enabled": True}),
        409,
        "InvalidState",
    )
    assert_error(
        api.patch(
            f"/buckets/{bucket_name}", json={"default_retention": {"mode": "governance", "days": 1}}
        ),
        409,
        "InvalidState",
    )
    put(api, bucket_name, "k")
    assert_error(
        retain(api, bucket_name, "k", None, "governance", in_seconds(60)), 409, "InvalidState"
    )
    assert_error(api.get(obj(bucket_name, "k") + "/legal-hold"), 409, "InvalidState")


@pytest.mark.parametrize(
    "extra",
    [
        {"versioning_enabled": False},
        {"default_retention": {"mode": "forever", "days": 1}},
        {"default_retention": {"mode": "governance", "days": 0}},
        {"default_retention": {"mode": "governance", "days": 40_000}},
        {"default_retention": {"mode": "governance"}},
        {"default_retention": "1d"},
        {"object_lock_enabled": "yes"},
    ],
)
def test_bad_lock_settings_are_refused(
    api: httpx.Client, bucket_name: str, extra: dict[str, Any]
) -> None:
    body = {"name": bucket_name, "object_lock_enabled": True, **extra}
    assert_error(api.post("/buckets", json=body), 400, "InvalidArgument")
    assert api.get(f"/buckets/{bucket_name}").status_code == 404


def test_a_default_retention_without_object_lock_is_refused(
    api: httpx.Client, bucket_name: str
) -> None:
    body = {"name": bucket_name, "default_retention": {"mode": "governance", "days": 1}}
    assert_error(api.post("/buckets", json=body), 400, "InvalidArgument")


# -- fields, headers, endpoints -------------------------------------------------------------------


def test_new_versions_get_the_default_retention_in_json_and_headers(
    api: httpx.Client, bucket_name: str
) -> None:
    lock_bucket(api, bucket_name, default_retention={"mode": "compliance", "days": 1})
    stored = api.put(obj(bucket_name, "doc"), content=b"kept a day")
    body = stored.json()
    assert body["retention"]["mode"] == "compliance"
    until = datetime.datetime.fromisoformat(body["retention"]["retain_until"])
    created = datetime.datetime.fromisoformat(body["updated_at"])
    assert until - created == datetime.timedelta(days=1)
    assert body["legal_hold"] is False
    for method in ("GET", "HEAD"):
        read = api.request(method, obj(bucket_name, "doc"))
        assert read.headers["X-Retention-Mode"] == "compliance"
        assert read.headers["X-Retain-Until"] == body["retention"]["retain_until"]
        assert read.headers["X-Legal-Hold"] == "off"
    listed = api.get(f"/buckets/{bucket_name}/objects").json()["objects"][0]
    assert listed["retention"] == body["retention"] and listed["legal_hold"] is False
    got = api.get(obj(bucket_name, "doc") + "/retention")
    assert got.status_code == 200
    assert got.json() == {"version_id": body["version_id"], **body["retention"]}


def test_an_unlocked_object_says_so(api: httpx.Client, bucket_name: str) -> None:
    lock_bucket(api, bucket_name)
    version = put(api, bucket_name, "free")
    read = api.head(obj(bucket_name, "free"))
    assert "X-Retention-Mode" not in read.headers and "X-Legal-Hold" not in read.headers
    assert api.get(obj(bucket_name, "free") + "/retention").json() == {
        "version_id": version,
        "mode": None,
        "retain_until": None,
    }
    assert api.get(obj(bucket_name, "free") + "/legal-hold").json() == {
        "version_id": version,
        "status": "off",
    }


def test_retention_and_hold_target_the_current_version_or_the_named_one(
    api: httpx.Client, bucket_name: str
) -> None:
    lock_bucket(api, bucket_name)
    first = put(api, bucket_name, "k", b"one")
    second = put(api, bucket_name, "k", b"two")
    assert (
        retain(api, bucket_name, "k", None, "governance", in_seconds(600)).json()["version_id"]
        == second
    )
    assert hold(api, bucket_name, "k", first, "on").json() == {"version_id": first, "status": "on"}
    assert (
        api.get(obj(bucket_name, "k") + "/retention", params={"version_id": first}).json()["mode"]
        is None
    )
    read = api.get(obj(bucket_name, "k"), params={"version_id": first})
    assert read.headers["X-Legal-Hold"] == "on" and "X-Retention-Mode" not in read.headers


@pytest.mark.parametrize(
    "body",
    [
        {"mode": "governance", "retain_until": "2001-01-01T00:00:00Z"},
        {"mode": "governance", "retain_until": "2999-01-01T00:00:00"},
        {"mode": "governance", "retain_until": "next tuesday"},
        {"mode": "forever", "retain_until": "2999-01-01T00:00:00Z"},
        {"mode": "governance", "retain_until": None},
        {"mode": "governance"},
        {"mode": "governance", "retain_until": "2999-01-01T00:00:00Z", "extra": 1},
        {"mode": "governance", "retain_until": "9999-01-01T00:00:00Z"},
    ],
)
def test_bad_retention_bodies_are_refused(
    api: httpx.Client, bucket_name: str, body: dict[str, Any]
) -> None:
    lock_bucket(api, bucket_name)
    put(api, bucket_name, "k")
    assert_error(api.put(obj(bucket_name, "k") + "/retention", json=body), 400, "InvalidArgument")


def test_bad_legal_hold_bodies_and_targets_are_refused(api: httpx.Client, bucket_name: str) -> None:
    lock_bucket(api, bucket_name)
    version = put(api, bucket_name, "k")
    assert_error(hold(api, bucket_name, "k", version, "yes"), 400, "InvalidArgument")
    assert_error(hold(api, bucket_name, "k", "nope", "on"), 404, "NoSuchVersion")
    assert_error(api.get(obj(bucket_name, "missing") + "/legal-hold"), 404, "NoSuchKey")
    api.delete(obj(bucket_name, "k"))
    marker = api.get(f"/buckets/{bucket_name}/versions").json()["versions"][0]
    assert marker["is_delete_marker"]
    assert_error(hold(api, bucket_name, "k", marker["version_id"], "on"), 405, "MethodNotAllowed")
    assert_error(api.get(obj(bucket_name, "k") + "/retention"), 404, "NoSuchKey")


def test_a_key_ending_in_retention_is_named_with_an_encoded_slash(
    api: httpx.Client, bucket_name: str
) -> None:
    lock_bucket(api, bucket_name)
    stored = api.put(f"/buckets/{bucket_name}/objects/a%2Fretention", content=b"a file")
    assert stored.status_code == 200 and stored.json()["key"] == "a/retention"
    assert api.get(f"/buckets/{bucket_name}/objects/a%2Fretention").content == b"a file"
    got = api.get(f"/buckets/{bucket_name}/objects/a%2Fretention/retention")
    assert got.status_code == 200 and got.json()["version_id"] == stored.json()["version_id"]
    assert_error(api.get(f"/buckets/{bucket_name}/objects/a/retention"), 404, "NoSuchKey")


# -- removal refused -----------------------------------------------------------------------------


def test_a_locked_version_cannot_be_deleted_by_anyone_but_a_marker_can_be_added(
    api: httpx.Client, bucket_name: str
) -> None:
    lock_bucket(api, bucket_name, default_retention={"mode": "governance", "days": 1})
    version = put(api, bucket_name, "k")
    refused = delete_version(api, bucket_name, "k", version)
    assert_error(refused, 423, "ObjectLocked")
    assert "governance retention" in refused.json()["error"]["message"]
    with_bypass = api.delete(obj(bucket_name, "k"), params={"version_id": version}, headers=BYPASS)
    assert_error(with_bypass, 423, "ObjectLocked")
    assert api.delete(obj(bucket_name, "k")).status_code == 204
    assert api.get(obj(bucket_name, "k")).status_code == 404
    assert api.get(obj(bucket_name, "k"), params={"version_id": version}).content == b"locked bytes"


def test_an_overwrite_adds_a_version_and_the_locked_one_stays(
    api: httpx.Client, bucket_name: str
) -> None:
    lock_bucket(api, bucket_name, default_retention={"mode": "compliance", "days": 1})
    first = put(api, bucket_name, "k", b"first")
    second = put(api, bucket_name, "k", b"second")
    assert first != second and set(versions(api, bucket_name)) == {first, second}
    assert api.get(obj(bucket_name, "k"), params={"version_id": first}).content == b"first"


def test_governance_gives_way_only_to_an_admin_with_the_header(
    api: httpx.Client, user_api: httpx.Client, owner: Account, bucket_name: str
) -> None:
    created = user_api.post("/buckets", json={"name": bucket_name, "object_lock_enabled": True})
    assert created.status_code == 201, created.text
    version = put(user_api, bucket_name, "k")
    until = in_seconds(3600)
    assert retain(user_api, bucket_name, "k", version, "governance", until).status_code == 200
    # The owner may lengthen, not shorten nor remove; the bypass header is not theirs.
    assert (
        retain(user_api, bucket_name, "k", version, "governance", in_seconds(7200)).status_code
        == 200
    )
    assert_error(retain(user_api, bucket_name, "k", version, None, None), 423, "ObjectLocked")
    assert_error(
        retain(user_api, bucket_name, "k", version, None, None, BYPASS), 403, "AccessDenied"
    )
    # An admin without the header: refused too.
    assert_error(
        retain(api, bucket_name, "k", version, "governance", in_seconds(60)), 423, "ObjectLocked"
    )
    shortened = retain(api, bucket_name, "k", version, "governance", in_seconds(60), BYPASS)
    assert shortened.status_code == 200, shortened.text
    assert retain(api, bucket_name, "k", version, None, None, BYPASS).json()["mode"] is None
    assert delete_version(user_api, bucket_name, "k", version).status_code == 204


def test_compliance_gives_way_to_no_one(api: httpx.Client, bucket_name: str) -> None:
    lock_bucket(api, bucket_name)
    version = put(api, bucket_name, "k")
    until = in_seconds(3600)
    assert retain(api, bucket_name, "k", version, "compliance", until).status_code == 200
    for mode, end in (
        ("compliance", in_seconds(600)),
        ("governance", in_seconds(7200)),
        (None, None),
    ):
        refused = retain(api, bucket_name, "k", version, mode, end, BYPASS)
        assert_error(refused, 423, "ObjectLocked")
        assert "compliance" in refused.json()["error"]["message"]
    assert_error(delete_version(api, bucket_name, "k", version), 423, "ObjectLocked")
    longer = retain(api, bucket_name, "k", version, "compliance", in_seconds(7200))
    assert longer.status_code == 200
    assert (
        api.get(obj(bucket_name, "k") + "/retention").json()["retain_until"]
        == longer.json()["retain_until"]
    )


def test_a_retention_ends_on_time(api: httpx.Client, bucket_name: str) -> None:
    lock_bucket(api, bucket_name)
    version = put(api, bucket_name, "k")
    assert retain(api, bucket_name, "k", version, "compliance", in_seconds(1.5)).status_code == 200
    assert_error(delete_version(api, bucket_name, "k", version), 423, "ObjectLocked")
    time.sleep(2.0)
    assert delete_version(api, bucket_name, "k", version).status_code == 204
    assert versions(api, bucket_name) == []


def test_a_legal_hold_lasts_until_turned_off(
    api: httpx.Client, user_api: httpx.Client, bucket_name: str
) -> None:
    assert (
        user_api.post(
            "/buckets", json={"name": bucket_name, "object_lock_enabled": True}
        ).status_code
        == 201
    )
    version = put(user_api, bucket_name, "k")
    assert hold(user_api, bucket_name, "k", version, "on").json()["status"] == "on"
    refused = delete_version(api, bucket_name, "k", version)
    assert_error(refused, 423, "ObjectLocked")
    assert "legal hold" in refused.json()["error"]["message"]
    assert hold(user_api, bucket_name, "k", version, "off").json()["status"] == "off"
    assert delete_version(user_api, bucket_name, "k", version).status_code == 204


def test_a_forced_bucket_deletion_keeps_a_bucket_with_a_locked_version(
    api: httpx.Client, bucket_name: str
) -> None:
    lock_bucket(api, bucket_name)
    version = put(api, bucket_name, "k")
    put(api, bucket_name, "other")
    hold(api, bucket_name, "k", version, "on")
    refused = api.delete(f"/buckets/{bucket_name}", params={"force": "true"})
    assert_error(refused, 409, "BucketNotEmpty")
    assert api.get(obj(bucket_name, "k")).content == b"locked bytes"
    assert len(versions(api, bucket_name)) == 2
    hold(api, bucket_name, "k", version, "off")
    assert api.delete(f"/buckets/{bucket_name}", params={"force": "true"}).status_code == 204


def test_lifecycle_with_tiny_days_leaves_locked_versions(
    api: httpx.Client, bucket_name: str
) -> None:
    lock_bucket(api, bucket_name, default_retention={"mode": "governance", "days": 1})
    old = put(api, bucket_name, "k", b"old")
    new = put(api, bucket_name, "k", b"new")
    rules = {
        "rules": [
            {"id": "all", "expire_after_days": 0.00001, "noncurrent_expire_after_days": 0.00001}
        ]
    }
    assert api.put(f"/buckets/{bucket_name}/lifecycle", json=rules).status_code == 200
    time.sleep(1.0)  # 0.00001 days is 0.864 s
    ran = api.post("/system/lifecycle/run")
    assert ran.status_code == 200, ran.text
    assert ran.json()["noncurrent_removed"] == 0
    assert set(versions(api, bucket_name)) == {old, new}
    for version, body in ((old, b"old"), (new, b"new")):
        assert api.get(obj(bucket_name, "k"), params={"version_id": version}).content == body
    # The expiry added a delete marker, as a DELETE would: allowed under a lock.
    assert api.get(obj(bucket_name, "k")).status_code == 404


def test_multipart_abort_and_complete_respect_the_lock(api: httpx.Client, bucket_name: str) -> None:
    lock_bucket(api, bucket_name, default_retention={"mode": "compliance", "days": 1})
    kept = put(api, bucket_name, "big", b"the locked one")
    upload = api.post("/multipart/init", json={"bucket": bucket_name, "key": "big"}).json()
    part = api.put(
        f"/multipart/{upload['upload_id']}/part", params={"partNumber": 1}, content=b"p" * 100
    )
    assert part.status_code == 200
    assert api.delete(f"/multipart/{upload['upload_id']}").status_code == 204
    assert (
        api.get(obj(bucket_name, "big"), params={"version_id": kept}).content == b"the locked one"
    )
    again = api.post("/multipart/init", json={"bucket": bucket_name, "key": "big"}).json()
    etag = api.put(
        f"/multipart/{again['upload_id']}/part", params={"partNumber": 1}, content=b"q" * 100
    ).json()["etag"]
    done = api.post(
        f"/multipart/{again['upload_id']}/complete",
        json={"parts": [{"part_number": 1, "etag": etag}]},
    )
    assert done.status_code == 200, done.text
    assert done.json()["retention"]["mode"] == "compliance"
    assert set(versions(api, bucket_name)) == {kept, done.json()["version_id"]}
    assert_error(delete_version(api, bucket_name, "big", kept), 423, "ObjectLocked")


def tar_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_batch_adds_locked_versions_and_removes_none(api: httpx.Client, bucket_name: str) -> None:
    lock_bucket(api, bucket_name, default_retention={"mode": "governance", "days": 1})
    first = put(api, bucket_name, "a", b"before the batch")
    batch = api.post(
        f"/buckets/{bucket_name}/batch", content=tar_of({"a": b"from the batch", "b": b"new"})
    )
    assert batch.status_code == 200, batch.text
    results = batch.json()["results"]
    assert all(item["retention"]["mode"] == "governance" for item in results)
    assert first in versions(api, bucket_name) and len(versions(api, bucket_name)) == 3
    assert_error(delete_version(api, bucket_name, "a", first), 423, "ObjectLocked")


def test_the_gc_never_takes_a_locked_version(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    # A short grace, not none: the grace is what keeps a PUT's file between its promotion
    # and its commit (docs/configuration.md); with none, a pass under load could take the
    # PUT itself before the version exists, which is not what this test is about.
    proc = server_factory(SERVICE_GC_INTERVAL="0.2", SERVICE_GC_GRACE="0.5")
    with proc.client() as api:
        lock_bucket(api, bucket_name, default_retention={"mode": "compliance", "days": 1})
        version = put(api, bucket_name, "k", b"collected? never")
        api.delete(obj(bucket_name, "k"))
        time.sleep(1.5)  # several GC passes after the payload is past the grace
        read = api.get(obj(bucket_name, "k"), params={"version_id": version})
        assert read.status_code == 200, read.text
        assert read.content == b"collected? never"
    proc.stop()
    proc.start()
    with proc.client() as api:
        read = api.get(obj(bucket_name, "k"), params={"version_id": version})
        assert read.content == b"collected? never"


def test_the_scrub_quarantines_a_rotten_locked_version_but_never_deletes_it(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    proc = server_factory(SERVICE_SCRUB_INTERVAL_DAYS="3650")
    body = b"rotting under a legal hold " * 50
    with proc.client() as api:
        lock_bucket(api, bucket_name)
        version = put(api, bucket_name, "k", body)
        hold(api, bucket_name, "k", version, "on")
        flip_a_byte(payload_file(proc.data_dir, body))
        doc = scrub_now(api)
        assert [entry["key"] for entry in doc["corrupt"]] == ["k"]  # type: ignore[index,union-attr]
        assert_error(api.get(obj(bucket_name, "k")), 500, "InternalError")
        assert versions(api, bucket_name) == [version]
        assert_error(delete_version(api, bucket_name, "k", version), 423, "ObjectLocked")
    quarantined = [p for p in (proc.data_dir / "quarantine").rglob("*") if p.is_file()]
    assert quarantined, "the rotten payload is kept aside, not deleted"


# -- the clock rule -----------------------------------------------------------------------------


def test_a_start_behind_the_newest_journaled_time_unlocks_nothing_until_it_caught_up(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    """Retention until T; the journal's newest time N > T; a start whose clock reads between
    T and N may not delete, one past N may."""
    proc = server_factory(start=False)
    proc.start(extra_env={"SERVICE_CLOCK_OFFSET": "7200"})
    with proc.client() as api:
        lock_bucket(api, bucket_name)
        version = put(api, bucket_name, "k")
        until = in_seconds(7200 + 2)  # two seconds after the server's (shifted) now
        assert retain(api, bucket_name, "k", version, "compliance", until).status_code == 200
    proc.stop()
    proc.start(extra_env={"SERVICE_CLOCK_OFFSET": "10000"})
    with proc.client() as api:
        put(api, bucket_name, "later")  # the newest journaled time: now + 10,000 s
    proc.stop()
    proc.start(extra_env={"SERVICE_CLOCK_OFFSET": "8000"})  # past T, behind the journal
    with proc.client() as api:
        refused = delete_version(api, bucket_name, "k", version)
        assert_error(refused, 423, "ObjectLocked")
        assert "behind" in refused.json()["error"]["message"]
    proc.stop()
    proc.start(extra_env={"SERVICE_CLOCK_OFFSET": "10100"})  # caught up
    with proc.client() as api:
        assert delete_version(api, bucket_name, "k", version).status_code == 204
