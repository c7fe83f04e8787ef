"""Journal records: their type names and typed constructors.

Every metadata change is one record: one of these plain dicts (the body the journal stores,
``journal.Record.event``), appended to the journal and then applied by ``MetaState.apply``
through the one applier (``service.engine.applier``, at run time and at replay). They hold
only values msgpack can carry (str, int, bool, None, list, dict), timestamps as int
milliseconds since the epoch in ``at``, and never a clock read or a random draw of their
own: everything ``apply`` needs to be deterministic is inside the record. (The object
notifications clients see, derived from some records, are "events": ``service.events``.)

Names are past tense: a record says what was decided, and ``apply`` re-checks the conditions
it depends on (a bucket may be gone by the time an ``ObjectStored`` is applied).

The constructors raise ``ValueError`` for an argument no record may carry (an unknown change
field, an unknown abort reason): that is a bug of the caller, caught before journaling.

Thread-safety: pure functions and constants, safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Event = dict[str, Any]
"""A record's body, as appended to the journal and handed to ``MetaState.apply``."""

SERVER_INITIALIZED = "ServerInitialized"
BUCKET_CREATED = "BucketCreated"
BUCKET_UPDATED = "BucketUpdated"
BUCKET_DELETED = "BucketDeleted"
OBJECT_STORED = "ObjectStored"
OBJECT_DELETED = "ObjectDeleted"
UPLOAD_STARTED = "UploadStarted"
PART_STORED = "PartStored"
UPLOAD_COMPLETED = "UploadCompleted"
UPLOAD_ABORTED = "UploadAborted"
USER_CREATED = "UserCreated"
USER_UPDATED = "UserUpdated"
USER_DELETED = "UserDeleted"
ACCESS_KEY_CREATED = "AccessKeyCreated"
ACCESS_KEY_UPDATED = "AccessKeyUpdated"
ACCESS_KEY_DELETED = "AccessKeyDeleted"
ACCESS_KEYS_USED = "AccessKeysUsed"
VIDEO_JOB_CREATED = "VideoJobCreated"
VIDEO_JOB_UPDATED = "VideoJobUpdated"
VIDEO_JOB_DELETED = "VideoJobDeleted"
VIDEO_ATTEMPT_STARTED = "VideoAttemptStarted"
VIDEO_ATTEMPT_ENDED = "VideoAttemptEnded"
VIDEO_ATTEMPT_ACCEPTED = "VideoAttemptAccepted"
VIDEO_ATTEMPT_FINISHED = "VideoAttemptFinished"
VIDEO_SHARE_CREATED = "VideoShareCreated"
VIDEO_SHARE_REVOKED = "VideoShareRevoked"
LIFECYCLE_CONFIGURED = "LifecycleConfigured"
NOTIFICATIONS_CONFIGURED = "NotificationsConfigured"
OBJECT_RETENTION_SET = "ObjectRetentionSet"
OBJECT_LEGAL_HOLD_SET = "ObjectLegalHoldSet"
EPOCH_STARTED = "EpochStarted"

EVENT_TYPES = frozenset(
    {
        SERVER_INITIALIZED,
        BUCKET_CREATED,
        BUCKET_UPDATED,
        BUCKET_DELETED,
        OBJECT_STORED,
        OBJECT_DELETED,
        UPLOAD_STARTED,
        PART_STORED,
        UPLOAD_COMPLETED,
        UPLOAD_ABORTED,
        USER_CREATED,
        USER_UPDATED,
        USER_DELETED,
        ACCESS_KEY_CREATED,
        ACCESS_KEY_UPDATED,
        ACCESS_KEY_DELETED,
        ACCESS_KEYS_USED,
        VIDEO_JOB_CREATED,
        VIDEO_JOB_UPDATED,
        VIDEO_JOB_DELETED,
        VIDEO_ATTEMPT_STARTED,
        VIDEO_ATTEMPT_ENDED,
        VIDEO_ATTEMPT_ACCEPTED,
        VIDEO_ATTEMPT_FINISHED,
        VIDEO_SHARE_CREATED,
        VIDEO_SHARE_REVOKED,
        LIFECYCLE_CONFIGURED,
        NOTIFICATIONS_CONFIGURED,
        OBJECT_RETENTION_SET,
        OBJECT_LEGAL_HOLD_SET,
        EPOCH_STARTED,
    }
)

