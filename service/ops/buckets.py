"""Bucket operations: validate, pre-check, commit the event, translate the outcome.

Transport-free (no HTTP here): the HTTP handlers and the in-process engine tests both call
these. A pre-check refuses the common mistakes without a journal record; ``MetaState.apply``
re-checks authoritatively, since two requests may pass the pre-check together.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from service.common.api_errors import ApiError
from service.common.names import bucket_name_problem
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.meta import Bucket, Outcome, records
from service.meta.identity import BUCKET_ID_HEX_DIGITS, BUCKET_ID_PREFIX
from service.ops.lock_settings import lock_changes, lock_settings

MAX_TAGS = 50
MAX_TAG_CHARS = 256


def outcome_error(outcome: Outcome) -> ApiError:
    """The ApiError for a rejected outcome."""
    return ApiError(outcome.error_code or "InternalError", outcome.error_message or "refused")


def new_bucket_id() -> str:
    """A fresh bucket identity (``service.meta.identity``): random, drawn before journaling."""
    return BUCKET_ID_PREFIX + secrets.token_hex(BUCKET_ID_HEX_DIGITS // 2)


def require_bucket(engine: Engine, name: str) -> Bucket:
    """The bucket called ``name`` or 404 NoSuchBucket."""
    bucket = engine.state.get_bucket(name)
    if bucket is None:
        raise ApiError("NoSuchBucket", f"bucket {name!r} does not exist")
    return bucket


def _quota(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ApiError("InvalidArgument", "quota_bytes must be a non-negative integer or null")
    return value


def _versioning(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ApiError("InvalidArgument", "versioning_enabled must be true or false")
    return value


def _tags(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or len(value) > MAX_TAGS:
        raise ApiError("InvalidArgument", f"tags must be an object of at most {MAX_TAGS} strings")
    tags: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ApiError("InvalidArgument", "tag names and values must be strings")
        if not key or len(key) > MAX_TAG_CHARS or len(item) > MAX_TAG_CHARS:
            raise ApiError("InvalidArgument", f"tags are 1 to {MAX_TAG_CHARS} characters")
        tags[key] = item
    return tags


async def create_bucket(engine: Engine, owner: str, body: Mapping[str, Any]) -> Bucket:
    """Create a bucket from a ``POST /buckets`` body owned by ``owner``."""
    unknown = set(body) - {
        "name",
        "quota_bytes",
        "versioning_enabled",
        "tags",
        "object_lock_enabled",
        "default_retention",
    }
    if unknown:
        raise ApiError("InvalidArgument", f"unknown fields: {', '.join(sorted(unknown))}")
    name = body.get("name")
    if not isinstance(name, str):
        raise ApiError("InvalidBucketName", "name is required and must be a string")
    problem = bucket_name_problem(name)
    if problem:
        raise ApiError("InvalidBucketName", problem)
    quota = _quota(body.get("quota_bytes"))
    locking = lock_settings(body)
    versioning = _versioning(body.get("versioning_enabled", bool(locking))) or bool(locking)
    tags = _tags(body.get("tags", {}))
    if engine.state.get_bucket(name) is not None:
        raise ApiError("BucketAlreadyExists", f"bucket {name!r} already exists")
    outcome = await engine.commit(
        records.bucket_created(
            name=name,
            owner=owner,
            quota_bytes=quota,
            versioning_enabled=versioning,
            tags=tags,
            at=now_ms(),
            bucket_id=new_bucket_id(),
            **locking,
        )
    )
    if not outcome.ok:
        raise outcome_error(outcome)
    return require_bucket(engine, name)


async def update_bucket(engine: Engine, name: str, body: Mapping[str, Any]) -> Bucket:
    """Apply a ``PATCH /buckets/{name}`` body."""
    record = require_bucket(engine, name)
    unknown = set(body) - {
        "quota_bytes",
        "versioning_enabled",
        "tags",
        "object_lock_enabled",
        "default_retention",
    }
    if unknown:
        raise ApiError("InvalidArgument", f"unknown fields: {', '.join(sorted(unknown))}")
    changes: dict[str, Any] = {}
    if "quota_bytes" in body:
        changes["quota_bytes"] = _quota(body["quota_bytes"])
    if "versioning_enabled" in body:
        changes["versioning_enabled"] = _versioning(body["versioning_enabled"])
    if "tags" in body:
        changes["tags"] = _tags(body["tags"])
    changes.update(lock_changes(record, body))
    if changes:
        outcome = await engine.commit(
            records.bucket_updated(name=name, changes=changes, at=now_ms())
        )
        if not outcome.ok:
            raise outcome_error(outcome)
    return require_bucket(engine, name)


async def delete_bucket(engine: Engine, name: str, *, force: bool) -> None:
    """Delete a bucket; its payloads are removed after the delete is committed."""
    require_bucket(engine, name)
    if not force and engine.state.bucket_usage(name).object_count > 0:
        raise ApiError("BucketNotEmpty", f"bucket {name!r} is not empty; use force=true")
    outcome = await engine.commit(records.bucket_deleted(name=name, force=force, at=now_ms()))
    if not outcome.ok:
        raise outcome_error(outcome)
