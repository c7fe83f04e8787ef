"""Object lock in the metadata state: the events that set a version's retention and legal
hold, a bucket's object lock settings, and the checks ``MetaState`` makes before it removes
a version.

``MetaState`` dispatches ``ObjectRetentionSet`` and ``ObjectLegalHoldSet`` here, reads a
bucket's lock settings from its events through ``bucket_settings`` / ``setting_changes``,
and asks ``removal_problem`` before every removal of a version and ``stamp`` for every new
version. The rules themselves are ``service.meta.lock_policy``'s; this module applies them
to the state with the event's time and the clock rule (``trusted``: the event's time is not
behind the newest one applied, ``latest_at``, which this module keeps for ``MetaState``).

Thread-safety: like ``MetaState``, event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from service.meta import fields, lock_policy, records
from service.meta.fields import MalformedEventError
from service.meta.model import NULL_VERSION_ID, Bucket, ObjectVersion
from service.meta.object_index import ObjectStore, Versions, find_version
from service.meta.outcome import Outcome, accepted, rejected

Handler = Callable[[Mapping[str, Any]], Outcome]

SCAN_PAGE = 1000
"""Versions read per page when a forced bucket deletion looks for locked ones."""


def _mode(value: Any) -> str | None:
    if value is not None and value not in lock_policy.MODES:
        raise MalformedEventError(f"unknown retention mode {value!r}")
    return value if value is None else str(value)


def _days(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise MalformedEventError("default_retention_days must be a positive number")
    return float(value)


def bucket_settings(event: Mapping[str, Any]) -> dict[str, Any]:
    """The object lock fields of a ``BucketCreated`` event (absent: no object lock)."""
    if not event.get("object_lock_enabled"):
        return {}
    mode = _mode(event.get("default_retention_mode"))
    days = _days(event.get("default_retention_days"))
    if (mode is None) != (days is None):
        raise MalformedEventError("a default retention needs a mode and days")
    return {
        "object_lock_enabled": True,
        "default_retention_mode": mode,
        "default_retention_days": days,
    }


def setting_changes(bucket: Bucket, changes: Mapping[str, Any]) -> dict[str, Any] | str:
    """The bucket fields a ``BucketUpdated`` event changes about object lock, or why the
    change is refused (InvalidState): versioning stays on, a default retention needs
    object lock."""
    updates: dict[str, Any] = {}
    if "default_retention_mode" in changes or "default_retention_days" in changes:
        mode = _mode(changes.get("default_retention_mode"))
        days = _days(changes.get("default_retention_days"))
        if (mode is None) != (days is None):
            raise MalformedEventError("a default retention needs a mode and days")
        if not bucket.object_lock_enabled:
            return f"bucket {bucket.name!r} has no object lock: it takes no default retention"
        updates["default_retention_mode"] = mode
        updates["default_retention_days"] = days
    if bucket.object_lock_enabled and changes.get("versioning_enabled") is False:
        return f"bucket {bucket.name!r} has object lock: its versioning stays on"
    return updates


class ObjectLocks:
    """Retention and legal hold of versions (see the module docstring)."""

    def __init__(self, buckets: Mapping[str, Bucket], objects: ObjectStore) -> None:
        self._buckets = buckets
        self._objects = objects
        self.latest_at = 0
        """The newest time of any event applied (ms): the clock rule counts nothing as
        ended for an event older than it (``service.meta.lock_policy``)."""

    def observe_time(self, at: Any) -> None:
        """Note an event's time (``MetaState.apply`` does for every event; a start for a
        record replayed into a persistent index that already holds its effects)."""
        if isinstance(at, int) and not isinstance(at, bool) and at > self.latest_at:
            self.latest_at = at

    def _trusted(self, at: int) -> bool:
        return at >= self.latest_at

    def handlers(self) -> dict[str, Handler]:
        return {
            records.OBJECT_RETENTION_SET: self._retention_set,
            records.OBJECT_LEGAL_HOLD_SET: self._legal_hold_set,
        }

    # -- checks for MetaState -------------------------------------------------------------

    def removal_problem(self, version: ObjectVersion, at: int) -> str | None:
        """Why ``version`` may not be removed by an event at ``at`` (None: it may)."""
        problem = lock_policy.lock_problem(version, at, trusted=self._trusted(at))
        if problem is None:
            return None
        shown = version.version_id or NULL_VERSION_ID
        return f"version {shown!r} of {version.key!r} cannot be removed: {problem}"

    def holds_locked(self, bucket: Bucket, at: int) -> bool:
        """Whether any version of ``bucket`` is locked at ``at`` (a scan of its versions,
        for a forced deletion; only a bucket with object lock can hold one)."""
        if not bucket.object_lock_enabled:
            return False
        trusted = self._trusted(at)
        start: tuple[str, int] | None = None
        while True:
            page = self._objects.list_versions(bucket.name, "", SCAN_PAGE, start)
            for entry in page.versions:
                if lock_policy.is_locked(entry.version, at, trusted=trusted):
                    return True
            if not page.truncated or page.last_item is None:
                return False
            start = page.last_item

    def stamp(self, bucket: Bucket, version: ObjectVersion, at: int) -> ObjectVersion:
        """A new version with its bucket's default retention (unchanged when none)."""
        retention = lock_policy.default_retention(
            bucket.default_retention_mode, bucket.default_retention_days, at
        )
        if retention is None or version.is_delete_marker:
            return version
        return replace(version, retention_mode=retention[0], retain_until=retention[1])

    # -- events ---------------------------------------------------------------------------

    def _find(self, event: Mapping[str, Any]) -> tuple[Versions, int] | Outcome:
        name = fields.text(event, "bucket")
        key = fields.text(event, "key")
        version_id = fields.text(event, "version_id")
        bucket = self._buckets.get(name)
        if bucket is None:
            return rejected("NoSuchBucket", f"bucket {name!r} does not exist")
        if not bucket.object_lock_enabled:
            return rejected("InvalidState", f"bucket {name!r} was not created with object lock")
        versions = self._objects.versions(name, key)
        index = find_version(versions, None if version_id == NULL_VERSION_ID else version_id)
        if index is None:
            return rejected("NoSuchVersion", f"no version {version_id!r} of {key!r}")
        if versions[index].is_delete_marker:
            return rejected("MethodNotAllowed", "a delete marker has no lock")
        return versions, index

    def _replace(self, versions: Versions, index: int, new: ObjectVersion) -> Outcome:
        after = (*versions[:index], new, *versions[index + 1 :])
        self._objects.set_versions(new.bucket, new.key, versions, after)
        return accepted(new)

    def _retention_set(self, event: Mapping[str, Any]) -> Outcome:
        mode = _mode(fields.optional_text(event, "mode"))
        until = fields.optional_integer(event, "retain_until")
        bypass = fields.flag(event, "bypass")
        at = fields.integer(event, "at")
        found = self._find(event)
        if isinstance(found, Outcome):
            return found
        versions, index = found
        version = versions[index]
        problem = lock_policy.retention_argument_problem(mode, until, at)
        if problem is not None:
            return rejected("InvalidArgument", problem)
        problem = lock_policy.retention_change_problem(
            version, mode, until, at, trusted=self._trusted(at), bypass=bypass
        )
        if problem is not None:
            return rejected("ObjectLocked", problem)
        return self._replace(
            versions, index, replace(version, retention_mode=mode, retain_until=until)
        )

    def _legal_hold_set(self, event: Mapping[str, Any]) -> Outcome:
        on = fields.flag(event, "on")
        fields.integer(event, "at")
        found = self._find(event)
        if isinstance(found, Outcome):
            return found
        versions, index = found
        return self._replace(versions, index, replace(versions[index], legal_hold=on))