BUCKET_CHANGE_FIELDS = frozenset(
    {
        "quota_bytes",
        "versioning_enabled",
        "tags",
        "default_retention_mode",
        "default_retention_days",
    }
)
USER_CHANGE_FIELDS = frozenset({"password_hash", "status", "role"})
ABORT_REASONS = frozenset({"aborted", "expired"})
JOB_STATUSES = ("queued", "processing", "completed", "failed")
SHARE_REVOKE_REASONS = frozenset({"revoked", "expired"})
ATTEMPT_END_REASONS = frozenset({"lease_expired", "cancelled"})
"""Why a fleet attempt ended without a verdict: its lease lapsed, or its job was deleted."""


def _only(changes: Mapping[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    unknown = set(changes) - allowed
    if unknown:
        raise ValueError(f"unknown change fields: {', '.join(sorted(unknown))}")
    return dict(changes)


def server_initialized(*, server_id: str, at: int) -> Event:
    """The first event of a fresh data dir: names the server."""
    return {"type": SERVER_INITIALIZED, "server_id": server_id, "at": at}


def epoch_started(*, epoch: int, sequence: int, server_id: str, at: int) -> Event:
    """A primary's epoch begins at record ``sequence`` (this record's own), on the data dir
    ``server_id``: epoch 1 at a primary's first start, the next at each promotion
    (``service.meta.epoch_state``)."""
    event = {"type": EPOCH_STARTED, "epoch": epoch, "sequence": sequence}
    return {**event, "server_id": server_id, "at": at}


def bucket_created(
    *,
    name: str,
    owner: str,
    quota_bytes: int | None,
    versioning_enabled: bool,
    tags: Mapping[str, str],
    at: int,
    bucket_id: str | None,
    object_lock_enabled: bool = False,
    default_retention_mode: str | None = None,
    default_retention_days: float | None = None,
) -> Event:
    """A bucket was created, owned by the user ``owner``, with the identity ``bucket_id``
    (``service.meta.identity``; None writes a record as versions before identities did,
    whose identity is derived). With ``object_lock_enabled`` (carried only then) its
    versioning stays on for good and new versions may get the default retention
    (``service.meta.lock_policy``)."""
    event: Event = {
        "type": BUCKET_CREATED,
        "name": name,
        "owner": owner,
        "quota_bytes": quota_bytes,
        "versioning_enabled": versioning_enabled,
        "tags": dict(tags),
        "at": at,
    }
    if bucket_id is not None:
        event["bucket_id"] = bucket_id
    if object_lock_enabled:
        event["object_lock_enabled"] = True
        event["default_retention_mode"] = default_retention_mode
        event["default_retention_days"] = default_retention_days
    return event


def bucket_updated(*, name: str, changes: Mapping[str, Any], at: int) -> Event:
    """Some of a bucket's settings (``BUCKET_CHANGE_FIELDS``) changed; ``tags`` replaces all."""
    return {
        "type": BUCKET_UPDATED,
        "name": name,
        "changes": _only(changes, BUCKET_CHANGE_FIELDS),
        "at": at,
    }


def bucket_deleted(*, name: str, force: bool, at: int) -> Event:
    """A bucket was deleted; with ``force`` everything in it goes too."""
    return {"type": BUCKET_DELETED, "name": name, "force": force, "at": at}


def object_stored(
    *,
    bucket: str,
    key: str,
    payload_id: str,
    size: int,
    content_type: str,
    sha256: str,
    custom_metadata: Mapping[str, str],
    version_token: str,
    if_none_match: bool,
    if_match: str | None,
    at: int,
) -> Event:
    """A PUT's promoted payload became the key's newest version.

    ``version_token`` is the version id when versioning is enabled; the conditions
    (``if_none_match``, ``if_match`` as an etag or ``*``) are re-checked when applied.
    """
    return {
        "type": OBJECT_STORED,
        "bucket": bucket,
        "key": key,
        "payload_id": payload_id,
        "size": size,
        "content_type": content_type,
        "sha256": sha256,
        "custom_metadata": dict(custom_metadata),
        "version_token": version_token,
        "if_none_match": if_none_match,
        "if_match": if_match,
        "at": at,
    }


def object_deleted(
    *,
    bucket: str,
    key: str,
    version_id: str | None,
    version_token: str,
    at: int,
    judged: Mapping[str, Any] | None = None,
) -> Event:
    """A DELETE: of exactly ``version_id`` for good, or of the key (a delete marker whose
    id is ``version_token`` when versioning is enabled). A lifecycle delete carries what it
    ``judged`` (``service.meta.lifecycle_state.judgment``), re-checked when applied."""
    event: Event = {
        "type": OBJECT_DELETED,
        "bucket": bucket,
        "key": key,
        "version_id": version_id,
        "version_token": version_token,
        "at": at,
    }
    if judged is not None:
        event["judged"] = dict(judged)
    return event


def upload_started(
    *,
    upload_id: str,
    bucket: str,
    key: str,
    owner: str,
    content_type: str,
    custom_metadata: Mapping[str, str],
    recommended_part_size: int,
    at: int,
    expires_at: int,
) -> Event:
    """A multipart session was opened; it expires at ``expires_at`` (ms)."""
    return {
        "type": UPLOAD_STARTED,
        "upload_id": upload_id,
        "bucket": bucket,
        "key": key,
        "owner": owner,
        "content_type": content_type,
        "custom_metadata": dict(custom_metadata),
        "recommended_part_size": recommended_part_size,
        "at": at,
        "expires_at": expires_at,
    }


def part_stored(
    *, upload_id: str, part_number: int, payload_id: str, size: int, sha256: str, at: int
) -> Event:
    """A part's promoted payload joined a session (replacing a part of the same number)."""
    return {
        "type": PART_STORED,
        "upload_id": upload_id,
        "part_number": part_number,
        "payload_id": payload_id,
        "size": size,
        "sha256": sha256,
        "at": at,
    }


def upload_completed(
    *,
    upload_id: str,
    part_numbers: Sequence[int],
    payload_id: str,
    size: int,
    sha256: str,
    version_token: str,
    at: int,
) -> Event:
    """The named parts, joined into ``payload_id``, became the key's newest version."""
    return {
        "type": UPLOAD_COMPLETED,
        "upload_id": upload_id,
        "part_numbers": list(part_numbers),
        "payload_id": payload_id,
        "size": size,
        "sha256": sha256,
        "version_token": version_token,
        "at": at,
    }


def upload_aborted(
    *, upload_id: str, reason: str, at: int, created_before: int | None = None
) -> Event:
    """A session was closed without an object: ``aborted`` by a client or ``expired``.
    A lifecycle abort names the cutoff it judged by (``created_before``, ms), re-checked
    when applied."""
    if reason not in ABORT_REASONS:
        raise ValueError(f"unknown abort reason {reason!r}")
    event: Event = {"type": UPLOAD_ABORTED, "upload_id": upload_id, "reason": reason, "at": at}
    if created_before is not None:
        event["created_before"] = created_before
    return event


def user_created(*, user_id: str, username: str, password_hash: str, role: str, at: int) -> Event:
    """A user was created (active)."""
    return {
        "type": USER_CREATED,
        "user_id": user_id,
        "username": username,
        "password_hash": password_hash,
        "role": role,
        "at": at,
    }


def user_updated(*, user_id: str, changes: Mapping[str, Any], at: int) -> Event:
    """Some of a user's fields (``USER_CHANGE_FIELDS``) changed."""
    return {
        "type": USER_UPDATED,
        "user_id": user_id,
        "changes": _only(changes, USER_CHANGE_FIELDS),
        "at": at,
    }


def user_deleted(*, user_id: str, at: int) -> Event:
    """A user was deleted, and with it its access keys."""
    return {"type": USER_DELETED, "user_id": user_id, "at": at}


def access_key_created(
    *, access_key_id: str, user_id: str, name: str, secret_digest: str, at: int
) -> Event:
    """An access key was created for ``user_id`` (active); only the secret's digest is kept."""
    return {
        "type": ACCESS_KEY_CREATED,
        "access_key_id": access_key_id,
        "user_id": user_id,
        "name": name,
        "secret_digest": secret_digest,
        "at": at,
    }


def access_key_updated(*, access_key_id: str, status: str, at: int) -> Event:
    """An access key's status changed (``active`` or ``revoked``)."""
    return {"type": ACCESS_KEY_UPDATED, "access_key_id": access_key_id, "status": status, "at": at}


def access_key_deleted(*, access_key_id: str, at: int) -> Event:
    """An access key was deleted."""
    return {"type": ACCESS_KEY_DELETED, "access_key_id": access_key_id, "at": at}


def access_keys_used(*, last_used: Mapping[str, int], at: int) -> Event:
    """Last-use times (ms) of access keys, batched so requests need no journal write each."""
    return {"type": ACCESS_KEYS_USED, "last_used": dict(last_used), "at": at}


def video_job_created(
    *,
    job_id: str,
    bucket: str,
    key: str,
    created_by: str,
    params: Mapping[str, Any],
    output_prefix: str,
    at: int,
) -> Event:
    """A packaging job of ``bucket``/``key`` was accepted (``queued``, progress 0).

    ``params`` is the request in plain values (formats, renditions, segment settings).
    """
    return {
        "type": VIDEO_JOB_CREATED,
        "job_id": job_id,
        "bucket": bucket,
        "key": key,
        "created_by": created_by,
        "params": dict(params),
        "output_prefix": output_prefix,
        "at": at,
    }


def video_job_updated(
    *,
    job_id: str,
    status: str,
    progress: float,
    outputs: Mapping[str, str],
    error: str | None,
    at: int,
) -> Event:
    """A job changed status (journaled at status changes only; finer progress stays in
    memory). ``outputs`` maps ``hls``/``dash`` to their master keys once completed."""
    if status not in JOB_STATUSES:
        raise ValueError(f"unknown job status {status!r}")
    if not 0.0 <= progress <= 1.0:
        raise ValueError("progress must be from 0 to 1")
    return {
        "type": VIDEO_JOB_UPDATED,
        "job_id": job_id,
        "status": status,
        "progress": float(progress),
        "outputs": dict(outputs),
        "error": error,
        "at": at,
    }


def video_job_deleted(*, job_id: str, at: int) -> Event:
    """A job was cancelled or deleted (its outputs were removed first); its shares go too."""
    return {"type": VIDEO_JOB_DELETED, "job_id": job_id, "at": at}


def video_attempt_started(*, job_id: str, attempt: int, worker: str, host: str, at: int) -> Event:
    """Fleet worker ``worker`` (on ``host``) claimed attempt ``attempt`` of a job (the next
    one) and holds its lease: the job is ``processing`` on it."""
    return {
        "type": VIDEO_ATTEMPT_STARTED,
        "job_id": job_id,
        "attempt": attempt,
        "worker": worker,
        "host": host,
        "at": at,
    }


def video_attempt_ended(*, job_id: str, attempt: int, reason: str, at: int) -> Event:
    """A fleet attempt ended without a verdict (``ATTEMPT_END_REASONS``); the job waits for
    its next attempt, ``queued``."""
    if reason not in ATTEMPT_END_REASONS:
        raise ValueError(f"unknown attempt end reason {reason!r}")
    return {
        "type": VIDEO_ATTEMPT_ENDED,
        "job_id": job_id,
        "attempt": attempt,
        "reason": reason,
        "at": at,
    }


def video_attempt_accepted(
    *, job_id: str, attempt: int, uploads: Mapping[str, str], at: int
) -> Event:
    """The server accepted a fleet attempt's completion: ``uploads`` maps each output name
    to the multipart session holding it; the server now completes them (publishing)."""
    return {
        "type": VIDEO_ATTEMPT_ACCEPTED,
        "job_id": job_id,
        "attempt": attempt,
        "uploads": dict(uploads),
        "at": at,
    }


def video_attempt_finished(
    *,
    job_id: str,
    attempt: int,
    status: str,
    outputs: Mapping[str, str],
    error: str | None,
    at: int,
) -> Event:
    """A fleet attempt's verdict: ``completed`` once its outputs are published (``outputs``
    as in ``video_job_updated``), or ``failed`` with the worker's reason."""
    if status not in ("completed", "failed"):
        raise ValueError(f"an attempt finishes completed or failed, not {status!r}")
    return {
        "type": VIDEO_ATTEMPT_FINISHED,
        "job_id": job_id,
        "attempt": attempt,
        "status": status,
        "outputs": dict(outputs),
        "error": error,
        "at": at,
    }


def video_share_created(
    *, share_id: str, job_id: str, created_by: str, expires_at: int, at: int
) -> Event:
    """A playback share of a completed job's outputs, valid until ``expires_at`` (ms)."""
    return {
        "type": VIDEO_SHARE_CREATED,
        "share_id": share_id,
        "job_id": job_id,
        "created_by": created_by,
        "expires_at": expires_at,
        "at": at,
    }


def video_share_revoked(*, share_id: str, reason: str, at: int) -> Event:
    """A share ended: ``revoked`` by a client, or forgotten once ``expired``."""
    if reason not in SHARE_REVOKE_REASONS:
        raise ValueError(f"unknown share revoke reason {reason!r}")
    return {"type": VIDEO_SHARE_REVOKED, "share_id": share_id, "reason": reason, "at": at}


def lifecycle_configured(
    *, bucket: str, rules: Sequence[Mapping[str, Any]], at: int, bucket_id: str
) -> Event:
    """A bucket's lifecycle rules were replaced (an empty list removes them all).

    Each rule is the normalised document of ``service.meta.lifecycle_state.LifecycleRule``.
    ``bucket_id`` is the identity of the bucket the request was accepted for: applied to
    another bucket of that name (deleted and created again meanwhile), the record is refused.
    """
    return {
        "type": LIFECYCLE_CONFIGURED,
        "bucket": bucket,
        "bucket_id": bucket_id,
        "rules": [dict(r) for r in rules],
        "at": at,
    }


def notifications_configured(
    *,
    bucket: str,
    webhooks: Sequence[Mapping[str, Any]],
    after_sequence: int,
    at: int,
    bucket_id: str,
) -> Event:
    """A bucket's webhooks were replaced (an empty list removes them all).

    A webhook new to the bucket delivers the events after ``after_sequence`` (the journal's
    last sequence when the request was accepted); one that keeps its id keeps its cursor.
    ``bucket_id`` as for ``lifecycle_configured``: never another bucket's webhooks.
    """
    return {
        "type": NOTIFICATIONS_CONFIGURED,
        "bucket": bucket,
        "bucket_id": bucket_id,
        "webhooks": [dict(w) for w in webhooks],
        "after_sequence": after_sequence,
        "at": at,
    }


def object_retention_set(
    *,
    bucket: str,
    key: str,
    version_id: str,
    mode: str | None,
    retain_until: int | None,
    bypass: bool,
    at: int,
) -> Event:
    """A version's retention was set to ``mode`` until ``retain_until`` (ms), or removed
    (both None). ``version_id`` is the version's id (``"null"`` for the null version);
    ``bypass`` is an admin's governance bypass. ``apply`` judges the change
    (``service.meta.lock_policy``)."""
    return {
        "type": OBJECT_RETENTION_SET,
        "bucket": bucket,
        "key": key,
        "version_id": version_id,
        "mode": mode,
        "retain_until": retain_until,
        "bypass": bypass,
        "at": at,
    }


def object_legal_hold_set(*, bucket: str, key: str, version_id: str, on: bool, at: int) -> Event:
    """A version's legal hold was turned on or off."""
    return {
        "type": OBJECT_LEGAL_HOLD_SET,
        "bucket": bucket,
        "key": key,
        "version_id": version_id,
        "on": on,
        "at": at,
    }
