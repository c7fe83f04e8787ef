"""A lifecycle delete only removes the version it judged: ``apply``-level interleavings.

The pass reads the state, judges a version due, then journals the delete; other records (a
PUT, a DELETE of a version id, a completion) may be applied in between. Here each
interleaving is made deterministic by applying the records by hand in that order: the
judgment is taken from the state as the pass would take it, then the racing record is
applied, then the lifecycle's delete, which must be refused (``PreconditionFailed``) and
change nothing, or, with no race, accepted.
"""

from __future__ import annotations

from service.meta import MetaState, ObjectVersion, records
from service.meta.lifecycle_state import EXPIRE, LONE_MARKER, NONCURRENT, is_due, judgment
from service.meta.outcome import Outcome
from tests.meta.factory import Factory, applied

CUTOFF_GAP = 1_000
"""The cutoff lies this many ms after the judged version was written: it is due."""


def state_with(f: Factory, *, versioning: bool) -> MetaState:
    state = MetaState()
    applied(state, f.bucket(versioning=versioning))
    return state


def judged_delete(
    f: Factory, state: MetaState, key: str, kind: str, version: ObjectVersion, cutoff: int
) -> records.Event:
    """The record the pass journals for ``version`` (asserting the pass would judge it due)."""
    history = state.object_versions("b", key)
    assert is_due(kind, history, history.index(version), cutoff)
    return records.object_deleted(
        bucket="b",
        key=key,
        version_id=None if kind == EXPIRE else (version.version_id or "null"),
        version_token=f.fresh("v"),
        at=f.at(),
        judged=judgment(kind, version, cutoff),
    )


def refused_unchanged(state: MetaState, event: records.Event) -> Outcome:
    before = state.freeze()
    usage = state.bucket_usage("b")
    outcome = state.apply(event)
    assert not outcome.ok
    assert outcome.error_code == "PreconditionFailed", outcome
    assert state.freeze() == before
    assert state.bucket_usage("b") == usage
    return outcome


def current(state: MetaState, key: str) -> ObjectVersion:
    version = state.head_object("b", key)
    assert version is not None
    return version


def test_expire_without_a_race_deletes_the_judged_version() -> None:
    for versioning in (False, True):
        f = Factory()
        state = state_with(f, versioning=versioning)
        applied(state, f.put("k"))
        old = current(state, "k")
        outcome = applied(state, judged_delete(f, state, "k", EXPIRE, old, old.updated_at + 1))
        assert state.head_object("b", "k") is None or current(state, "k").is_delete_marker
        assert outcome.value is not None


def test_expire_loses_to_an_overwrite_queued_before_it_unversioned() -> None:
    f = Factory()
    state = state_with(f, versioning=False)
    applied(state, f.put("k"))
    old = current(state, "k")
    delete = judged_delete(f, state, "k", EXPIRE, old, old.updated_at + CUTOFF_GAP)
    applied(state, f.put("k", size=7))  # the PUT's record was queued first
    new = current(state, "k")
    refused_unchanged(state, delete)
    assert current(state, "k") == new and new.size == 7
    assert new.payload_id in state.referenced_payloads()


def test_expire_loses_to_an_overwrite_versioned_and_adds_no_marker() -> None:
    f = Factory()
    state = state_with(f, versioning=True)
    applied(state, f.put("k"))
    old = current(state, "k")
    delete = judged_delete(f, state, "k", EXPIRE, old, old.updated_at + CUTOFF_GAP)
    applied(state, f.put("k", size=5))
    refused_unchanged(state, delete)
    assert len(state.object_versions("b", "k")) == 2
    assert not current(state, "k").is_delete_marker


def test_expire_is_refused_even_when_the_new_version_is_written_before_the_cutoff() -> None:
    """The fingerprint, not only the age, decides: a different version is never deleted by
    a judgment about another one."""
    f = Factory()
    state = state_with(f, versioning=False)
    applied(state, f.put("k"))
    old = current(state, "k")
    delete = judged_delete(f, state, "k", EXPIRE, old, old.updated_at + 10 * CUTOFF_GAP)
    applied(state, f.put("k", size=3))  # written at +1 ms: older than the cutoff too
    refused_unchanged(state, delete)


def test_expire_of_a_key_deleted_and_written_again_is_refused() -> None:
    f = Factory()
    state = state_with(f, versioning=False)
    applied(state, f.put("k"))
    old = current(state, "k")
    delete = judged_delete(f, state, "k", EXPIRE, old, old.updated_at + CUTOFF_GAP)
    applied(state, f.delete("k"))
    applied(state, f.put("k", size=9))
    refused_unchanged(state, delete)
    assert current(state, "k").size == 9


def test_noncurrent_delete_is_refused_once_the_version_became_current_again() -> None:
    f = Factory()
    state = state_with(f, versioning=True)
    applied(state, f.put("k", size=1))
    older = current(state, "k")
    applied(state, f.put("k", size=2))
    newer = current(state, "k")
    delete = judged_delete(f, state, "k", NONCURRENT, older, newer.created_at + 1)
    applied(state, f.delete("k", newer.version_id))  # the user removes the newer version
    refused_unchanged(state, delete)
    assert current(state, "k") == older


