"""A bucket's object lock settings in the bucket bodies: ``object_lock_enabled`` and
``default_retention`` (``POST /buckets``, ``PATCH /buckets/{bucket}``).

Pure checks of the request (400 InvalidArgument for a bad shape, 409 InvalidState for what
the bucket's state forbids: object lock is chosen at creation for good, and keeps versioning
on); ``MetaState.apply`` re-checks the state (``service.meta.lock_state``). Imported by
``service.ops.buckets``; imports nothing of ``service.ops``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.common.api_errors import ApiError
from service.meta import Bucket
from service.meta.lock_policy import MAX_RETENTION_DAYS, MODES


def parse_default_retention(value: Any) -> tuple[str | None, float | None]:
    """A ``default_retention`` body field as ``(mode, days)``; null is ``(None, None)``."""
    if value is None:
        return None, None
    if not isinstance(value, Mapping) or set(value) != {"mode", "days"}:
        raise ApiError("InvalidArgument", 'default_retention must be {"mode", "days"} or null')
    mode, days = value["mode"], value["days"]
    if mode not in MODES:
        raise ApiError("InvalidArgument", "default_retention.mode must be governance or compliance")
    if (
        isinstance(days, bool)
        or not isinstance(days, int | float)
        or not 0 < days <= MAX_RETENTION_DAYS
    ):
        raise ApiError(
            "InvalidArgument",
            f"default_retention.days must be a number above 0 and at most {MAX_RETENTION_DAYS}",
        )
    return str(mode), float(days)


def lock_settings(body: Mapping[str, Any]) -> dict[str, Any]:
    """The object lock fields of a ``POST /buckets`` body, as ``bucket_created`` takes them
    (empty without object lock)."""
    enabled = body.get("object_lock_enabled", False)
    if not isinstance(enabled, bool):
        raise ApiError("InvalidArgument", "object_lock_enabled must be true or false")
    if not enabled:
        if body.get("default_retention") is not None:
            raise ApiError("InvalidArgument", "default_retention needs object_lock_enabled")
        return {}
    if body.get("versioning_enabled") is False:
        raise ApiError("InvalidArgument", "object lock keeps versioning on: it cannot be false")
    mode, days = parse_default_retention(body.get("default_retention"))
    return {
        "object_lock_enabled": True,
        "default_retention_mode": mode,
        "default_retention_days": days,
    }


def lock_changes(bucket: Bucket, body: Mapping[str, Any]) -> dict[str, Any]:
    """The object lock changes of a ``PATCH /buckets/{bucket}`` body (409 InvalidState for
    what cannot change: the lock itself, a lock bucket's versioning)."""
    changes: dict[str, Any] = {}
    if "object_lock_enabled" in body:
        if not isinstance(body["object_lock_enabled"], bool):
            raise ApiError("InvalidArgument", "object_lock_enabled must be true or false")
        if body["object_lock_enabled"] != bucket.object_lock_enabled:
            raise ApiError(
                "InvalidState", "object lock is chosen when a bucket is created, for good"
            )
    if bucket.object_lock_enabled and body.get("versioning_enabled") is False:
        raise ApiError("InvalidState", "a bucket with object lock keeps its versioning on")
    if "default_retention" in body:
        mode, days = parse_default_retention(body["default_retention"])
        if not bucket.object_lock_enabled:
            raise ApiError("InvalidState", "a bucket without object lock has no default retention")
        changes["default_retention_mode"] = mode
        changes["default_retention_days"] = days
    return changes
