"""Object lock operations: a bucket's lock settings, a version's retention and legal hold.

Transport-free, like the other ``service.ops`` modules: the HTTP handlers call these with
the parsed request. They check the request's shape and refuse what the state already
forbids (a locked version's DELETE answers 423 without a journal record); the verdict that
counts is ``MetaState.apply``'s (``service.meta.lock_state``), made again with the
record's own time, so a request racing a change of the lock still gets the rule.

Where the contract is silent (docs/security.md, "Object lock"): ``retain_until`` is an
RFC 3339 time with a zone, in the future and within 100 years; both ``mode`` and
``retain_until`` null remove a retention; a bucket's ``default_retention.days`` is a
positive number (fractions allowed, as lifecycle days are) up to 36,500; retention and legal
hold on a bucket created without object lock are 409 InvalidState. A bucket's own lock
settings are ``service.ops.lock_settings``'s.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from service.common.api_errors import ApiError
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.meta import NULL_VERSION_ID, ObjectVersion, records
from service.meta.lock_policy import DAY_MS, MODES, retention_argument_problem
from service.ops.buckets import outcome_error, require_bucket
from service.ops.objects import require_key

MAX_RETAIN_MS = 100 * 365 * DAY_MS
"""``retain_until`` may lie at most this far ahead (about 100 years)."""
LEGAL_HOLD_STATES = ("on", "off")


# -- request bodies -------------------------------------------------------------------------


def parse_time(value: Any, name: str) -> int:
    """An RFC 3339 time with a zone as ms since the epoch (400 otherwise)."""
    if not isinstance(value, str) or len(value) > 64:
        raise ApiError("InvalidArgument", f"{name} must be an RFC 3339 time")
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ApiError("InvalidArgument", f"{name} must be an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise ApiError("InvalidArgument", f"{name} needs a zone (Z or +hh:mm)")
    return int(moment.timestamp() * 1000)


def parse_retention(body: Mapping[str, Any], now: int) -> tuple[str | None, int | None]:
    """A retention PUT body as ``(mode, retain_until ms)``; both null remove it."""
    if set(body) != {"mode", "retain_until"}:
        raise ApiError("InvalidArgument", 'the body must be {"mode", "retain_until"}')
    mode = body["mode"]
    if mode is not None and mode not in MODES:
        raise ApiError("InvalidArgument", "mode must be governance, compliance or null")
    until = (
        None if body["retain_until"] is None else parse_time(body["retain_until"], "retain_until")
    )
    problem = retention_argument_problem(mode, until, now)
    if problem is None and until is not None and until > now + MAX_RETAIN_MS:
        problem = "retain_until lies more than 100 years ahead"
    if problem is not None:
        raise ApiError("InvalidArgument", problem)
    return mode, until


def parse_legal_hold(body: Mapping[str, Any]) -> bool:
    if set(body) != {"status"} or body["status"] not in LEGAL_HOLD_STATES:
        raise ApiError("InvalidArgument", 'the body must be {"status": "on" | "off"}')
    return bool(body["status"] == "on")


# -- operations ------------------------------------------------------------------------------


def lock_target(engine: Engine, bucket: str, key: str, version_id: str | None) -> ObjectVersion:
    """The version a retention or legal hold request names (the current one without
    ``version_id``), or the contract's 404 / 405 / 409."""
    record = require_bucket(engine, bucket)
    require_key(key)
    version = engine.state.head_object(bucket, key, version_id)
    if version is None:
        if version_id is None:
            raise ApiError("NoSuchKey", f"no object {key!r} in bucket {bucket!r}")
        raise ApiError("NoSuchVersion", f"no version {version_id!r} of {key!r}")
    if version.is_delete_marker:
        if version_id is None:
            raise ApiError("NoSuchKey", f"no object {key!r} in bucket {bucket!r}")
        raise ApiError("MethodNotAllowed", "the version is a delete marker")
    if not record.object_lock_enabled:
        raise ApiError("InvalidState", f"bucket {bucket!r} was not created with object lock")
    return version


async def set_retention(
    engine: Engine,
    version: ObjectVersion,
    mode: str | None,
    retain_until: int | None,
    *,
    bypass: bool,
) -> ObjectVersion:
    """Journal a retention change of ``version``; ``apply`` judges it (423 when refused)."""
    engine.ensure_writable()
    outcome = await engine.commit(
        records.object_retention_set(
            bucket=version.bucket,
            key=version.key,
            version_id=version.version_id or NULL_VERSION_ID,
            mode=mode,
            retain_until=retain_until,
            bypass=bypass,
            at=now_ms(),
        )
    )
    if not outcome.ok or not isinstance(outcome.value, ObjectVersion):
        raise outcome_error(outcome)
    return outcome.value


async def set_legal_hold(engine: Engine, version: ObjectVersion, on: bool) -> ObjectVersion:
    """Journal turning ``version``'s legal hold on or off."""
    engine.ensure_writable()
    outcome = await engine.commit(
        records.object_legal_hold_set(
            bucket=version.bucket,
            key=version.key,
            version_id=version.version_id or NULL_VERSION_ID,
            on=on,
            at=now_ms(),
        )
    )
    if not outcome.ok or not isinstance(outcome.value, ObjectVersion):
        raise outcome_error(outcome)
    return outcome.value
