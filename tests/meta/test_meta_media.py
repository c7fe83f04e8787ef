"""Video jobs and shares in the metadata state: lifecycle, refusals, and what goes with what."""

from __future__ import annotations

import pytest

from service.meta import MetaState, records
from tests.meta.factory import Factory, applied


def state_with_job(status: str = "queued") -> tuple[Factory, MetaState, str]:
    f, state = Factory(), MetaState()
    applied(state, f.bucket())
    job = f.job()
    applied(state, job)
    if status == "completed":
        for event in f.job_done(job["job_id"]):
            applied(state, event)
    elif status != "queued":
        applied(state, f.job_update(job["job_id"], status))
    return f, state, job["job_id"]


def test_a_new_job_is_queued_with_its_params() -> None:
    _, state, job_id = state_with_job()
    job = state.media.job(job_id)
    assert job is not None
    assert (job.status, job.progress, job.outputs, job.error) == ("queued", 0.0, {}, None)
    assert job.params["formats"] == ["hls", "dash"]
    assert job.output_prefix == f"videos/{job_id}/"
    assert job.created_at == job.updated_at


def test_a_job_needs_its_bucket_and_a_fresh_id() -> None:
    f, state = Factory(), MetaState()
    job = f.job()
    assert state.apply(job).error_code == "NoSuchBucket"
    applied(state, f.bucket())
    applied(state, job)
    assert state.apply(job).error_code == "InvalidState"


def test_a_job_goes_through_its_lifecycle_and_then_stays_put() -> None:
    f, state, job_id = state_with_job()
    for event in f.job_done(job_id):
        applied(state, event)
    job = state.media.job(job_id)
    assert job is not None and job.status == "completed" and job.progress == 1.0
    assert job.outputs["hls"].endswith("hls/master.m3u8")
    assert job.updated_at > job.created_at
    for status in ("queued", "processing", "failed", "completed"):
        assert state.apply(f.job_update(job_id, status)).error_code == "InvalidState"


def test_a_processing_job_may_be_processed_again_after_a_restart() -> None:
    f, state, job_id = state_with_job("processing")
    applied(state, f.job_update(job_id, "processing", progress=0.0))
    assert state.apply(f.job_update(job_id, "queued")).error_code == "InvalidState"
    applied(state, f.job_update(job_id, "failed", progress=0.3, error="broken"))
    job = state.media.job(job_id)
    assert job is not None and (job.status, job.progress, job.error) == ("failed", 0.3, "broken")


def test_updates_and_deletes_of_unknown_jobs_are_refused() -> None:
    f, state, _ = state_with_job()
    assert state.apply(f.job_update("nope", "processing")).error_code == "NoSuchJob"
    assert state.apply(records.video_job_deleted(job_id="nope", at=1)).error_code == "NoSuchJob"
    assert state.apply(f.share("nope")).error_code == "NoSuchJob"


@pytest.mark.parametrize("status", ["queued", "processing", "failed"])
def test_only_a_completed_job_can_be_shared(status: str) -> None:
    f, state, job_id = state_with_job(status)
    assert state.apply(f.share(job_id)).error_code == "InvalidState"


def test_shares_are_revoked_once_and_go_with_their_job() -> None:
    f, state, job_id = state_with_job("completed")
    first, second = f.share(job_id), f.share(job_id)
    applied(state, first)
    applied(state, second)
    assert [s.share_id for s in state.media.shares_of(job_id)] == [
        first["share_id"],
        second["share_id"],
    ]
    revoke = records.video_share_revoked(share_id=first["share_id"], reason="revoked", at=f.at())
    applied(state, revoke)
    assert state.apply(revoke).error_code == "NoSuchShare"
    assert state.media.share(first["share_id"]) is None
    applied(state, records.video_job_deleted(job_id=job_id, at=f.at()))
    assert state.media.job(job_id) is None
    assert state.media.share(second["share_id"]) is None
    assert state.media.shares_of(job_id) == []


def test_a_deleted_bucket_takes_its_jobs_and_shares_along() -> None:
    f, state, job_id = state_with_job("completed")
    applied(state, f.bucket("other"))
    other = f.job(bucket="other")
    applied(state, other)
    share = f.share(job_id)
    applied(state, share)
    applied(state, f.drop_bucket("b"))
    assert state.media.job(job_id) is None and state.media.share(share["share_id"]) is None
    assert [job.job_id for job in state.media.jobs()] == [other["job_id"]]
    applied(state, f.bucket("b"))
    assert state.media.jobs(bucket="b") == []


def test_a_refused_bucket_delete_keeps_the_jobs() -> None:
    f, state, job_id = state_with_job()
    applied(state, f.put("k"))
    assert state.apply(f.drop_bucket("b")).error_code == "BucketNotEmpty"
    assert state.media.job(job_id) is not None


def test_jobs_are_listed_oldest_first_and_filtered() -> None:
    f, state, first = state_with_job()
    applied(state, f.bucket("other"))
    second = f.job(bucket="other")
    applied(state, second)
    applied(state, f.job_update(second["job_id"], "processing"))
    assert [j.job_id for j in state.media.jobs()] == [first, second["job_id"]]
    assert [j.job_id for j in state.media.jobs(bucket="other")] == [second["job_id"]]
    assert [j.job_id for j in state.media.jobs(status="queued")] == [first]
    assert state.media.jobs(bucket="b", status="processing") == []


