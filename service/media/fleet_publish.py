"""Making an accepted fleet attempt's outputs visible, and clearing a lost one's.

A fleet worker uploads every output as a multipart session under the job's output prefix
and never completes it: a session is durable and invisible (no listing, no GET) until it is
completed. When the server accepts the attempt, it journals ``VideoAttemptAccepted`` naming
the sessions, then completes them here, segments first and master playlists last (so a
master never names a segment that is not there), and journals the job ``completed``. A
crash in between leaves the job ``publishing``; the next start calls ``publish`` again,
which skips what was completed already. Every other open session under the prefix belongs
to an attempt the server gave up on, and is aborted: its parts are released and nothing of
it ever shows.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import contextlib
import logging

from service.common.api_errors import ApiError
from service.common.timefmt import now_ms
from service.media.video_jobs import remove_outputs
from service.media.video_outputs import MASTERS, store_order
from service.meta import VideoJob, records
from service.multipart.operations import abort_upload, complete_upload
from service.multipart.uploads import Uploads

log = logging.getLogger("service.media")


async def abort_sessions(
    uploads: Uploads,
    job: VideoJob,
    *,
    keep: frozenset[str] = frozenset(),
    only: frozenset[str] | None = None,
) -> int:
    """Abort the open multipart sessions under the job's prefix (those in ``only``, when
    given) but those in ``keep``; how many."""
    engine = uploads.engine
    aborted = 0
    for session in engine.state.uploads(job.bucket):
        if not session.key.startswith(job.output_prefix) or session.upload_id in keep:
            continue
        if only is not None and session.upload_id not in only:
            continue
        if session.upload_id in uploads.completing:
            continue
        with contextlib.suppress(ApiError):
            await abort_upload(uploads, session)
            aborted += 1
    return aborted


async def publish(multipart: Uploads, job: VideoJob) -> VideoJob | None:
    """Complete an accepted attempt's sessions and journal the job's verdict; the finished
    job, or None if it could not be journaled (read-only, or deleted meanwhile)."""
    engine = multipart.engine
    uploads = dict(job.publishing or {})
    await abort_sessions(multipart, job, keep=frozenset(uploads.values()))
    error = None
    for name in store_order(uploads):
        session = engine.state.get_upload(uploads[name])
        if session is None:
            continue  # completed before a restart
        parts = engine.state.upload_parts(session.upload_id)
        manifest = {"parts": [{"part_number": p.part_number, "etag": p.sha256} for p in parts]}
        try:
            await complete_upload(multipart, session, manifest)
        except ApiError as failure:
            if engine.read_only_reason is not None:
                return None
            log.error("video job %s: publishing %s failed: %s", job.job_id, name, failure)
            error = f"storing the output {name} failed: {failure.message}"
            break
    missing = [
        name
        for name in uploads
        if error is None and engine.state.head_object(job.bucket, job.output_prefix + name) is None
    ]
    if missing:
        error = f"outputs of the accepted attempt were lost: {', '.join(sorted(missing)[:3])}"
    if error:  # as the embedded runner does: a failed job leaves no output behind
        with contextlib.suppress(ApiError):
            await remove_outputs(engine, job)
            await abort_sessions(multipart, job)
    outputs = {kind: job.output_prefix + name for kind, name in MASTERS.items() if name in uploads}
    event = records.video_attempt_finished(
        job_id=job.job_id,
        attempt=job.attempts,
        status="failed" if error else "completed",
        outputs={} if error else outputs,
        error=error,
        at=now_ms(),
    )
    try:
        outcome = await engine.commit(event)
    except ApiError:
        return None
    if not outcome.ok or not isinstance(outcome.value, VideoJob):
        return None
    return outcome.value
