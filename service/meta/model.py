"""The records of the metadata state and the shapes its read helpers return.

Records are frozen dataclasses: ``MetaState.apply`` replaces a record instead of changing
it, so a record handed out (to a handler, to a snapshot being encoded in a worker thread)
never changes under its holder. Their mapping fields (tags, custom metadata) are private
copies typed read-only; do not mutate them.

Sizes are bytes, times are int milliseconds since the epoch.

Thread-safety: immutable values, safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

NULL_VERSION_ID = "null"
"""How clients name the null version (``version_id`` None) in a ``?version_id=``."""

ACTIVE = "active"
DISABLED = "disabled"
REVOKED = "revoked"


@dataclass(frozen=True, slots=True)
class Bucket:
    """A bucket's settings; its usage lives apart (``MetaState.bucket_usage``).

    ``bucket_id`` tells this bucket from any other that had or will have its name
    (``service.meta.identity``)."""

    name: str
    owner: str
    quota_bytes: int | None
    versioning_enabled: bool
    tags: Mapping[str, str]
    created_at: int
    updated_at: int
    bucket_id: str
    object_lock_enabled: bool = False
    """Set at creation only, with versioning on for good (``service.meta.lock_policy``)."""
    default_retention_mode: str | None = None
    """``governance`` or ``compliance``: every new version gets this retention..."""
    default_retention_days: float | None = None
    """...for this many days from its write (None with the mode)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What a bucket stores: every version that is not a delete marker."""

    object_count: int = 0
    size_bytes: int = 0

    def plus(self, size: int) -> Usage:
        return Usage(self.object_count + 1, self.size_bytes + size)

    def minus(self, size: int) -> Usage:
        return Usage(self.object_count - 1, self.size_bytes - size)


@dataclass(frozen=True, slots=True)
class ObjectVersion:
    """One version of a key, or a delete marker (no payload, size 0, empty sha256).

    ``version_id`` is None for the null version (written while versioning was off).
    ``created_at`` survives an overwrite of the null version; ``updated_at`` is the
    time of the write that produced this record.
    """

    bucket: str
    key: str
    version_id: str | None
    payload_id: str | None
    size: int
    content_type: str
    sha256: str
    custom_metadata: Mapping[str, str]
    created_at: int
    updated_at: int
    is_delete_marker: bool = False
    retention_mode: str | None = None
    """``governance`` or ``compliance`` while a retention is set (``lock_policy``)."""
    retain_until: int | None = None
    """The end of the retention (ms), with ``retention_mode``."""
    legal_hold: bool = False

    @property
    def etag(self) -> str:
        """The contract's etag: the payload's lowercase hex SHA-256."""
        return self.sha256


def delete_marker(bucket: str, key: str, version_id: str | None, at: int) -> ObjectVersion:
    """A delete marker written at ``at``."""
    return ObjectVersion(bucket, key, version_id, None, 0, "", "", {}, at, at, True)


def version_row(version: ObjectVersion) -> list[Any]:
    """The fields of a version after its bucket and key, as the snapshot and the object
    index store them (``ObjectVersion(bucket, key, *row)`` reads one back). The lock fields
    are written only for a version that has one, so rows of unlocked versions keep their
    older, shorter shape."""
    row = [
        version.version_id,
        version.payload_id,
        version.size,
        version.content_type,
        version.sha256,
        dict(version.custom_metadata),
        version.created_at,
        version.updated_at,
        version.is_delete_marker,
    ]
    if version.retention_mode is not None or version.legal_hold:
        row += [version.retention_mode, version.retain_until, version.legal_hold]
    return row


def bucket_row(bucket: Bucket) -> list[Any]:
    """A bucket as the snapshot stores it (``Bucket(*row)`` reads one back); the object
    lock fields only for a bucket that has object lock."""
    row: list[Any] = [
        bucket.name,
        bucket.owner,
        bucket.quota_bytes,
        bucket.versioning_enabled,
        dict(bucket.tags),
        bucket.created_at,
        bucket.updated_at,
        bucket.bucket_id,
    ]
    if bucket.object_lock_enabled:
        row += [True, bucket.default_retention_mode, bucket.default_retention_days]
    return row


@dataclass(frozen=True, slots=True)
class PartInfo:
    """One stored part of a multipart session."""

    part_number: int
    payload_id: str
    size: int
    sha256: str
    stored_at: int

    @property
    def etag(self) -> str:
        return self.sha256


@dataclass(frozen=True, slots=True)
class UploadSession:
    """An open multipart session; its parts live apart (``MetaState.upload_parts``)."""

    upload_id: str
    bucket: str
    key: str
    owner: str
    content_type: str
    custom_metadata: Mapping[str, str]
    recommended_part_size: int
    created_at: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class User:
    user_id: str
    username: str
    password_hash: str
    role: str
    status: str
    created_at: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class AccessKey:
    """An access key; its last use lives apart (``MetaState.key_last_used``) because it
    changes on every request."""

    access_key_id: str
    user_id: str
    name: str
    secret_digest: str
    status: str
    created_at: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class VideoJob:
    """A video packaging job (``service.meta.video_state``). ``params`` is the journaled form of
    the request (``service.media.video_params.JobParams.to_document``); ``outputs`` maps
    ``hls``/``dash`` to the key of the master playlist / manifest once completed.

    ``attempts`` counts the runs started; ``worker`` names the fleet worker of the latest one
    (None in the embedded mode); ``active`` is True while that worker holds the attempt's
    lease; ``publishing`` maps output names to the multipart sessions of an attempt the
    server accepted and is making visible (``service.media.fleet_publish``)."""

    job_id: str
    bucket: str
    key: str
    created_by: str
    params: Mapping[str, Any]
    output_prefix: str
    status: str
    progress: float
    outputs: Mapping[str, str]
    error: str | None
    created_at: int
    updated_at: int
    attempts: int = 0
    worker: str | None = None
    active: bool = False
    publishing: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class VideoShare:
    """A playback share of a completed job's outputs, valid until ``expires_at`` (ms)."""

    share_id: str
    job_id: str
    bucket: str
    created_by: str
    created_at: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class ObjectPage:
    """One page of a key listing: objects and common prefixes together fill ``limit``.

    ``last_item`` (a key or a common prefix) is the ``start_after`` of the next page.
    """

    objects: tuple[ObjectVersion, ...]
    common_prefixes: tuple[str, ...]
    last_item: str | None
    truncated: bool


@dataclass(frozen=True, slots=True)
class VersionEntry:
    version: ObjectVersion
    is_latest: bool

    @property
    def is_delete_marker(self) -> bool:
        return self.version.is_delete_marker


@dataclass(frozen=True, slots=True)
class VersionPage:
    """One page of a version listing, newest first within a key.

    ``last_item`` is ``(key, position)``, the position counted from the key's oldest
    version (0), so it stays put while newer versions are added.
    """

    versions: tuple[VersionEntry, ...]
    last_item: tuple[str, int] | None
    truncated: bool


class Counts(NamedTuple):
    buckets: int
    objects: int
    bytes_stored: int
