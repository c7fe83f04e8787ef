"""Object semantics of MetaState.apply: versioning off and on, deletes, conditions, quota."""

from __future__ import annotations

import pytest

from service.meta import NULL_VERSION_ID, MetaState, ObjectVersion, Usage
from tests.meta.factory import Factory, applied, keys_of


@pytest.fixture
def f() -> Factory:
    return Factory()


def make_state(f: Factory, **bucket: object) -> MetaState:
    state = MetaState()
    applied(state, f.bucket(**bucket))  # type: ignore[arg-type]
    return state


# -- versioning off ------------------------------------------------------------------------


def test_put_without_versioning_stores_a_null_version(f: Factory) -> None:
    state = make_state(f)
    event = f.put("a.txt", 5, metadata={"colour": "blue"}, content_type="text/plain")
    version = applied(state, event).value
    assert isinstance(version, ObjectVersion)
    assert version.version_id is None
    assert version.payload_id == event["payload_id"]
    assert (version.size, version.content_type, version.etag) == (5, "text/plain", event["sha256"])
    assert version.custom_metadata == {"colour": "blue"}
    assert state.head_object("b", "a.txt") == version
    assert state.bucket_usage("b") == Usage(1, 5)


def test_overwrite_without_versioning_replaces_and_releases_the_old_payload(f: Factory) -> None:
    state = make_state(f)
    first = f.put("k", 5)
    applied(state, first)
    second = f.put("k", 7)
    outcome = applied(state, second)
    assert outcome.released_payloads == (first["payload_id"],)
    assert state.object_versions("b", "k") == (outcome.value,)
    assert state.bucket_usage("b") == Usage(1, 7)
    assert state.referenced_payloads() == {second["payload_id"]}


def test_overwrite_keeps_created_at_and_moves_updated_at(f: Factory) -> None:
    state = make_state(f)
    first = applied(state, f.put("k")).value
    second = applied(state, f.put("k")).value
    assert isinstance(first, ObjectVersion) and isinstance(second, ObjectVersion)
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at


def test_delete_without_versioning_removes_the_key_and_releases_its_payload(f: Factory) -> None:
    state = make_state(f)
    put = f.put("k", 4)
    applied(state, put)
    outcome = applied(state, f.delete("k"))
    assert outcome.released_payloads == (put["payload_id"],)
    assert state.head_object("b", "k") is None
    assert state.bucket_usage("b") == Usage(0, 0)
    assert keys_of(state) == []


def test_delete_of_a_missing_key_is_no_such_key(f: Factory) -> None:
    state = make_state(f)
    outcome = state.apply(f.delete("nope"))
    assert (outcome.ok, outcome.error_code) == (False, "NoSuchKey")


def test_put_with_versioning_off_keeps_versions_written_while_it_was_on(f: Factory) -> None:
    state = make_state(f, versioning=True)
    old = applied(state, f.put("k", 3)).value
    applied(state, f.update(versioning_enabled=False))
    first_null = applied(state, f.put("k", 4)).value
    second_null = f.put("k", 6)
    outcome = applied(state, second_null)
    assert isinstance(first_null, ObjectVersion)
    assert outcome.released_payloads == (first_null.payload_id,)
    assert state.object_versions("b", "k") == (old, outcome.value)
    assert state.bucket_usage("b") == Usage(2, 9)


def test_suspended_delete_leaves_a_null_marker_when_other_versions_remain(f: Factory) -> None:
    state = make_state(f, versioning=True)
    kept = applied(state, f.put("k", 3)).value
    applied(state, f.update(versioning_enabled=False))
    null = applied(state, f.put("k", 4)).value
    assert isinstance(null, ObjectVersion)
    outcome = applied(state, f.delete("k"))
    marker = outcome.value
    assert isinstance(marker, ObjectVersion)
    assert marker.is_delete_marker and marker.version_id is None and marker.payload_id is None
    assert outcome.released_payloads == (null.payload_id,)
    assert state.object_versions("b", "k") == (kept, marker)
    assert state.bucket_usage("b") == Usage(1, 3)
    assert keys_of(state) == []
    again = state.apply(f.delete("k"))
    assert again.error_code == "NoSuchKey"


