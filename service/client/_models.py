"""Typed results: one frozen dataclass per resource of the contract, fields named as its JSON.

Each class has ``from_json`` that reads the contract's document, turns RFC 3339 timestamps
into aware ``datetime`` objects and ignores fields it does not know (the contract may add
fields). ``parse`` wraps a malformed document in ``UnexpectedResponseError`` so callers see
one of the client's errors, never a ``KeyError``. Pure; instances are immutable.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from service.client._exceptions import UnexpectedResponseError

__all__ = [
    "AccessKey",
    "Bucket",
    "BucketUsage",
    "DefaultRetention",
    "Health",
    "Job",
    "ListPage",
    "Object",
    "ObjectVersion",
    "OptimizedImage",
    "Part",
    "PresignedUrl",
    "Rendition",
    "Retention",
    "Session",
    "Share",
    "Token",
    "User",
    "VersionPage",
    "optional_timestamp",
    "parse",
    "parse_timestamp",
]

M = TypeVar("M")


def parse_timestamp(value: str) -> datetime.datetime:
    """An aware UTC datetime from the contract's ``2026-11-22T08:41:44.123Z``.

    >>> parse_timestamp("2026-11-22T08:41:44.123Z")
    datetime.datetime(2026, 11, 22, 8, 41, 44, 123000, tzinfo=datetime.timezone.utc)
    """
    moment = datetime.datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment


def optional_timestamp(value: Any) -> datetime.datetime | None:
    return None if value is None else parse_timestamp(value)


def parse(builder: Callable[[Mapping[str, Any]], M], document: Any) -> M:
    """``builder(document)``, with a malformed document reported as UnexpectedResponseError."""
    if not isinstance(document, Mapping):
        raise UnexpectedResponseError(f"expected a JSON object, got {type(document).__name__}")
    try:
        return builder(document)
    except (KeyError, TypeError, ValueError) as exc:
        raise UnexpectedResponseError(f"response does not match the contract: {exc!r}") from exc


@dataclasses.dataclass(frozen=True)
class BucketUsage:
    """What a bucket stores, counting every version."""

    object_count: int
    size_bytes: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BucketUsage:
        return cls(object_count=int(data["object_count"]), size_bytes=int(data["size_bytes"]))


@dataclasses.dataclass(frozen=True)
class Retention:
    """A version's retention: ``mode`` ``governance`` or ``compliance`` until ``retain_until``."""

    mode: str
    retain_until: datetime.datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Retention | None:
        if data is None:
            return None
        return cls(mode=data["mode"], retain_until=parse_timestamp(data["retain_until"]))


@dataclasses.dataclass(frozen=True)
class DefaultRetention:
    """A lock bucket's default: every new version gets ``mode`` for ``days`` days."""

    mode: str
    days: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> DefaultRetention | None:
        if data is None:
            return None
        return cls(mode=data["mode"], days=float(data["days"]))


@dataclasses.dataclass(frozen=True)
class Bucket:
    """A bucket; ``owner`` is the owning user's ``user_id``, ``quota_bytes`` None for none;
    ``object_lock_enabled`` (chosen at creation, for good) and its ``default_retention``."""

    name: str
    owner: str
    quota_bytes: int | None
    versioning_enabled: bool
    tags: dict[str, str]
    created_at: datetime.datetime
    updated_at: datetime.datetime
    usage: BucketUsage
    object_lock_enabled: bool = False
    default_retention: DefaultRetention | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Bucket:
        quota = data.get("quota_bytes")
        return cls(
            name=data["name"],
            owner=data["owner"],
            quota_bytes=None if quota is None else int(quota),
            versioning_enabled=bool(data["versioning_enabled"]),
            tags=dict(data.get("tags") or {}),
            created_at=parse_timestamp(data["created_at"]),
            updated_at=parse_timestamp(data["updated_at"]),
            usage=BucketUsage.from_json(data["usage"]),
            object_lock_enabled=bool(data.get("object_lock_enabled", False)),
            default_retention=DefaultRetention.from_json(data.get("default_retention")),
        )


