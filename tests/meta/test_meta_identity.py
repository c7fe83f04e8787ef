"""Bucket identities in the pure state: kept from the creation record or derived for one
written before identities, kept by snapshots (old rows derived the same way), and checked by
every record that names the bucket it was accepted for (``service.meta.identity``)."""

from __future__ import annotations

import msgpack

from service.meta import MetaState, decode_snapshot, encode_snapshot, legacy_bucket_id, records
from service.meta.lifecycle_state import EXPIRE, judgment
from tests.meta.factory import Factory, applied

RULE = {
    "id": "r",
    "prefix": "",
    "enabled": True,
    "expire_after_days": 1.0,
    "noncurrent_expire_after_days": None,
    "abort_multipart_after_days": None,
}
HOOK = {"id": "w", "url": "http://h/", "events": [], "prefix": "", "secret": "s"}


def legacy_record(name: str, at: int) -> records.Event:
    return records.bucket_created(
        name=name,
        owner="u1",
        quota_bytes=None,
        versioning_enabled=False,
        tags={},
        at=at,
        bucket_id=None,
    )


def test_a_bucket_keeps_the_identity_its_record_names() -> None:
    f, state = Factory(), MetaState()
    event = f.bucket("b")
    applied(state, event)
    assert state.bucket_id_of("b") == event["bucket_id"]
    assert state.bucket_id_of("missing") is None


def test_a_record_without_an_identity_gets_the_derived_one_on_every_replay() -> None:
    record = legacy_record("old", 1_700_000_000_123)
    assert "bucket_id" not in record
    first, second = MetaState(), MetaState()
    applied(first, record)
    applied(second, dict(record))
    assert first.bucket_id_of("old") == second.bucket_id_of("old")
    assert first.bucket_id_of("old") == legacy_bucket_id("old", 1_700_000_000_123)
    assert legacy_bucket_id("old", 1_700_000_000_124) != legacy_bucket_id("old", 1_700_000_000_123)


def test_a_name_created_again_is_another_bucket() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket("b"))
    before = state.bucket_id_of("b")
    applied(state, f.drop_bucket("b"))
    applied(state, f.bucket("b", owner="u2"))
    assert state.bucket_id_of("b") not in (None, before)


def test_snapshots_keep_identities_and_derive_them_for_rows_written_before() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket("new"))
    applied(state, legacy_record("old", 42))
    restored = decode_snapshot(encode_snapshot(state))
    assert restored == state
    assert restored.bucket_id_of("new") == state.bucket_id_of("new")
    doc = msgpack.unpackb(encode_snapshot(state), raw=False)
    doc["buckets"] = [row[:7] for row in doc["buckets"]]  # as written before identities
    older = decode_snapshot(msgpack.packb(doc, use_bin_type=True))
    assert older.bucket_id_of("old") == legacy_bucket_id("old", 42)
    new = state.get_bucket("new")
    assert new is not None
    assert older.bucket_id_of("new") == legacy_bucket_id("new", new.created_at)


def test_rules_and_webhooks_accepted_for_a_deleted_bucket_never_reach_its_successor() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket("b"))
    old = state.bucket_id_of("b")
    assert old is not None
    applied(state, f.drop_bucket("b"))
    applied(state, f.bucket("b", owner="u2"))
    before = state.freeze()
    for event in (
        records.lifecycle_configured(bucket="b", rules=[RULE], at=f.at(), bucket_id=old),
        records.notifications_configured(
            bucket="b", webhooks=[HOOK], after_sequence=0, at=f.at(), bucket_id=old
        ),
    ):
        outcome = state.apply(event)
        assert (outcome.ok, outcome.error_code) == (False, "NoSuchBucket")
    assert state.freeze() == before
    current = state.bucket_id_of("b")
    assert current is not None
    applied(
        state, records.lifecycle_configured(bucket="b", rules=[RULE], at=f.at(), bucket_id=current)
    )
    assert [rule.id for rule in state.lifecycle.rules("b")] == ["r"]


def test_a_lifecycle_delete_judged_in_a_deleted_bucket_is_refused_in_its_successor() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket("b"))
    old = state.bucket_id_of("b")
    applied(state, f.drop_bucket("b", force=True))
    applied(state, f.bucket("b", owner="u2"))
    applied(state, f.put("k"))
    version = state.head_object("b", "k")
    assert version is not None
    delete = records.object_deleted(
        bucket="b",
        key="k",
        version_id=None,
        version_token=f.fresh("v"),
        at=f.at(),
        judged=judgment(EXPIRE, version, version.updated_at + 1, old),
    )
    before = state.freeze()
    outcome = state.apply(delete)
    assert (outcome.ok, outcome.error_code) == (False, "NoSuchBucket")
    assert state.freeze() == before
    delete["judged"]["bucket_id"] = state.bucket_id_of("b")
    assert applied(state, delete).ok
