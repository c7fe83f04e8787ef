"""Multipart events: sessions, parts, completion (with versioning and quota) and aborts."""

from __future__ import annotations

from service.meta import MetaState, ObjectVersion, PartInfo, UploadSession, Usage
from tests.meta.factory import Factory, applied


def started(f: Factory, state: MetaState, **bucket: object) -> str:
    applied(state, f.bucket(**bucket))  # type: ignore[arg-type]
    event = f.start("movie.mp4")
    session = applied(state, event).value
    assert isinstance(session, UploadSession)
    return session.upload_id


def test_started_session_is_listed_with_its_settings() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket())
    event = f.start("movie.mp4")
    session = applied(state, event).value
    assert session == UploadSession(
        event["upload_id"],
        "b",
        "movie.mp4",
        "u1",
        "video/mp4",
        {"origin": "camera"},
        8 << 20,
        event["at"],
        event["expires_at"],
    )
    assert state.get_upload(event["upload_id"]) == session
    assert state.uploads("b") == [session] == state.uploads()
    assert state.uploads("other") == []


def test_upload_into_a_missing_bucket_is_refused() -> None:
    f, state = Factory(), MetaState()
    assert state.apply(f.start(bucket="ghost")).error_code == "NoSuchBucket"


def test_parts_are_kept_by_number_and_a_resent_part_replaces_the_old_one() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    second = f.part(upload_id, 2)
    first = f.part(upload_id, 1)
    applied(state, second)
    applied(state, first)
    resent = f.part(upload_id, 1, size=11)
    outcome = applied(state, resent)
    assert isinstance(outcome.value, PartInfo)
    assert outcome.released_payloads == (first["payload_id"],)
    assert [(p.part_number, p.payload_id, p.size) for p in state.upload_parts(upload_id)] == [
        (1, resent["payload_id"], 11),
        (2, second["payload_id"], 10),
    ]
    assert state.referenced_payloads() == {resent["payload_id"], second["payload_id"]}


def test_part_for_an_unknown_or_expired_upload_is_refused_and_released() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    unknown = f.part("up-missing", 1)
    outcome = state.apply(unknown)
    assert outcome.error_code == "NoSuchUpload"
    assert outcome.released_payloads == (unknown["payload_id"],)
    session = state.get_upload(upload_id)
    assert session is not None
    late = f.part(upload_id, 1, at=session.expires_at + 1)
    outcome = state.apply(late)
    assert outcome.error_code == "NoSuchUpload"
    assert outcome.released_payloads == (late["payload_id"],)
    assert state.expired_uploads(session.expires_at + 1) == [session]
    assert state.expired_uploads(session.expires_at) == []


def test_part_number_out_of_range_is_refused() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    for number in (0, 10_001):
        event = f.part(upload_id, number)
        outcome = state.apply(event)
        assert outcome.error_code == "InvalidPartNumber"
        assert outcome.released_payloads == (event["payload_id"],)
    assert state.upload_parts(upload_id) == []


def test_completion_creates_the_object_and_releases_every_part_named_or_not() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    parts = [f.part(upload_id, n) for n in (1, 2, 3)]
    for part in parts:
        applied(state, part)
    complete = f.complete(upload_id, [1, 3], size=20)
    outcome = applied(state, complete)
    version = outcome.value
    assert isinstance(version, ObjectVersion)
    assert (version.key, version.payload_id, version.size) == (
        "movie.mp4",
        complete["payload_id"],
        20,
    )
    assert (version.content_type, version.custom_metadata) == ("video/mp4", {"origin": "camera"})
    assert version.sha256 == complete["sha256"]
    assert sorted(outcome.released_payloads) == sorted(p["payload_id"] for p in parts)
    assert state.get_upload(upload_id) is None
    assert state.upload_parts(upload_id) == []
    assert state.uploads("b") == []
    assert state.referenced_payloads() == {complete["payload_id"]}
    assert state.bucket_usage("b") == Usage(1, 20)


def test_completion_replaces_the_null_version_without_versioning() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    old = f.put("movie.mp4", 5)
    applied(state, old)
    part = f.part(upload_id, 1)
    applied(state, part)
    outcome = applied(state, f.complete(upload_id, [1]))
    assert sorted(outcome.released_payloads) == sorted([old["payload_id"], part["payload_id"]])
    assert len(state.object_versions("b", "movie.mp4")) == 1


def test_completion_with_versioning_adds_a_version_named_by_its_token() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state, versioning=True)
    applied(state, f.put("movie.mp4", 5))
    applied(state, f.part(upload_id, 1))
    complete = f.complete(upload_id, [1])
    applied(state, complete)
    versions = state.object_versions("b", "movie.mp4")
    assert len(versions) == 2
    assert versions[-1].version_id == complete["version_token"]


def test_completion_naming_a_missing_part_changes_nothing_but_releases_the_join() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    applied(state, f.part(upload_id, 1))
    before = state.freeze()
    for numbers, code in (
        ([1, 2], "InvalidPart"),
        ([], "InvalidPart"),
        ([1, 1], "InvalidPartOrder"),
    ):
        complete = f.complete(upload_id, numbers)
        outcome = state.apply(complete)
        assert (outcome.error_code, outcome.released_payloads) == (code, (complete["payload_id"],))
        assert state.freeze() == before


def test_completion_past_the_quota_keeps_the_session_open() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state, quota=15)
    applied(state, f.part(upload_id, 1))
    before = state.freeze()
    complete = f.complete(upload_id, [1], size=16)
    outcome = state.apply(complete)
    assert (outcome.error_code, outcome.released_payloads) == (
        "QuotaExceeded",
        (complete["payload_id"],),
    )
    assert state.freeze() == before
    applied(state, f.complete(upload_id, [1], size=15))


def test_completion_of_an_unknown_or_expired_upload_is_no_such_upload() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    applied(state, f.part(upload_id, 1))
    session = state.get_upload(upload_id)
    assert session is not None
    late = f.complete(upload_id, [1], at=session.expires_at + 1)
    outcome = state.apply(late)
    assert (outcome.error_code, outcome.released_payloads) == (
        "NoSuchUpload",
        (late["payload_id"],),
    )
    assert state.apply(f.complete("up-missing", [1])).error_code == "NoSuchUpload"


def test_a_join_that_reuses_a_part_payload_is_not_released() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    part = f.part(upload_id, 1)
    applied(state, part)
    complete = f.complete(upload_id, [1])
    complete["payload_id"] = part["payload_id"]
    outcome = applied(state, complete)
    assert outcome.released_payloads == ()
    assert state.referenced_payloads() == {part["payload_id"]}


def test_abort_purges_the_session_and_releases_its_parts() -> None:
    f, state = Factory(), MetaState()
    upload_id = started(f, state)
    parts = [f.part(upload_id, n) for n in (1, 2)]
    for part in parts:
        applied(state, part)
    outcome = applied(state, f.abort(upload_id, "expired"))
    assert sorted(outcome.released_payloads) == sorted(p["payload_id"] for p in parts)
    assert state.get_upload(upload_id) is None
    assert state.apply(f.abort(upload_id)).error_code == "NoSuchUpload"
    assert state.referenced_payloads() == set()
