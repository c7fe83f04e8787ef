"""Bucket events: create, update, delete (plain and forced) and the bucket read helpers."""

from __future__ import annotations

from service.meta import Bucket, MetaState, Usage
from tests.meta.factory import Factory, applied


def test_created_bucket_carries_its_settings() -> None:
    f, state = Factory(), MetaState()
    event = f.bucket("photos", versioning=True, quota=100, owner="u7", tags={"team": "ml"})
    bucket = applied(state, event).value
    at, bucket_id = event["at"], event["bucket_id"]
    assert bucket == Bucket("photos", "u7", 100, True, {"team": "ml"}, at, at, bucket_id)
    assert state.get_bucket("photos") == bucket
    assert state.bucket_usage("photos") == Usage(0, 0)


def test_creating_an_existing_bucket_is_refused() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket("b", owner="u1"))
    outcome = state.apply(f.bucket("b", owner="u2"))
    assert (outcome.ok, outcome.error_code) == (False, "BucketAlreadyExists")
    bucket = state.get_bucket("b")
    assert bucket is not None and bucket.owner == "u1"


def test_update_changes_only_the_named_fields() -> None:
    f, state = Factory(), MetaState()
    created = applied(state, f.bucket("b", quota=5, tags={"a": "1"})).value
    assert isinstance(created, Bucket)
    event = f.update("b", versioning_enabled=True)
    updated = applied(state, event).value
    assert updated == Bucket(
        "b", "u1", 5, True, {"a": "1"}, created.created_at, event["at"], created.bucket_id
    )
    applied(state, f.update("b", quota_bytes=None, tags={}))
    bucket = state.get_bucket("b")
    assert bucket is not None and (bucket.quota_bytes, bucket.tags) == (None, {})
    assert bucket.versioning_enabled


def test_update_of_a_missing_bucket_is_no_such_bucket() -> None:
    f, state = Factory(), MetaState()
    assert state.apply(f.update("ghost", quota_bytes=1)).error_code == "NoSuchBucket"


def test_list_buckets_filters_by_owner_in_name_order() -> None:
    f, state = Factory(), MetaState()
    for name, owner in (("zeta", "u1"), ("alpha", "u2"), ("mid", "u1")):
        applied(state, f.bucket(name, owner=owner))
    assert [b.name for b in state.list_buckets()] == ["alpha", "mid", "zeta"]
    assert [b.name for b in state.list_buckets("u1")] == ["mid", "zeta"]
    assert state.list_buckets("nobody") == []


def test_delete_of_a_bucket_with_objects_is_refused_without_force() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket())
    applied(state, f.put("k"))
    before = state.freeze()
    outcome = state.apply(f.drop_bucket())
    assert outcome.error_code == "BucketNotEmpty"
    assert state.freeze() == before


def test_a_bucket_holding_only_delete_markers_is_not_empty() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket(versioning=True))
    put = f.put("k")
    applied(state, put)
    applied(state, f.delete("k"))
    applied(state, f.delete("k", put["version_token"]))
    assert state.bucket_usage("b").object_count == 0
    assert state.apply(f.drop_bucket()).error_code == "BucketNotEmpty"


def test_delete_of_an_empty_bucket_drops_its_open_uploads_and_their_parts() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket())
    start = f.start()
    applied(state, start)
    part = f.part(start["upload_id"], 1)
    applied(state, part)
    outcome = applied(state, f.drop_bucket())
    assert outcome.released_payloads == (part["payload_id"],)
    assert state.get_bucket("b") is None
    assert state.get_upload(start["upload_id"]) is None
    assert state.referenced_payloads() == set()


def test_forced_delete_releases_every_payload_of_the_bucket_and_nothing_else() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket("keep"))
    kept = f.put("x", bucket="keep")
    applied(state, kept)
    applied(state, f.bucket(versioning=True))
    puts = [f.put(key) for key in ("a", "a", "b")]
    for put in puts:
        applied(state, put)
    applied(state, f.delete("b"))
    start = f.start()
    applied(state, start)
    part = f.part(start["upload_id"], 3)
    applied(state, part)
    outcome = applied(state, f.drop_bucket(force=True))
    expected = {put["payload_id"] for put in puts} | {part["payload_id"]}
    assert sorted(outcome.released_payloads) == sorted(expected)
    assert state.referenced_payloads() == {kept["payload_id"]}
    assert state.get_bucket("b") is None
    assert state.uploads() == []
    assert tuple(state.counts()) == (1, 1, 1)


def test_a_deleted_bucket_name_can_be_reused_empty() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket())
    applied(state, f.put("k"))
    applied(state, f.drop_bucket(force=True))
    applied(state, f.bucket())
    assert state.head_object("b", "k") is None
    assert state.bucket_usage("b") == Usage(0, 0)


def test_delete_of_a_missing_bucket_is_no_such_bucket() -> None:
    f, state = Factory(), MetaState()
    assert state.apply(f.drop_bucket("ghost", force=True)).error_code == "NoSuchBucket"