@dataclasses.dataclass(frozen=True)
class Object:
    """An object's metadata (the contract's ObjectMetadata). ``etag`` and ``sha256_checksum``
    are both the lowercase hex SHA-256 of the payload; ``version_id`` is None unless the
    bucket is versioned; custom metadata names are lowercase. ``retention`` and
    ``legal_hold`` are the version's object lock (None and False when it has none)."""

    bucket: str
    key: str
    size_bytes: int
    content_type: str
    etag: str
    sha256_checksum: str
    version_id: str | None
    custom_metadata: dict[str, str]
    created_at: datetime.datetime
    updated_at: datetime.datetime
    retention: Retention | None = None
    legal_hold: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Object:
        return cls(**_object_fields(data))


def _object_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "bucket": data["bucket"],
        "key": data["key"],
        "size_bytes": int(data["size_bytes"]),
        "content_type": data.get("content_type") or "",
        "etag": data.get("etag") or "",
        "sha256_checksum": data.get("sha256_checksum") or "",
        "version_id": data.get("version_id"),
        "custom_metadata": dict(data.get("custom_metadata") or {}),
        "created_at": parse_timestamp(data["created_at"]),
        "updated_at": parse_timestamp(data["updated_at"]),
        "retention": Retention.from_json(data.get("retention")),
        "legal_hold": bool(data.get("legal_hold", False)),
    }


@dataclasses.dataclass(frozen=True)
class ObjectVersion(Object):
    """One entry of a version listing. A delete marker has no payload: its ``etag``,
    ``sha256_checksum`` and ``content_type`` are empty strings and ``size_bytes`` is 0."""

    is_latest: bool = False
    is_delete_marker: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ObjectVersion:
        return cls(
            **_object_fields(data),
            is_latest=bool(data["is_latest"]),
            is_delete_marker=bool(data["is_delete_marker"]),
        )


@dataclasses.dataclass(frozen=True)
class ListPage:
    """One page of a listing. ``common_prefixes`` are the "directories" when a delimiter was
    given; ``next_cursor`` is None on the last page."""

    objects: list[Object]
    common_prefixes: list[str]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ListPage:
        return cls(
            objects=[Object.from_json(item) for item in data["objects"]],
            common_prefixes=[str(prefix) for prefix in data.get("common_prefixes") or []],
            next_cursor=data.get("next_cursor"),
        )


@dataclasses.dataclass(frozen=True)
class VersionPage:
    """One page of a version listing, newest version of each key first."""

    versions: list[ObjectVersion]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VersionPage:
        return cls(
            versions=[ObjectVersion.from_json(item) for item in data["versions"]],
            next_cursor=data.get("next_cursor"),
        )


@dataclasses.dataclass(frozen=True)
class Part:
    """A stored part of a multipart upload; ``etag`` is the part's hex SHA-256."""

    part_number: int
    etag: str
    size_bytes: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Part:
        return cls(
            part_number=int(data["part_number"]),
            etag=data["etag"],
            size_bytes=int(data["size_bytes"]),
        )


@dataclasses.dataclass(frozen=True)
class Session:
    """A multipart upload session. ``parts`` is filled only by a status query (the stored
    parts, sorted by number); creation and listings leave it empty."""

    upload_id: str
    bucket: str
    key: str
    recommended_part_size: int
    max_parallel_parts: int
    expires_at: datetime.datetime
    created_at: datetime.datetime
    parts: list[Part] = dataclasses.field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Session:
        return cls(
            upload_id=data["upload_id"],
            bucket=data["bucket"],
            key=data["key"],
            recommended_part_size=int(data["recommended_part_size"]),
            max_parallel_parts=int(data["max_parallel_parts"]),
            expires_at=parse_timestamp(data["expires_at"]),
            created_at=parse_timestamp(data["created_at"]),
            parts=[Part.from_json(item) for item in data.get("parts") or []],
        )


@dataclasses.dataclass(frozen=True)
class User:
    """A user account; ``role`` is ``admin`` or ``user``, ``status`` ``active``/``disabled``."""

    user_id: str
    username: str
    role: str
    status: str
    created_at: datetime.datetime
    updated_at: datetime.datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> User:
        return cls(
            user_id=data["user_id"],
            username=data["username"],
            role=data["role"],
            status=data["status"],
            created_at=parse_timestamp(data["created_at"]),
            updated_at=parse_timestamp(data["updated_at"]),
        )