def test_noncurrent_delete_is_refused_when_its_successor_is_too_young_now() -> None:
    """The successor that made it due is gone and the next one is newer than the cutoff."""
    f = Factory()
    state = state_with(f, versioning=True)
    applied(state, f.put("k", size=1))
    older = current(state, "k")
    applied(state, f.put("k", size=2))
    newer = current(state, "k")
    cutoff = newer.created_at + 1
    delete = judged_delete(f, state, "k", NONCURRENT, older, cutoff)
    applied(state, f.delete("k", newer.version_id))
    f.now = cutoff + CUTOFF_GAP
    applied(state, f.put("k", size=3))
    refused_unchanged(state, delete)
    assert [v.size for v in state.object_versions("b", "k")] == [1, 3]


def test_noncurrent_delete_of_a_replaced_null_version_is_refused() -> None:
    """A null version judged noncurrent, replaced by a new null version (versioning
    suspended) before the delete applies: the new payload stays."""
    f = Factory()
    state = state_with(f, versioning=False)
    applied(state, f.put("k", size=1))
    null = current(state, "k")
    applied(state, f.update(versioning_enabled=True))
    applied(state, f.put("k", size=2))
    delete = judged_delete(f, state, "k", NONCURRENT, null, current(state, "k").created_at + 1)
    applied(state, f.update(versioning_enabled=False))
    applied(state, f.put("k", size=4))  # replaces the null version, now the current one
    refused_unchanged(state, delete)
    assert current(state, "k").size == 4


def test_noncurrent_delete_without_a_race_removes_exactly_that_version() -> None:
    f = Factory()
    state = state_with(f, versioning=True)
    applied(state, f.put("k", size=1))
    older = current(state, "k")
    applied(state, f.put("k", size=2))
    delete = judged_delete(f, state, "k", NONCURRENT, older, current(state, "k").created_at + 1)
    applied(state, f.put("k", size=3))  # an unrelated newer PUT does not matter
    applied(state, delete)
    assert [v.size for v in state.object_versions("b", "k")] == [2, 3]


def test_lone_marker_cleanup_is_refused_once_a_put_landed() -> None:
    f = Factory()
    state = state_with(f, versioning=True)
    applied(state, f.put("k", size=1))
    first = current(state, "k")
    applied(state, f.delete("k"))
    applied(state, f.delete("k", first.version_id))
    marker = current(state, "k")
    assert marker.is_delete_marker and len(state.object_versions("b", "k")) == 1
    delete = judged_delete(f, state, "k", LONE_MARKER, marker, marker.updated_at + 1)
    applied(state, f.put("k", size=6))
    refused_unchanged(state, delete)
    assert current(state, "k").size == 6


def test_lone_marker_cleanup_without_a_race_removes_the_key() -> None:
    f = Factory()
    state = state_with(f, versioning=True)
    applied(state, f.put("k", size=1))
    first = current(state, "k")
    applied(state, f.delete("k"))
    applied(state, f.delete("k", first.version_id))
    marker = current(state, "k")
    applied(state, judged_delete(f, state, "k", LONE_MARKER, marker, marker.updated_at + 1))
    assert state.object_versions("b", "k") == ()


def test_a_malformed_judgment_is_refused_as_malformed_and_changes_nothing() -> None:
    f = Factory()
    state = state_with(f, versioning=False)
    applied(state, f.put("k"))
    before = state.freeze()
    bad = dict(f.delete("k"), judged={"kind": "expire", "version_id": None})
    outcome = state.apply(bad)
    assert not outcome.ok
    assert outcome.error_code == "InternalError"
    unknown = f.delete("k")
    unknown["judged"] = dict(judgment(EXPIRE, current(state, "k"), 0), kind="whatever")
    assert not state.apply(unknown).ok
    assert state.freeze().objects == before.objects
    assert state.anomalies() == {"malformed:ObjectDeleted": 2}


def test_lifecycle_abort_only_closes_a_session_older_than_its_cutoff() -> None:
    f = Factory()
    state = state_with(f, versioning=False)
    started = f.start("big")
    applied(state, started)
    applied(state, f.part(started["upload_id"], 1))
    young = records.upload_aborted(
        upload_id=started["upload_id"], reason="expired", at=f.at(), created_before=started["at"]
    )
    before = state.freeze()
    outcome = state.apply(young)
    assert outcome.error_code == "PreconditionFailed"
    assert state.freeze() == before
    due = records.upload_aborted(
        upload_id=started["upload_id"], reason="expired", at=f.at(), created_before=f.now
    )
    applied(state, due)
    assert state.get_upload(started["upload_id"]) is None


def test_lifecycle_abort_loses_to_a_completion_applied_first() -> None:
    f = Factory()
    state = state_with(f, versioning=False)
    started = f.start("big")
    applied(state, started)
    applied(state, f.part(started["upload_id"], 1))
    abort = records.upload_aborted(
        upload_id=started["upload_id"], reason="expired", at=f.at(), created_before=f.now
    )
    applied(state, f.complete(started["upload_id"], [1]))
    made = current(state, "big")
    outcome = state.apply(abort)
    assert outcome.error_code == "NoSuchUpload"
    assert current(state, "big") == made
    assert made.payload_id in state.referenced_payloads()


def test_replay_of_the_records_reaches_the_same_state() -> None:
    """Judgments are inside the records: replaying them decides the same way."""
    f = Factory()
    state = MetaState()
    log = [f.bucket()]
    applied(state, log[0])
    first = f.put("k")
    applied(state, first)
    delete = judged_delete(f, state, "k", EXPIRE, current(state, "k"), f.now + CUTOFF_GAP)
    second = f.put("k", size=8)
    applied(state, second)
    refused_unchanged(state, delete)
    log += [first, second, delete]
    again = MetaState()
    for event in log:
        again.apply(event)
    assert again == state