def test_suspended_put_over_a_null_marker_replaces_the_marker(f: Factory) -> None:
    state = make_state(f, versioning=True)
    kept = applied(state, f.put("k", 3)).value
    applied(state, f.update(versioning_enabled=False))
    applied(state, f.delete("k"))
    outcome = applied(state, f.put("k", 2))
    assert outcome.released_payloads == ()
    assert state.object_versions("b", "k") == (kept, outcome.value)
    assert keys_of(state) == ["k"]


# -- versioning on -------------------------------------------------------------------------


def test_put_with_versioning_appends_versions_named_by_their_token(f: Factory) -> None:
    state = make_state(f, versioning=True)
    first, second = f.put("k", 2), f.put("k", 3)
    v1, v2 = applied(state, first).value, applied(state, second)
    assert v2.released_payloads == ()
    assert [v.version_id for v in state.object_versions("b", "k")] == [
        first["version_token"],
        second["version_token"],
    ]
    assert state.head_object("b", "k") == v2.value
    assert state.head_object("b", "k", first["version_token"]) == v1
    assert state.bucket_usage("b") == Usage(2, 5)


def test_delete_with_versioning_adds_a_marker_and_keeps_the_versions(f: Factory) -> None:
    state = make_state(f, versioning=True)
    applied(state, f.put("k", 2))
    delete = f.delete("k")
    outcome = applied(state, delete)
    marker = outcome.value
    assert isinstance(marker, ObjectVersion) and marker.is_delete_marker
    assert marker.version_id == delete["version_token"]
    assert outcome.released_payloads == ()
    assert state.head_object("b", "k") == marker
    assert state.bucket_usage("b") == Usage(1, 2)
    assert keys_of(state) == []
    assert state.apply(f.delete("k")).error_code == "NoSuchKey"


def test_deleting_the_latest_marker_makes_the_previous_version_visible(f: Factory) -> None:
    state = make_state(f, versioning=True)
    version = applied(state, f.put("k", 2)).value
    marker = applied(state, f.delete("k")).value
    assert isinstance(marker, ObjectVersion) and marker.version_id is not None
    outcome = applied(state, f.delete("k", marker.version_id))
    assert outcome.value == marker
    assert outcome.released_payloads == ()
    assert state.head_object("b", "k") == version
    assert keys_of(state) == ["k"]


def test_deleting_a_version_for_good_releases_it_and_removes_an_emptied_key(f: Factory) -> None:
    state = make_state(f, versioning=True)
    put = f.put("k", 2)
    applied(state, put)
    outcome = applied(state, f.delete("k", put["version_token"]))
    assert outcome.released_payloads == (put["payload_id"],)
    assert state.head_object("b", "k") is None
    assert state.list_versions("b").versions == ()
    assert state.bucket_usage("b") == Usage(0, 0)


def test_deleting_an_unknown_version_is_no_such_version(f: Factory) -> None:
    state = make_state(f, versioning=True)
    applied(state, f.put("k"))
    assert state.apply(f.delete("k", "v-missing")).error_code == "NoSuchVersion"
    assert state.apply(f.delete("other", "v-missing")).error_code == "NoSuchVersion"


def test_null_names_the_null_version(f: Factory) -> None:
    state = make_state(f)
    null = applied(state, f.put("k", 2)).value
    applied(state, f.update(versioning_enabled=True))
    applied(state, f.put("k", 3))
    assert state.head_object("b", "k", NULL_VERSION_ID) == null
    outcome = applied(state, f.delete("k", NULL_VERSION_ID))
    assert outcome.value == null
    assert state.head_object("b", "k", NULL_VERSION_ID) is None
    assert state.bucket_usage("b") == Usage(1, 3)


def test_usage_counts_every_stored_version_but_not_markers(f: Factory) -> None:
    state = make_state(f, versioning=True)
    for size in (1, 2, 4):
        applied(state, f.put("k", size))
    applied(state, f.delete("k"))
    applied(state, f.put("j", 8))
    assert state.bucket_usage("b") == Usage(4, 15)
    assert tuple(state.counts()) == (1, 4, 15)


