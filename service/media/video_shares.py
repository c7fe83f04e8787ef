"""Playback shares: create, revoke, expire, and resolve a playback request.

A share names one completed job; its token (``service.auth.share_tokens``) carries the
share id and the expiry, signed with the server secret. What a token grants: ``GET``/``HEAD``
of that job's outputs and nothing else, until it expires or the share is revoked (or the
job, or its bucket, is deleted). Resolution order, so each failure gets its own answer:

1. the token's signature and expiry: 403 SignatureInvalid / SignatureExpired;
2. the share and its job still exist: else 404 NoSuchShare;
3. the user who made the share still exists and is active, and the access key that made it
   (carried, signed, in the token; none when a bearer token made it) is still active: else
   403 AccessDenied, exactly as a presigned URL stops once its signer is disabled or its
   key revoked;
4. the path is an output name (``video_outputs.OUTPUT_NAME``; no ``..``, no other object
   under the prefix) and that object exists: else 404 NotFound.

Expired shares are forgotten by a background task (``reap_expired_shares``); their tokens
were refused with SignatureExpired already, by their own expiry.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import math
import secrets

from service.auth import (
    AccessDeniedError,
    SignatureExpiredError,
    SignatureInvalidError,
    TokenError,
    issue_share_token,
    verify_share_token,
)
from service.common.api_errors import ApiError
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.media.video_outputs import is_output_name
from service.meta import ObjectVersion, VideoJob, VideoShare, records
from service.ops.buckets import outcome_error
from service.ops.objects import refuse_quarantined


def new_share_id() -> str:
    return "vs_" + secrets.token_hex(10)


def require_share(engine: Engine, share_id: str) -> VideoShare:
    share = engine.state.media.share(share_id)
    if share is None:
        raise ApiError("NoSuchShare", f"no video share {share_id!r}")
    return share


async def create_share(
    engine: Engine,
    secret: bytes,
    job: VideoJob,
    *,
    expires_in: int,
    created_by: str,
    access_key_id: str | None,
    now: float,
) -> tuple[VideoShare, str]:
    """Journal a share of a completed job; the share and its token (409 InvalidState if
    the job is not completed). ``access_key_id`` is the key the creator used (None for a
    bearer token): the token carries it so that revoking the key ends the share."""
    engine.ensure_writable()
    if job.status != "completed":
        raise ApiError("InvalidState", f"job {job.job_id!r} is {job.status}, not completed")
    expires_at_ms = math.ceil((now + expires_in) * 1000)
    outcome = await engine.commit(
        records.video_share_created(
            share_id=new_share_id(),
            job_id=job.job_id,
            created_by=created_by,
            expires_at=expires_at_ms,
            at=now_ms(),
        )
    )
    if not outcome.ok or not isinstance(outcome.value, VideoShare):
        raise outcome_error(outcome)
    share = outcome.value
    token = issue_share_token(secret, share.share_id, share.expires_at / 1000, access_key_id)
    return share, token


async def revoke_share(engine: Engine, share: VideoShare, reason: str = "revoked") -> None:
    outcome = await engine.commit(
        records.video_share_revoked(share_id=share.share_id, reason=reason, at=now_ms())
    )
    if not outcome.ok:
        raise outcome_error(outcome)


async def reap_expired_shares(engine: Engine) -> None:
    """Journal the end of every expired share (a background job)."""
    if engine.read_only_reason is not None:
        return
    for share in engine.state.media.expired_shares(now_ms()):
        if engine.state.media.share(share.share_id) is not None:
            await engine.commit(
                records.video_share_revoked(share_id=share.share_id, reason="expired", at=now_ms())
            )


def refuse_ended_creator(engine: Engine, user_id: str, access_key_id: str | None) -> None:
    """403 AccessDenied once the share's creator is disabled or deleted, or the access key
    it was made with is revoked or deleted."""
    if access_key_id is not None:
        key = engine.state.get_access_key(access_key_id)
        if key is None or key.status != "active":
            raise AccessDeniedError("the access key that made this share was revoked")
    user = engine.state.get_user(user_id)
    if user is None or user.status != "active":
        raise AccessDeniedError("the user who made this share is disabled or deleted")


def resolve_playback(
    engine: Engine, secret: bytes, token: str, path: str, now: float
) -> tuple[VideoShare, VideoJob, ObjectVersion]:
    """The share, job and output object a playback request names (see the module
    docstring for the order of checks and their errors)."""
    claims = verify_share_token(secret, token, now)
    if claims is TokenError.EXPIRED:
        raise SignatureExpiredError("the share link has expired")
    if isinstance(claims, TokenError):
        raise SignatureInvalidError("the share link is not valid")
    share = engine.state.media.share(claims.share_id)
    job = None if share is None else engine.state.media.job(share.job_id)
    if share is None or job is None or job.status != "completed":
        raise ApiError("NoSuchShare", "the share was revoked or does not exist")
    refuse_ended_creator(engine, share.created_by, claims.access_key_id)
    if not is_output_name(path):
        raise ApiError("NotFound", "no such file in the shared video")
    version = engine.state.head_object(job.bucket, job.output_prefix + path)
    if version is None or version.is_delete_marker:
        raise ApiError("NotFound", "no such file in the shared video")
    refuse_quarantined(engine, version)
    return share, job, version