def test_expired_shares_are_listed_for_the_reaper() -> None:
    f, state, job_id = state_with_job("completed")
    short, long = f.share(job_id, ttl_ms=10), f.share(job_id, ttl_ms=10_000)
    applied(state, short)
    applied(state, long)
    assert [s.share_id for s in state.media.expired_shares(short["expires_at"])] == [
        short["share_id"]
    ]
    assert state.media.expired_shares(short["at"]) == []


def test_a_malformed_job_event_changes_nothing() -> None:
    f, state, job_id = state_with_job("processing")
    event = f.job_update(job_id, "completed", progress=1.0)
    event["progress"] = 1.5
    outcome = state.apply(event)
    assert not outcome.ok and outcome.error_code == "InternalError"
    job = state.media.job(job_id)
    assert job is not None and job.status == "processing"
    assert state.anomalies() == {"malformed:VideoJobUpdated": 1}


def test_event_constructors_refuse_values_no_event_may_carry() -> None:
    with pytest.raises(ValueError):
        records.video_job_updated(
            job_id="j", status="paused", progress=0.0, outputs={}, error=None, at=1
        )
    with pytest.raises(ValueError):
        records.video_job_updated(
            job_id="j", status="queued", progress=2.0, outputs={}, error=None, at=1
        )
    with pytest.raises(ValueError):
        records.video_share_revoked(share_id="s", reason="bored", at=1)


# -- media fleet attempts ------------------------------------------------------------------


def started(f: Factory, job_id: str, attempt: int, worker: str = "w1") -> records.Event:
    return records.video_attempt_started(
        job_id=job_id, attempt=attempt, worker=worker, host="h", at=f.at()
    )


def ended(f: Factory, job_id: str, attempt: int) -> records.Event:
    return records.video_attempt_ended(
        job_id=job_id, attempt=attempt, reason="lease_expired", at=f.at()
    )


def accepted_(f: Factory, job_id: str, attempt: int) -> records.Event:
    return records.video_attempt_accepted(
        job_id=job_id, attempt=attempt, uploads={"hls/master.m3u8": "u1"}, at=f.at()
    )


def finished(f: Factory, job_id: str, attempt: int, status: str = "completed") -> records.Event:
    return records.video_attempt_finished(
        job_id=job_id,
        attempt=attempt,
        status=status,
        outputs={"hls": "videos/hls/master.m3u8"} if status == "completed" else {},
        error=None if status == "completed" else "broken",
        at=f.at(),
    )


def test_attempts_run_one_at_a_time_in_order_and_each_counts() -> None:
    f, state, job_id = state_with_job()
    assert state.apply(started(f, job_id, 2)).error_code == "InvalidState"  # not the next
    applied(state, started(f, job_id, 1, "w1"))
    job = state.media.job(job_id)
    assert job is not None and (job.status, job.attempts, job.worker, job.active) == (
        "processing",
        1,
        "w1",
        True,
    )
    assert state.apply(started(f, job_id, 2)).error_code == "InvalidState"  # 1 still runs
    applied(state, ended(f, job_id, 1))
    job = state.media.job(job_id)
    assert job is not None and (job.status, job.attempts, job.active) == ("queued", 1, False)
    # The lost attempt can neither end again, be accepted nor finish.
    for stale in (ended(f, job_id, 1), accepted_(f, job_id, 1), finished(f, job_id, 1)):
        assert state.apply(stale).error_code == "InvalidState"
    applied(state, started(f, job_id, 2, "w2"))
    applied(state, accepted_(f, job_id, 2))
    job = state.media.job(job_id)
    assert job is not None and job.publishing == {"hls/master.m3u8": "u1"} and not job.active
    assert state.apply(ended(f, job_id, 2)).error_code == "InvalidState"  # accepted: no lease
    applied(state, finished(f, job_id, 2))
    job = state.media.job(job_id)
    assert job is not None
    assert (job.status, job.attempts, job.worker, job.progress) == ("completed", 2, "w2", 1.0)
    assert job.publishing is None and job.outputs == {"hls": "videos/hls/master.m3u8"}
    # Exactly once: nothing moves a finished job.
    for late in (finished(f, job_id, 2), started(f, job_id, 3), accepted_(f, job_id, 2)):
        assert state.apply(late).error_code == "InvalidState"


def test_an_attempt_completes_only_once_accepted_but_may_fail_while_running() -> None:
    f, state, job_id = state_with_job()
    applied(state, started(f, job_id, 1))
    assert state.apply(finished(f, job_id, 1)).error_code == "InvalidState"
    applied(state, finished(f, job_id, 1, "failed"))
    job = state.media.job(job_id)
    assert job is not None and (job.status, job.error, job.active) == ("failed", "broken", False)


def test_the_embedded_runner_counts_its_start_as_an_attempt() -> None:
    _, state, job_id = state_with_job("completed")
    job = state.media.job(job_id)
    assert job is not None and (job.attempts, job.worker, job.active) == (1, None, False)


def test_attempt_records_replay_to_the_same_state_through_a_snapshot() -> None:
    from service.meta.snapshot import decode_snapshot, encode_snapshot

    f, state, job_id = state_with_job()
    other = f.job()
    applied(state, other)
    applied(state, started(f, job_id, 1))
    applied(state, started(f, other["job_id"], 1))
    applied(state, accepted_(f, other["job_id"], 1))
    restored = decode_snapshot(encode_snapshot(state))
    assert restored == state
    tail = [ended(f, job_id, 1), started(f, job_id, 2), finished(f, other["job_id"], 1)]
    for event in tail:
        applied(state, event)
        applied(restored, event)
    assert restored == state and decode_snapshot(encode_snapshot(restored)) == state