# -- conditions ----------------------------------------------------------------------------


def test_if_none_match_refuses_a_visible_key_and_releases_the_payload(f: Factory) -> None:
    state = make_state(f)
    applied(state, f.put("k"))
    before = state.freeze()
    event = f.put("k", if_none_match=True)
    outcome = state.apply(event)
    assert (outcome.ok, outcome.error_code) == (False, "PreconditionFailed")
    assert outcome.released_payloads == (event["payload_id"],)
    assert state.freeze() == before


def test_if_none_match_accepts_an_absent_or_deleted_key(f: Factory) -> None:
    state = make_state(f, versioning=True)
    applied(state, f.put("new", if_none_match=True))
    applied(state, f.put("gone"))
    applied(state, f.delete("gone"))
    applied(state, f.put("gone", if_none_match=True))


def test_if_match_requires_the_latest_etag(f: Factory) -> None:
    state = make_state(f)
    current = applied(state, f.put("k")).value
    assert isinstance(current, ObjectVersion)
    stale = f.put("k", if_match="0" * 64)
    outcome = state.apply(stale)
    assert outcome.error_code == "PreconditionFailed"
    assert outcome.released_payloads == (stale["payload_id"],)
    applied(state, f.put("k", if_match=current.etag))
    assert state.apply(f.put("absent", if_match=current.etag)).error_code == "PreconditionFailed"


def test_if_match_star_requires_a_visible_key(f: Factory) -> None:
    state = make_state(f)
    assert state.apply(f.put("k", if_match="*")).error_code == "PreconditionFailed"
    applied(state, f.put("k"))
    applied(state, f.put("k", if_match="*"))


def test_put_into_a_missing_bucket_is_refused_and_releases_the_payload(f: Factory) -> None:
    state = MetaState()
    event = f.put("k", bucket="ghost")
    outcome = state.apply(event)
    assert outcome.error_code == "NoSuchBucket"
    assert outcome.released_payloads == (event["payload_id"],)
    assert state.apply(f.delete("k", bucket="ghost")).error_code == "NoSuchBucket"


# -- quota ---------------------------------------------------------------------------------


def test_put_past_the_quota_is_refused_and_changes_nothing(f: Factory) -> None:
    state = make_state(f, quota=10)
    applied(state, f.put("a", 6))
    before = state.freeze()
    event = f.put("b", 5)
    outcome = state.apply(event)
    assert outcome.error_code == "QuotaExceeded"
    assert outcome.released_payloads == (event["payload_id"],)
    assert state.freeze() == before
    applied(state, f.put("b", 4))
    assert state.bucket_usage("b").size_bytes == 10


def test_quota_is_net_of_the_replaced_object_without_versioning(f: Factory) -> None:
    state = make_state(f, quota=10)
    applied(state, f.put("a", 8))
    applied(state, f.put("a", 10))
    assert state.bucket_usage("b") == Usage(1, 10)
    assert state.quota_allows("b", "a", 10)
    assert not state.quota_allows("b", "other", 1)


def test_quota_counts_every_version_with_versioning(f: Factory) -> None:
    state = make_state(f, quota=10, versioning=True)
    applied(state, f.put("a", 6))
    assert not state.quota_allows("b", "a", 5)
    assert state.apply(f.put("a", 5)).error_code == "QuotaExceeded"


def test_quota_pre_check_counts_reserved_bytes(f: Factory) -> None:
    state = make_state(f, quota=10)
    applied(state, f.put("a", 4))
    assert state.quota_allows("b", "x", 6)
    assert not state.quota_allows("b", "x", 6, reserved=1)
    assert not state.quota_allows("ghost", "x", 0)


def test_lowering_the_quota_below_usage_refuses_any_put_that_keeps_it_over(f: Factory) -> None:
    state = make_state(f)
    applied(state, f.put("a", 8))
    applied(state, f.update(quota_bytes=5))
    assert state.apply(f.put("z", 0)).error_code == "QuotaExceeded"
    applied(state, f.put("a", 5))
    applied(state, f.update(quota_bytes=None))
    applied(state, f.put("z", 100))
