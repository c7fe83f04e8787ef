"""Packaging jobs as operations: create, look up, delete (cancel), remove their outputs.

Transport-free, like ``service.ops.objects``: the HTTP handlers parse and authorise, these
functions check the state, journal the event and hand the job to the runner.

Deleting a job, in any status, is how it is cancelled: the runner stops it (kills its
worker, or drops it from the queue) and waits, the outputs already stored are removed, and
only then is ``VideoJobDeleted`` journaled. A crash before that record leaves the job in the
journal, so it is run again after the restart (DELETE it again); a crash after it can leave
no output behind, since they were removed first.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import secrets
from typing import Protocol

from service.common.api_errors import ApiError, ServiceError
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.media.video_outputs import default_output_prefix, is_output_name
from service.media.video_params import JobParams
from service.meta import VideoJob, records
from service.ops.buckets import outcome_error, require_bucket
from service.ops.objects import delete_object, resolve_version

LIST_PAGE = 1000


class JobRunner(Protocol):
    """What these operations need of the runner (``video_runner.VideoJobRunner``), named
    here so that the runner, which imports ``remove_outputs``, is not imported back."""

    def submit(self, job_id: str) -> None: ...

    async def cancel(self, job_id: str) -> None: ...


def new_job_id() -> str:
    """``vj_`` and 20 random hex digits (safe in URLs and scratch directory names)."""
    return "vj_" + secrets.token_hex(10)


def require_job(engine: Engine, job_id: str) -> VideoJob:
    """The job, or 404 NoSuchJob."""
    job = engine.state.media.job(job_id)
    if job is None:
        raise ApiError("NoSuchJob", f"no video job {job_id!r}")
    return job


async def create_job(
    engine: Engine,
    runner: JobRunner,
    *,
    bucket: str,
    key: str,
    params: JobParams,
    output_prefix: str | None,
    created_by: str,
) -> VideoJob:
    """Journal a new ``queued`` job of an existing object and queue it.

    404 NoSuchBucket / NoSuchKey when the source is missing now; a source that cannot be
    decoded is found out by the run, which fails the job.
    """
    engine.ensure_writable()
    require_bucket(engine, bucket)
    resolve_version(engine, bucket, key, None)
    job_id = new_job_id()
    outcome = await engine.commit(
        records.video_job_created(
            job_id=job_id,
            bucket=bucket,
            key=key,
            created_by=created_by,
            params=params.to_document(),
            output_prefix=output_prefix or default_output_prefix(job_id),
            at=now_ms(),
        )
    )
    if not outcome.ok or not isinstance(outcome.value, VideoJob):
        raise outcome_error(outcome)
    runner.submit(job_id)
    return outcome.value


def output_keys(engine: Engine, job: VideoJob) -> list[str]:
    """The keys under the job's prefix that are outputs of a job (``is_output_name``)."""
    prefix = job.output_prefix
    keys: list[str] = []
    start_after: str | None = None
    while True:
        page = engine.state.list_objects(
            job.bucket, prefix=prefix, limit=LIST_PAGE, start_after=start_after
        )
        keys.extend(v.key for v in page.objects if is_output_name(v.key[len(prefix) :]))
        if not page.truncated or page.last_item is None:
            return keys
        start_after = page.last_item


async def remove_outputs(engine: Engine, job: VideoJob) -> int:
    """Delete every output of the job (as a DELETE of the key would: a delete marker in a
    versioned bucket); how many keys were deleted."""
    removed = 0
    for key in output_keys(engine, job):
        try:
            await delete_object(engine, job.bucket, key, None)
        except ServiceError as error:
            if error.code not in ("NoSuchKey", "NoSuchBucket"):
                raise
            continue  # gone meanwhile
        removed += 1
    return removed


async def delete_job(engine: Engine, runner: JobRunner, job: VideoJob) -> None:
    """Cancel the job if it runs, remove its outputs, then journal its deletion."""
    engine.ensure_writable()
    await runner.cancel(job.job_id)
    current = engine.state.media.job(job.job_id)
    if current is None:
        raise ApiError("NoSuchJob", f"no video job {job.job_id!r}")
    await remove_outputs(engine, current)
    outcome = await engine.commit(records.video_job_deleted(job_id=job.job_id, at=now_ms()))
    if not outcome.ok:
        raise outcome_error(outcome)
