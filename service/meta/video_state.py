"""Video packaging jobs and playback shares: their part of the metadata state and of ``apply``.

Kept apart from ``state`` because nothing here touches payloads: a job's outputs are
ordinary objects (stored and removed by the usual object events), and the job only records
where they are. ``MetaState`` dispatches the ``VideoJob*``/``VideoShare*`` events here and
calls ``forget_bucket`` when a bucket is deleted, so no job or share outlives its bucket (a
later bucket of the same name, perhaps of another owner, starts with none).

Lifecycle a job's events may take (``apply`` refuses anything else with InvalidState):

    queued -> processing -> completed | failed        (processing -> processing: a rerun
    queued -> failed                                   after a restart, or new progress)

A job's shares need it ``completed``; deleting the job deletes its shares. Progress is
journaled only with status changes; the runner keeps the finer figure in memory.

On a media fleet (``service.media.fleet_runner``) a job moves by attempts instead, each
checked against the job's count so that a stale or repeated record changes nothing:

    VideoAttemptStarted n     queued|processing (no attempt active, n = attempts + 1)
                              -> processing, attempt n active on its worker
    VideoAttemptEnded n       attempt n active -> queued (its lease lapsed, or cancelled)
    VideoAttemptAccepted n    attempt n active -> processing, publishing its uploads
    VideoAttemptFinished n    publishing -> completed; active or publishing -> failed

The embedded runner's ``queued -> processing`` counts an attempt too, and any of its
verdicts ends a fleet attempt left over from a start in the other mode.

Thread-safety: like ``MetaState``, mutate only on the event-loop thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from service.meta import fields, records
from service.meta.fields import MalformedEventError
from service.meta.model import VideoJob, VideoShare
from service.meta.outcome import Outcome, accepted, rejected

Handler = Callable[[Mapping[str, Any]], Outcome]

FINISHED = frozenset({"completed", "failed"})
_NEXT: dict[str, frozenset[str]] = {
    "queued": frozenset({"processing", "failed"}),
    "processing": frozenset({"processing", "completed", "failed"}),
    "completed": frozenset(),
    "failed": frozenset(),
}


def _fraction(event: Mapping[str, Any], name: str) -> float:
    value = event.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise MalformedEventError(f"field {name!r} must be a number from 0 to 1")
    return float(value)


class Media:
    """Jobs by id, shares by id, and each job's shares."""

    def __init__(self, bucket_exists: Callable[[str], bool]) -> None:
        """``bucket_exists`` answers from the state's buckets (a job needs its bucket)."""
        self._bucket_exists = bucket_exists
        self._jobs: dict[str, VideoJob] = {}
        self._shares: dict[str, VideoShare] = {}
        self._shares_by_job: dict[str, set[str]] = {}

    def load(self, jobs: Mapping[str, VideoJob], shares: Mapping[str, VideoShare]) -> None:
        """Hold copies of the given records (from a snapshot) instead of the current ones."""
        self._jobs = dict(jobs)
        self._shares = {}
        self._shares_by_job = {}
        for share in shares.values():
            self._add_share(share)

    def images(self) -> tuple[dict[str, VideoJob], dict[str, VideoShare]]:
        """Shallow copies of the containers (for a snapshot)."""
        return dict(self._jobs), dict(self._shares)

    def handlers(self) -> dict[str, Handler]:
        return {
            records.VIDEO_JOB_CREATED: self._job_created,
            records.VIDEO_JOB_UPDATED: self._job_updated,
            records.VIDEO_JOB_DELETED: self._job_deleted,
            records.VIDEO_ATTEMPT_STARTED: self._attempt_started,
            records.VIDEO_ATTEMPT_ENDED: self._attempt_ended,
            records.VIDEO_ATTEMPT_ACCEPTED: self._attempt_accepted,
            records.VIDEO_ATTEMPT_FINISHED: self._attempt_finished,
            records.VIDEO_SHARE_CREATED: self._share_created,
            records.VIDEO_SHARE_REVOKED: self._share_revoked,
        }

    def forget_bucket(self, bucket: str) -> None:
        """Drop every job of a deleted bucket, and their shares."""
        for job_id in [j.job_id for j in self._jobs.values() if j.bucket == bucket]:
            self._drop_job(job_id)

    # -- apply --------------------------------------------------------------------------

    def _job_created(self, event: Mapping[str, Any]) -> Outcome:
        at = fields.integer(event, "at")
        job = VideoJob(
            job_id=fields.text(event, "job_id"),
            bucket=fields.text(event, "bucket"),
            key=fields.text(event, "key"),
            created_by=fields.text(event, "created_by"),
            params=dict(fields.mapping(event, "params")),
            output_prefix=fields.text(event, "output_prefix"),
            status="queued",
            progress=0.0,
            outputs={},
            error=None,
            created_at=at,
            updated_at=at,
        )
        if not self._bucket_exists(job.bucket):
            return rejected("NoSuchBucket", f"bucket {job.bucket!r} does not exist")
        if job.job_id in self._jobs:
            return rejected("InvalidState", f"job {job.job_id!r} already exists")
        self._jobs[job.job_id] = job
        return accepted(job)

    def _job_updated(self, event: Mapping[str, Any]) -> Outcome:
        job_id = fields.text(event, "job_id")
        status = fields.text(event, "status")
        progress = _fraction(event, "progress")
        outputs = fields.string_map(event, "outputs")
        error = fields.optional_text(event, "error")
        at = fields.integer(event, "at")
        job = self._jobs.get(job_id)
        if job is None:
            return rejected("NoSuchJob", f"no job {job_id!r}")
        if status not in _NEXT.get(job.status, frozenset()):
            return rejected("InvalidState", f"job {job_id!r} cannot go {job.status} -> {status}")
        updated = replace(
            job,
            status=status,
            progress=progress,
            outputs=outputs,
            error=error,
            updated_at=at,
            attempts=job.attempts + (job.status == "queued" and status == "processing"),
            active=False,
            publishing=None,
        )
        self._jobs[job_id] = updated
        return accepted(updated)

    def _attempt(self, event: Mapping[str, Any]) -> tuple[VideoJob | None, int, int]:
        """The job the attempt event names (None if gone), the attempt number and ``at``."""
        job_id = fields.text(event, "job_id")
        attempt = fields.integer(event, "attempt", minimum=1)
        at = fields.integer(event, "at")
        return self._jobs.get(job_id), attempt, at

    def _stale(self, job: VideoJob | None, attempt: int, event: Mapping[str, Any]) -> Outcome:
        if job is None:
            return rejected("NoSuchJob", f"no job {fields.text(event, 'job_id')!r}")
        return rejected(
            "InvalidState",
            f"attempt {attempt} of job {job.job_id!r} is not the one running "
            f"(attempts {job.attempts}, {job.status})",
        )

    def _store(self, job: VideoJob) -> Outcome:
        self._jobs[job.job_id] = job
        return accepted(job)

    def _attempt_started(self, event: Mapping[str, Any]) -> Outcome:
        job, attempt, at = self._attempt(event)
        worker, host = fields.text(event, "worker"), fields.text(event, "host")
        if (
            job is None
            or job.status in FINISHED
            or job.active
            or job.publishing is not None
            or attempt != job.attempts + 1
        ):
            return self._stale(job, attempt, event)
        return self._store(
            replace(
                job,
                status="processing",
                progress=0.0,
                error=None,
                attempts=attempt,
                worker=worker or host,
                active=True,
                updated_at=at,
            )
        )

    def _attempt_ended(self, event: Mapping[str, Any]) -> Outcome:
        job, attempt, at = self._attempt(event)
        if fields.text(event, "reason") not in records.ATTEMPT_END_REASONS:
            raise MalformedEventError("unknown attempt end reason")
        if job is None or not job.active or attempt != job.attempts:
            return self._stale(job, attempt, event)
        return self._store(replace(job, status="queued", progress=0.0, active=False, updated_at=at))

    def _attempt_accepted(self, event: Mapping[str, Any]) -> Outcome:
        job, attempt, at = self._attempt(event)
        uploads = fields.string_map(event, "uploads")
        if not uploads:
            raise MalformedEventError("an accepted attempt names its uploads")
        if job is None or not job.active or attempt != job.attempts:
            return self._stale(job, attempt, event)
        return self._store(replace(job, active=False, publishing=uploads, updated_at=at))

    def _attempt_finished(self, event: Mapping[str, Any]) -> Outcome:
        job, attempt, at = self._attempt(event)
        status = fields.text(event, "status")
        outputs = fields.string_map(event, "outputs")
        error = fields.optional_text(event, "error")
        if status not in FINISHED:
            raise MalformedEventError("an attempt finishes completed or failed")
        publishing = job is not None and job.publishing is not None
        running = job is not None and (job.active or publishing)
        if (
            job is None
            or attempt != job.attempts
            or not running
            or (status == "completed" and not publishing)
        ):
            return self._stale(job, attempt, event)
        return self._store(
            replace(
                job,
                status=status,
                progress=1.0 if status == "completed" else job.progress,
                outputs=outputs,
                error=error,
                active=False,
                publishing=None,
                updated_at=at,
            )
        )

    def _job_deleted(self, event: Mapping[str, Any]) -> Outcome:
        job_id = fields.text(event, "job_id")
        fields.integer(event, "at")
        job = self._jobs.get(job_id)
        if job is None:
            return rejected("NoSuchJob", f"no job {job_id!r}")
        self._drop_job(job_id)
        return accepted(job)

    def _share_created(self, event: Mapping[str, Any]) -> Outcome:
        share_id = fields.text(event, "share_id")
        job_id = fields.text(event, "job_id")
        created_by = fields.text(event, "created_by")
        expires_at = fields.integer(event, "expires_at")
        at = fields.integer(event, "at")
        job = self._jobs.get(job_id)
        if job is None:
            return rejected("NoSuchJob", f"no job {job_id!r}")
        if job.status != "completed":
            return rejected("InvalidState", f"job {job_id!r} is {job.status}, not completed")
        if share_id in self._shares:
            return rejected("InvalidState", f"share {share_id!r} already exists")
        share = VideoShare(share_id, job_id, job.bucket, created_by, at, expires_at)
        self._add_share(share)
        return accepted(share)

    def _share_revoked(self, event: Mapping[str, Any]) -> Outcome:
        share_id = fields.text(event, "share_id")
        fields.text(event, "reason")
        fields.integer(event, "at")
        share = self._shares.pop(share_id, None)
        if share is None:
            return rejected("NoSuchShare", f"no share {share_id!r}")
        self._shares_by_job[share.job_id].discard(share_id)
        return accepted(share)

    def _add_share(self, share: VideoShare) -> None:
        self._shares[share.share_id] = share
        self._shares_by_job.setdefault(share.job_id, set()).add(share.share_id)

    def _drop_job(self, job_id: str) -> None:
        del self._jobs[job_id]
        for share_id in self._shares_by_job.pop(job_id, set()):
            del self._shares[share_id]

    # -- reads --------------------------------------------------------------------------

    def job(self, job_id: str) -> VideoJob | None:
        return self._jobs.get(job_id)

    def jobs(self, bucket: str | None = None, status: str | None = None) -> list[VideoJob]:
        """Jobs (of ``bucket``, in ``status``; None: any) oldest first."""
        found = [
            job
            for job in self._jobs.values()
            if (bucket is None or job.bucket == bucket) and (status is None or job.status == status)
        ]
        return sorted(found, key=lambda job: (job.created_at, job.job_id))

    def job_counts(self) -> dict[str, int]:
        """How many jobs are in each status (for system info and the job-queue gauge)."""
        counts = dict.fromkeys(("queued", "processing", "completed", "failed"), 0)
        for job in self._jobs.values():
            counts[job.status] = counts.get(job.status, 0) + 1
        return counts

    def share(self, share_id: str) -> VideoShare | None:
        return self._shares.get(share_id)

    def shares_of(self, job_id: str) -> list[VideoShare]:
        return sorted(
            (self._shares[s] for s in self._shares_by_job.get(job_id, ())),
            key=lambda share: (share.created_at, share.share_id),
        )

    def expired_shares(self, now_ms: int) -> list[VideoShare]:
        """Shares past their ``expires_at``, for the task that journals their end."""
        return sorted(
            (s for s in self._shares.values() if s.expires_at <= now_ms),
            key=lambda share: share.share_id,
        )
