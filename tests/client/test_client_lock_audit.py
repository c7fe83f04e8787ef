"""Object lock and the audit log through the Python client, end to end, both flavours.

Each test that takes ``client`` runs against ``ServiceClient`` and ``AsyncServiceClient``
(seen through ``dualclient.blocking_view``), against a real server.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

import pytest

from service.client import (
    AuditRecord,
    BucketClient,
    DefaultRetention,
    NotFoundError,
    ObjectLockedError,
    PermissionDeniedError,
    ServiceClient,
)
from service.client._paths import object_path, retention_path


def later(seconds: float) -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)


@pytest.fixture
def locked(client: ServiceClient, bucket_name: str) -> Iterator[BucketClient]:
    created = client.buckets.create(
        bucket_name,
        object_lock_enabled=True,
        default_retention=DefaultRetention("governance", 1),
    )
    assert created.object_lock_enabled and created.versioning_enabled
    assert created.default_retention == DefaultRetention("governance", 1.0)
    yield client.bucket(bucket_name)
    with contextlib.suppress(Exception):
        client.buckets.update(bucket_name, default_retention=None)


def test_retention_and_legal_hold_through_the_client(
    client: ServiceClient, locked: BucketClient
) -> None:
    stored = locked.put("doc.txt", b"kept")
    assert stored.retention is not None and stored.retention.mode == "governance"
    assert stored.legal_hold is False
    head = locked.head("doc.txt")
    assert (
        head.retention_mode == "governance" and head.retain_until == stored.retention.retain_until
    )
    until = later(2 * 86400)  # past the default's day: lengthening needs no bypass
    retention = locked.set_retention("doc.txt", "compliance", until)
    assert retention.version_id == stored.version_id and retention.mode == "compliance"
    assert retention.retain_until is not None
    assert abs((retention.retain_until - until).total_seconds()) < 0.01
    assert locked.get_retention("doc.txt").mode == "compliance"
    with pytest.raises(ObjectLockedError) as refused:
        locked.set_retention("doc.txt", None, None, bypass_governance=True)
    assert refused.value.status == 423 and refused.value.code == "ObjectLocked"
    hold = locked.set_legal_hold("doc.txt", True, version_id=stored.version_id)
    assert hold.on and locked.get_legal_hold("doc.txt").on
    assert locked.head("doc.txt").legal_hold is True
    assert stored.version_id is not None
    with pytest.raises(ObjectLockedError):
        locked.delete("doc.txt", version_id=stored.version_id)
    assert not locked.set_legal_hold("doc.txt", False).on


def test_a_key_that_ends_like_a_lock_route_still_reads(
    client: ServiceClient, locked: BucketClient
) -> None:
    assert object_path("b", "x/retention").endswith("/objects/x%2Fretention")
    assert retention_path("b", "x/legal-hold").endswith("/objects/x%2Flegal-hold/retention")
    locked.put("notes/retention", b"a note")
    assert locked.get("notes/retention").read() == b"a note"
    assert locked.get_retention("notes/retention").mode == "governance"
    locked.put("notes/legal-hold", b"another")
    assert locked.get_legal_hold("notes/legal-hold").on is False


def test_the_audit_log_through_the_client(client: ServiceClient, bucket: BucketClient) -> None:
    bucket.put("a", b"1")
    bucket.put("b", b"2")
    created, *records = list(client.audit_records(bucket=bucket.name))
    assert (created.action, created.key) == ("bucket:create", None)
    assert [r.key for r in records] == ["a", "b"]
    assert all(isinstance(r, AuditRecord) and r.action == "object:write" for r in records)
    page = client.audit(since=records[0].sequence, limit=1, bucket=bucket.name)
    assert [r.sequence for r in page.records] == [records[1].sequence]
    outcome = client.verify_audit()
    assert outcome.ok and outcome.first_bad_sequence is None and outcome.records >= 2


def test_a_users_client_cannot_read_the_audit_log(client: ServiceClient) -> None:
    user = client.users.create("auditless-" + str(id(client) % 10_000), "pw-audit-less-1234")
    key = client.access_keys.create(user_id=user.user_id)
    assert key.secret_key is not None
    host = client.base_url.split("://", 1)[1]
    with ServiceClient(f"http://{key.access_key_id}:{key.secret_key}@{host}") as theirs:
        with pytest.raises(PermissionDeniedError):
            theirs.verify_audit()
        with pytest.raises(NotFoundError):
            theirs.bucket("no-such-bucket-here").get_retention("k")
    client.users.delete(user.user_id)