@dataclasses.dataclass(frozen=True)
class Token:
    """The result of ``login``: a bearer token, when it stops working, and whose it is."""

    token: str = dataclasses.field(repr=False)
    expires_at: datetime.datetime
    user: User

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Token:
        return cls(
            token=data["token"],
            expires_at=parse_timestamp(data["expires_at"]),
            user=User.from_json(data["user"]),
        )


@dataclasses.dataclass(frozen=True)
class AccessKey:
    """An access key. ``secret_key`` is set only in the answer that created it: the server
    keeps a digest and can never show it again. ``status`` is ``active`` or ``revoked``."""

    access_key_id: str
    user_id: str
    name: str | None
    status: str
    created_at: datetime.datetime
    last_used_at: datetime.datetime | None
    secret_key: str | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AccessKey:
        return cls(
            access_key_id=data["access_key_id"],
            user_id=data["user_id"],
            name=data.get("name"),
            status=data["status"],
            created_at=parse_timestamp(data["created_at"]),
            last_used_at=optional_timestamp(data.get("last_used_at")),
            secret_key=data.get("secret_key"),
        )


@dataclasses.dataclass(frozen=True)
class PresignedUrl:
    """A URL that performs ``method`` on one object without credentials until ``expires_at``."""

    url: str
    method: str
    expires_at: datetime.datetime
    expires_in: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PresignedUrl:
        return cls(
            url=data["url"],
            method=data["method"],
            expires_at=parse_timestamp(data["expires_at"]),
            expires_in=int(data["expires_in"]),
        )


@dataclasses.dataclass(frozen=True)
class OptimizedImage:
    """A transformed image stored as the object ``key`` next to its source."""

    bucket: str
    source_key: str
    key: str
    format: str
    width: int
    height: int
    size_bytes: int
    source_size_bytes: int
    sha256_checksum: str
    content_type: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OptimizedImage:
        return cls(
            bucket=data["bucket"],
            source_key=data["source_key"],
            key=data["key"],
            format=data["format"],
            width=int(data["width"]),
            height=int(data["height"]),
            size_bytes=int(data["size_bytes"]),
            source_size_bytes=int(data["source_size_bytes"]),
            sha256_checksum=data["sha256_checksum"],
            content_type=data["content_type"],
        )


@dataclasses.dataclass(frozen=True)
class Rendition:
    """One output quality of a video job."""

    height: int
    video_bitrate_kbps: int


@dataclasses.dataclass(frozen=True)
class Job:
    """A video packaging job. ``status`` is queued, processing, completed or failed;
    ``outputs`` maps ``hls``/``dash`` to the key of the master playlist / manifest;
    ``attempts`` counts its runs and ``worker`` names the media fleet worker of the latest
    (None when the server packages itself)."""

    job_id: str
    bucket: str
    key: str
    status: str
    progress: float
    params: dict[str, Any]
    output_prefix: str
    outputs: dict[str, str]
    error: str | None
    created_at: datetime.datetime
    updated_at: datetime.datetime
    attempts: int = 0
    worker: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the job will not change any more (completed or failed)."""
        return self.status in ("completed", "failed")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Job:
        return cls(
            job_id=data["job_id"],
            bucket=data["bucket"],
            key=data["key"],
            status=data["status"],
            progress=float(data.get("progress") or 0.0),
            params=dict(data.get("params") or {}),
            output_prefix=data.get("output_prefix") or "",
            outputs={str(k): str(v) for k, v in (data.get("outputs") or {}).items() if v},
            error=data.get("error"),
            created_at=parse_timestamp(data["created_at"]),
            updated_at=parse_timestamp(data["updated_at"]),
            attempts=int(data.get("attempts") or 0),
            worker=data.get("worker"),
        )


@dataclasses.dataclass(frozen=True)
class Share:
    """A playback share of a video job's outputs; the URLs work without credentials."""

    share_id: str
    token: str
    expires_at: datetime.datetime
    hls_url: str | None
    dash_url: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Share:
        return cls(
            share_id=data["share_id"],
            token=data["token"],
            expires_at=parse_timestamp(data["expires_at"]),
            hls_url=data.get("hls_url"),
            dash_url=data.get("dash_url"),
        )


@dataclasses.dataclass(frozen=True)
class Health:
    """``GET /health``: the service's name, ``ok``, and its version."""

    name: str
    status: str
    version: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Health:
        return cls(name=data["name"], status=data["status"], version=data["version"])
