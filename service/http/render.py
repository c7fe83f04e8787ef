"""JSON shapes of the contract's resources, built from the metadata model.

Pure functions: model record in, JSON-ready dict out. Field names are the contract's.
"""

from __future__ import annotations

from typing import Any

from service.common.timefmt import rfc3339_ms
from service.meta import Bucket, ObjectVersion, Usage


def bucket_json(bucket: Bucket, usage: Usage) -> dict[str, Any]:
    return {
        "name": bucket.name,
        "owner": bucket.owner,
        "quota_bytes": bucket.quota_bytes,
        "versioning_enabled": bucket.versioning_enabled,
        "tags": dict(bucket.tags),
        "created_at": rfc3339_ms(bucket.created_at),
        "updated_at": rfc3339_ms(bucket.updated_at),
        "usage": {"object_count": usage.object_count, "size_bytes": usage.size_bytes},
        "bucket_id": bucket.bucket_id,
        "object_lock_enabled": bucket.object_lock_enabled,
        "default_retention": default_retention_json(bucket),
    }


def default_retention_json(bucket: Bucket) -> dict[str, Any] | None:
    """A bucket's ``default_retention``: ``{"mode", "days"}`` or None."""
    days = bucket.default_retention_days
    if bucket.default_retention_mode is None or days is None:
        return None
    return {"mode": bucket.default_retention_mode, "days": int(days) if days.is_integer() else days}


def retention_json(version: ObjectVersion) -> dict[str, Any] | None:
    """An object's ``retention``: ``{"mode", "retain_until"}`` or None."""
    if version.retention_mode is None or version.retain_until is None:
        return None
    return {"mode": version.retention_mode, "retain_until": rfc3339_ms(version.retain_until)}


def object_json(version: ObjectVersion) -> dict[str, Any]:
    return {
        "bucket": version.bucket,
        "key": version.key,
        "size_bytes": version.size,
        "content_type": version.content_type,
        "etag": version.sha256,
        "sha256_checksum": version.sha256,
        "version_id": version.version_id,
        "custom_metadata": dict(version.custom_metadata),
        "created_at": rfc3339_ms(version.created_at),
        "updated_at": rfc3339_ms(version.updated_at),
        "retention": retention_json(version),
        "legal_hold": version.legal_hold,
    }


def version_json(version: ObjectVersion, *, is_latest: bool) -> dict[str, Any]:
    body = object_json(version)
    body["is_latest"] = is_latest
    body["is_delete_marker"] = version.is_delete_marker
    return body
