"""A media fleet worker's lease token on the object routes: the ``via="job"`` principal.

``service.http.authn`` hands a Bearer token starting ``vjt.`` here. It is good while its
signature holds, its lease has not expired (``exp``, renewed by every heartbeat), and the
journaled job still runs that very attempt on a worker (``VideoJob.active``): an attempt the
server gave up on (lapsed lease, cancelled job, another attempt accepted) is refused at once
on every serving process, whatever its token's expiry says. The principal acts for no user:
``service.auth.policy`` lets it read the job's source and upload under its output prefix,
nothing else (403 AccessDenied outside them).

Thread-safety: event-loop thread only (reads the state).
"""

from __future__ import annotations

from service.auth import (
    AccessDeniedError,
    Principal,
    SignatureExpiredError,
    SignatureInvalidError,
    TokenError,
)
from service.auth.job_tokens import verify_job_token
from service.auth.policy import JobGrant
from service.meta import MetaState

JOB_USERNAME = "media-worker"
"""The name a job principal shows in logs (it is no user's)."""


def job_principal(state: MetaState, secret: bytes, token: str, now: float) -> Principal:
    """The principal of a valid lease token, or 403 (expired, invalid, attempt over)."""
    claims = verify_job_token(secret, token, now)
    if claims is TokenError.EXPIRED:
        raise SignatureExpiredError("the job token's lease has ended")
    if isinstance(claims, TokenError) or claims.use != "lease":
        raise SignatureInvalidError("not a valid job lease token")
    job = state.media.job(claims.job_id)
    if job is None or not job.active or job.attempts != claims.attempt:
        raise AccessDeniedError("the job token's attempt is no longer running")
    return Principal(
        user_id=job.created_by,
        username=JOB_USERNAME,
        role="user",
        credential_id=f"{job.job_id}#{claims.attempt}",
        via="job",
        grant=JobGrant(bucket=job.bucket, source_key=job.key, prefix=job.output_prefix),
    )


MAX_OPEN_UPLOADS_PER_JOB = 100_000
"""Open multipart sessions under one job's output prefix (each output of an attempt is one
until the server accepts the attempt); a job token counts against this, not its creator's
per-user cap, so a long video never fails for its owner's other uploads."""


def job_uploads_held(state: MetaState, principal: Principal, now_ms: int) -> tuple[str, int, int]:
    """For a job principal's multipart init: what the cap counts (the job), how many open
    sessions it holds now (under its prefix), and the cap."""
    grant = principal.grant
    assert grant is not None
    held = sum(
        1
        for session in state.uploads(grant.bucket)
        if session.key.startswith(grant.prefix) and session.expires_at > now_ms
    )
    return f"job {principal.credential_id.partition('#')[0]}", held, MAX_OPEN_UPLOADS_PER_JOB
