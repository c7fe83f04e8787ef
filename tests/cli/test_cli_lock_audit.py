"""``svc retention``, ``svc legal-hold`` and ``svc admin audit`` against a real server."""

from __future__ import annotations

import datetime

import httpx

from tests.cli.svckit import Svc, error_line


def lock_bucket(api: httpx.Client, name: str) -> str:
    created = api.post("/buckets", json={"name": name, "object_lock_enabled": True})
    assert created.status_code == 201, created.text
    return name


def test_retention_set_get_and_refusals(svc: Svc, api: httpx.Client, bucket: str) -> None:
    locked = lock_bucket(api, bucket + "-l")
    api.put(f"/buckets/{locked}/objects/db.tar", content=b"backup")
    path = f"local/{locked}/db.tar"
    assert "no retention" in svc("retention", "get", path).stdout
    (set_doc,) = svc(
        "retention", "set", path, "--mode", "governance", "--for", "1h", "--json"
    ).json()
    assert set_doc["mode"] == "governance"
    until = datetime.datetime.fromisoformat(set_doc["retain_until"])
    assert 3500 < (until - datetime.datetime.now(datetime.UTC)).total_seconds() <= 3600
    assert "governance" in svc("retention", "get", path).stdout
    refused = svc("retention", "set", path, "--clear", ok=False)
    assert refused.returncode == 5 and "ObjectLocked" in error_line(refused)
    cleared = svc("retention", "set", path, "--clear", "--bypass-governance", "--json").json()
    assert cleared[0]["mode"] is None
    later = "2099-01-31T00:00:00Z"
    svc("retention", "set", path, "--mode", "compliance", "--until", later)
    assert "2099-01-31" in svc("retention", "get", path).stdout
    usage = svc("retention", "set", path, "--mode", "compliance", ok=False)
    assert usage.returncode == 2
    assert svc("rm", path, "--versions", ok=None).returncode != 0


def test_legal_hold_on_and_off(svc: Svc, api: httpx.Client, bucket: str) -> None:
    locked = lock_bucket(api, bucket + "-h")
    version = api.put(f"/buckets/{locked}/objects/k", content=b"x").json()["version_id"]
    path = f"local/{locked}/k"
    (on,) = svc("legal-hold", "on", path, "--json").json()
    assert on == {"version_id": version, "on": True}
    gone = api.delete(f"/buckets/{locked}/objects/k", params={"version_id": version})
    assert gone.status_code == 423
    assert "legal hold off" in svc("legal-hold", "off", path, "--version-id", version).stdout
    assert (
        api.delete(f"/buckets/{locked}/objects/k", params={"version_id": version}).status_code
        == 204
    )


def test_admin_audit_lists_and_verifies(svc: Svc, api: httpx.Client, bucket: str) -> None:
    api.put(f"/buckets/{bucket}/objects/one", content=b"1")
    api.put(f"/buckets/{bucket}/objects/two", content=b"2")
    records = svc("admin", "audit", "local", "--bucket", bucket, "--json").json()
    assert [(r["key"], r["action"]) for r in records] == [
        (None, "bucket:create"),
        ("one", "object:write"),
        ("two", "object:write"),
    ]
    assert all("hash" in r and "prev" in r for r in records)
    listed = svc("admin", "audit", "local", "--bucket", bucket).stdout
    assert f"{bucket}/one" in listed and "object:write" in listed
    verified = svc("admin", "audit", "local", "--verify")
    assert verified.stdout.startswith("ok: ")
    (document,) = svc("admin", "audit", "local", "--verify", "--json").json()
    assert document["ok"] is True and document["first_bad_sequence"] is None
