"""``MetaState``: the whole metadata state in memory, changed only by ``apply(event)``.

The engine applies every journaled event here, in journal order, both at startup replay and
at run time, so ``apply`` is deterministic (everything it needs, timestamps included, is in
the event) and total (it never raises: a conflicting or malformed event yields a rejected
``Outcome`` and leaves the state untouched). Conditions that requests pre-checked (bucket
exists, If-Match, If-None-Match, quota) are checked again here because two requests may pass
their pre-checks before either is applied.

Indexes:
- buckets by name, and per bucket each key's versions (oldest first, latest last) and the
  keys whose latest version is not a delete marker (``service.meta.object_index``), so a
  listing page costs O(log n + page) and never steps over deleted keys;
- usage per bucket, maintained as versions come and go, and a reference count per payload
  id (``service.meta.refs``), so a payload is released exactly when its last reference
  goes; both are kept by the object store beside the versions, so a start that reopens a
  persistent store (``reopen``) never recounts them;
- multipart sessions and their parts (``service.meta.upload_state``), users and access
  keys (``service.meta.accounts``), video jobs and shares (``service.meta.video_state``),
  retention and legal hold (``service.meta.lock_state``, asked before every removal of a
  version): each resource in its own module with its own handlers.

Object semantics (S3's): with versioning off, a PUT replaces the null version (version id
None) and keeps versions written while versioning was on; a DELETE removes the null version
and, if other versions remain, leaves a null delete marker. With versioning on, each PUT
appends a version and a DELETE appends a delete marker. A DELETE of a version id removes that
version (or marker) for good. ``"null"`` names the null version in a version id.

Thread-safety: not thread-safe. Mutate and read on the event-loop thread only; hand a
``freeze()`` image to other threads (records are immutable, the image's containers are
private copies).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from service.meta import fields, records
from service.meta.accounts import Accounts
from service.meta.epoch_state import Epochs, EpochStart
from service.meta.fields import MalformedEventError
from service.meta.frozen import FrozenState, Versions
from service.meta.identity import legacy_bucket_id
from service.meta.lifecycle_state import Lifecycle, judged_refusal
from service.meta.lock_state import ObjectLocks, bucket_settings, setting_changes
from service.meta.model import (
    NULL_VERSION_ID,
    Bucket,
    Counts,
    ObjectPage,
    ObjectVersion,
    Usage,
    VersionPage,
    delete_marker,
)
from service.meta.notification_state import Notifications
from service.meta.object_index import (
    ObjectIndex,
    ObjectStore,
    PayloadHolder,
    find_version,
    visible,
)
from service.meta.outcome import Outcome, accepted, rejected
from service.meta.refs import PayloadRefs
from service.meta.resource_reads import ResourceReads
from service.meta.upload_state import Uploads
from service.meta.video_state import Media

Handler = Callable[[Mapping[str, Any]], Outcome]


class MetaState(ResourceReads):
    """The object store's metadata; see the module docstring."""

    def __init__(self, objects: ObjectStore | None = None) -> None:
        """``objects`` holds the object versions: in memory unless given."""
        self._server_id: str | None = None
        self._buckets: dict[str, Bucket] = {}
        self._objects: ObjectStore = objects if objects is not None else ObjectIndex()
        self._refs = PayloadRefs(self._objects)
        self._uploads = Uploads(self._refs, self._buckets.__contains__, self._store_version)
        self._accounts = Accounts()
        self._media = Media(self._buckets.__contains__)
        self._anomalies: dict[str, int] = {}
        self._lifecycle = Lifecycle(self.bucket_id_of)
        self._notifications = Notifications(self.bucket_id_of)
        self._epochs = Epochs()
        self.locks = ObjectLocks(self._buckets, self._objects)  # read through it, never change it
        self._handlers: dict[str, Handler] = {
            records.SERVER_INITIALIZED: self._server_initialized,
            records.BUCKET_CREATED: self._bucket_created,
            records.BUCKET_UPDATED: self._bucket_updated,
            records.BUCKET_DELETED: self._bucket_and_its_jobs_deleted,
            records.OBJECT_STORED: self._object_stored,
            records.OBJECT_DELETED: self._object_deleted,
            **self._uploads.handlers(),
            **self._accounts.handlers(),
            **self._media.handlers(),
            **self._lifecycle.handlers(),
            **self._notifications.handlers(),
            **self.locks.handlers(),
            **self._epochs.handlers(),
        }

    # -- images -------------------------------------------------------------------------

    def freeze(self, *, objects: bool = True) -> FrozenState:
        """A point-in-time image, cheap enough for the event loop (no record is copied).

        ``objects=False`` leaves the object versions out (every bucket lists none): what a
        persistent object index needs kept beside it."""
        users, keys, last_used = self._accounts.images()
        jobs, shares = self._media.images()
        uploads, parts = self._uploads.images()
        images = self._objects.image() if objects else {}
        return FrozenState(
            server_id=self._server_id,
            buckets=dict(self._buckets),
            objects={name: images.get(name, ([], {})) for name in self._buckets},
            uploads=uploads,
            parts=parts,
            users=users,
            access_keys=keys,
            key_last_used=last_used,
            anomalies=dict(self._anomalies),
            video_jobs=jobs,
            video_shares=shares,
            lifecycle=self._lifecycle.images(),
            notifications=self._notifications.images(),
            epochs=self._epochs.images(),
            latest_at=self.locks.latest_at,
        )

    @classmethod
    def reopen(cls, rest: FrozenState, objects: ObjectStore) -> MetaState:
        """The state whose object versions, usage and payload references ``objects``
        holds and the rest ``rest`` (a ``freeze(objects=False)`` image): nothing is
        recounted, so it costs what ``rest`` holds, whatever the number of objects."""
        return cls.restore(rest, objects, counted=True)

    @classmethod
    def restore(
        cls, image: FrozenState, objects: ObjectStore | None = None, *, counted: bool = False
    ) -> MetaState:
        """A live state equal to ``image``; every derived index is rebuilt from the records.
        Its object versions go into ``objects`` (in memory unless given). ``counted``:
        ``objects`` already holds the versions and their usage and references."""
        state = cls(objects)
        state._server_id = image.server_id
        state._accounts.load(image.users, image.access_keys, image.key_last_used)
        state._anomalies = dict(image.anomalies)
        state._media.load(image.video_jobs, image.video_shares)
        state._lifecycle.load(image.lifecycle)
        state._notifications.load(image.notifications)
        state._epochs.load(image.epochs)
        state.locks.observe_time(image.latest_at)
        if counted:
            for name, bucket in image.buckets.items():
                state._buckets[name] = bucket
                state._uploads.add_bucket(name)
            state._uploads.load(image.uploads, image.parts, counted=True)
            return state
        for name, bucket in image.buckets.items():
            _, versions_by_key = image.objects.get(name, ([], {}))
            state._add_bucket(bucket, versions_by_key)
            for versions in versions_by_key.values():
                for version in versions:
                    state._count_in(version)
        state._uploads.load(image.uploads, image.parts)
        return state

    def __eq__(self, other: object) -> bool:
        """Equal content."""
        if not isinstance(other, MetaState):
            return NotImplemented
        return self.freeze() == other.freeze()

    __hash__ = None  # type: ignore[assignment]

    # -- apply --------------------------------------------------------------------------

    def apply(self, event: Mapping[str, Any]) -> Outcome:
        """Apply one journaled event; never raises (see the module docstring)."""
        kind = event.get("type") if isinstance(event, Mapping) else None
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            self._note(f"unknown:{kind}")
            return rejected("InternalError", f"unknown event type {kind!r}")
        try:
            return handler(event)
        except MalformedEventError as exc:
            self._note(f"malformed:{kind}")
            return rejected("InternalError", f"malformed {kind} event: {exc}")
        finally:
            self.locks.observe_time(event.get("at"))

    def _note(self, anomaly: str) -> None:
        self._anomalies[anomaly] = self._anomalies.get(anomaly, 0) + 1

    def _count_in(self, version: ObjectVersion) -> None:
        """Account for a version entering its bucket: usage and its payload reference."""
        if version.payload_id is not None:
            usage = self._objects.usage(version.bucket)
            self._objects.set_usage(version.bucket, usage.plus(version.size))
            self._refs.ref(version.payload_id)

    def _count_out(self, version: ObjectVersion, released: list[str]) -> None:
        if version.payload_id is not None:
            usage = self._objects.usage(version.bucket)
            self._objects.set_usage(version.bucket, usage.minus(version.size))
            self._refs.unref(version.payload_id, released)

    def _add_bucket(
        self, bucket: Bucket, versions_by_key: Mapping[str, Versions] | None = None
    ) -> None:
        self._buckets[bucket.name] = bucket
        self._objects.add_bucket(bucket.name, versions_by_key)
        self._objects.set_usage(bucket.name, Usage())
        self._uploads.add_bucket(bucket.name)

    # -- buckets ------------------------------------------------------------------------

    def _server_initialized(self, event: Mapping[str, Any]) -> Outcome:
        server_id = fields.text(event, "server_id")
        fields.integer(event, "at")
        if self._server_id is not None:
            return rejected("InvalidState", "the server is already initialized")
        self._server_id = server_id
        return accepted(None)

    def _bucket_created(self, event: Mapping[str, Any]) -> Outcome:
        name, at = fields.text(event, "name"), fields.integer(event, "at")
        bucket = Bucket(
            name=name,
            owner=fields.text(event, "owner"),
            quota_bytes=fields.optional_integer(event, "quota_bytes"),
            versioning_enabled=fields.flag(event, "versioning_enabled"),
            tags=fields.string_map(event, "tags"),
            created_at=at,
            updated_at=at,
            # A record from before identities carries none (``service.meta.identity``).
            bucket_id=fields.added_text(event, "bucket_id") or legacy_bucket_id(name, at),
            **bucket_settings(event),
        )
        if bucket.name in self._buckets:
            return rejected("BucketAlreadyExists", f"bucket {bucket.name!r} already exists")
        self._add_bucket(bucket)
        return accepted(bucket)

    def _bucket_updated(self, event: Mapping[str, Any]) -> Outcome:
        name = fields.text(event, "name")
        changes = fields.mapping(event, "changes")
        at = fields.integer(event, "at")
        updates: dict[str, Any] = {}
        if "quota_bytes" in changes:
            updates["quota_bytes"] = fields.optional_integer(changes, "quota_bytes")
        if "versioning_enabled" in changes:
            updates["versioning_enabled"] = fields.flag(changes, "versioning_enabled")
        if "tags" in changes:
            updates["tags"] = fields.string_map(changes, "tags")
        bucket = self._buckets.get(name)
        if bucket is None:
            return rejected("NoSuchBucket", f"bucket {name!r} does not exist")
        locking = setting_changes(bucket, changes)
        if isinstance(locking, str):
            return rejected("InvalidState", locking)
        updated = replace(bucket, updated_at=at, **updates, **locking)
        self._buckets[name] = updated
        return accepted(updated)

    def _bucket_and_its_jobs_deleted(self, event: Mapping[str, Any]) -> Outcome:
        """A deleted bucket takes its video jobs and shares along (``service.meta.video_state``)."""
        outcome = self._bucket_deleted(event)
        if outcome.ok:
            self._media.forget_bucket(fields.text(event, "name"))
            self._lifecycle.forget_bucket(fields.text(event, "name"))
            self._notifications.forget_bucket(fields.text(event, "name"))
        return outcome

    def _bucket_deleted(self, event: Mapping[str, Any]) -> Outcome:
        """Delete a bucket; open uploads go with it (their parts released) even without force,
        since no object of the bucket references them."""
        name = fields.text(event, "name")
        force = fields.flag(event, "force")
        at = fields.integer(event, "at")
        bucket = self._buckets.get(name)
        if bucket is None:
            return rejected("NoSuchBucket", f"bucket {name!r} does not exist")
        if self._objects.holds_any(name) and not force:
            return rejected("BucketNotEmpty", f"bucket {name!r} is not empty")
        if force and self.locks.holds_locked(bucket, at):
            return rejected("BucketNotEmpty", f"bucket {name!r} holds locked versions")
        released: list[str] = []
        for version in self._objects.drop_bucket(name):
            if version.payload_id is not None:
                self._refs.unref(version.payload_id, released)
        self._uploads.drop_bucket(name, released)
        del self._buckets[name]
        self._objects.set_usage(name, None)
        return accepted(bucket, released)

    # -- objects ------------------------------------------------------------------------

    def _object_stored(self, event: Mapping[str, Any]) -> Outcome:
        name = fields.text(event, "bucket")
        key = fields.text(event, "key")
        payload_id = fields.text(event, "payload_id")
        size = fields.integer(event, "size", minimum=0)
        content_type = fields.text(event, "content_type")
        sha256 = fields.text(event, "sha256")
        metadata = fields.string_map(event, "custom_metadata")
        version_token = fields.text(event, "version_token")
        if_none_match = fields.flag(event, "if_none_match")
        if_match = fields.optional_text(event, "if_match")
        at = fields.integer(event, "at")
        bucket = self._buckets.get(name)
        if bucket is None:
            return self._refs.refuse("NoSuchBucket", f"bucket {name!r} does not exist", payload_id)
        latest = self.head_object(name, key)
        visible = latest is not None and not latest.is_delete_marker
        if if_none_match and visible:
            return self._refs.refuse(
                "PreconditionFailed", "the key exists (If-None-Match)", payload_id
            )
        if if_match is not None and not (
            visible and latest is not None and if_match in ("*", latest.sha256)
        ):
            return self._refs.refuse(
                "PreconditionFailed", "the ETag does not match If-Match", payload_id
            )
        return self._store_version(
            name, key, payload_id, size, content_type, sha256, metadata, version_token, at
        )

    def _store_version(
        self,
        name: str,
        key: str,
        payload_id: str,
        size: int,
        content_type: str,
        sha256: str,
        metadata: dict[str, str],
        version_token: str,
        at: int,
    ) -> Outcome:
        """Make a payload the key's newest version, if versioning and quota allow."""
        bucket = self._buckets[name]
        before = self._objects.versions(bucket.name, key)
        created_at = at
        if bucket.versioning_enabled:
            if find_version(before, version_token) is not None:
                return self._refs.refuse("InvalidState", "the version id is taken", payload_id)
            replaced = None
            kept = before
            version_id: str | None = version_token
        else:
            index = find_version(before, None)
            replaced = None if index is None else before[index]
            kept = before if index is None else before[:index] + before[index + 1 :]
            version_id = None
            if replaced is not None and replaced is before[-1] and not replaced.is_delete_marker:
                created_at = replaced.created_at
            if replaced is not None and (problem := self.locks.removal_problem(replaced, at)):
                return self._refs.refuse("ObjectLocked", problem, payload_id)
        freed = replaced.size if replaced is not None else 0
        if not self._quota_allows(bucket, size - freed):
            return self._refs.refuse(
                "QuotaExceeded", f"the object would take {bucket.name!r} past its quota", payload_id
            )
        version = ObjectVersion(
            bucket=bucket.name,
            key=key,
            version_id=version_id,
            payload_id=payload_id,
            size=size,
            content_type=content_type,
            sha256=sha256,
            custom_metadata=metadata,
            created_at=created_at,
            updated_at=at,
        )
        version = self.locks.stamp(bucket, version, at)
        released: list[str] = []
        self._count_in(version)
        if replaced is not None:
            self._count_out(replaced, released)
        self._objects.set_versions(bucket.name, key, before, (*kept, version))
        return accepted(version, released)

    def _quota_allows(self, bucket: Bucket, growth: int) -> bool:
        if bucket.quota_bytes is None:
            return True
        return self._objects.usage(bucket.name).size_bytes + growth <= bucket.quota_bytes

    def _object_deleted(self, event: Mapping[str, Any]) -> Outcome:
        name = fields.text(event, "bucket")
        key = fields.text(event, "key")
        version_id = fields.optional_text(event, "version_id")
        version_token = fields.text(event, "version_token")
        at = fields.integer(event, "at")
        bucket = self._buckets.get(name)
        if bucket is None:
            return rejected("NoSuchBucket", f"bucket {name!r} does not exist")
        before = self._objects.versions(name, key)
        if "judged" in event:  # a lifecycle delete: only of the version it judged due
            refusal = judged_refusal(event["judged"], before, self.bucket_id_of, name)
            if refusal is not None:
                return refusal
        released: list[str] = []
        if version_id is not None:
            index = find_version(before, None if version_id == NULL_VERSION_ID else version_id)
            if index is None:
                return rejected("NoSuchVersion", f"no version {version_id!r} of {key!r}")
            removed = before[index]
            if problem := self.locks.removal_problem(removed, at):
                return rejected("ObjectLocked", problem)
            self._count_out(removed, released)
            self._objects.set_versions(name, key, before, before[:index] + before[index + 1 :])
            return accepted(removed, released)
        if not visible(before):
            return rejected("NoSuchKey", f"no object {key!r} in bucket {name!r}")
        if bucket.versioning_enabled:
            if find_version(before, version_token) is not None:
                return rejected("InvalidState", "the version id is taken")
            marker = delete_marker(name, key, version_token, at)
            self._objects.set_versions(name, key, before, (*before, marker))
            return accepted(marker)
        index = find_version(before, None)
        kept = before if index is None else before[:index] + before[index + 1 :]
        if index is not None:
            if problem := self.locks.removal_problem(before[index], at):
                return rejected("ObjectLocked", problem)
            self._count_out(before[index], released)
        if not kept:
            self._objects.set_versions(name, key, before, ())
            return accepted(before[-1], released)
        marker = delete_marker(name, key, None, at)
        self._objects.set_versions(name, key, before, (*kept, marker))
        return accepted(marker, released)

    # -- reads: server, buckets, objects ------------------------------------------------

    @property
    def server_id(self) -> str | None:
        return self._server_id

    def epoch_history(self) -> tuple[EpochStart, ...]:
        """Which epoch began at which sequence, oldest first (``service.meta.epoch_state``)."""
        return self._epochs.history()

    def epochs_recorded(self) -> bool:
        return self._epochs.recorded()

    def anomalies(self) -> dict[str, int]:
        """Events that could not be applied, by ``unknown:<type>`` / ``malformed:<type>``."""
        return dict(self._anomalies)

    def get_bucket(self, name: str) -> Bucket | None:
        return self._buckets.get(name)

    def bucket_id_of(self, name: str) -> str | None:
        """The identity of the bucket called ``name`` now (None: no such bucket)."""
        bucket = self._buckets.get(name)
        return None if bucket is None else bucket.bucket_id

    def bucket_usage(self, name: str) -> Usage:
        """The bucket's usage (zero for a missing bucket)."""
        if name not in self._buckets:
            return Usage()
        return self._objects.usage(name)

    def list_buckets(self, owner: str | None = None) -> list[Bucket]:
        """Buckets by name; only those of ``owner`` unless it is None."""
        return [
            bucket
            for name, bucket in sorted(self._buckets.items())
            if owner is None or bucket.owner == owner
        ]

    def head_object(
        self, bucket: str, key: str, version_id: str | None = None
    ) -> ObjectVersion | None:
        """The latest version (None: latest; ``"null"``: the null version) or the given one.

        Delete markers are returned too, so the caller can tell "deleted" from "absent".
        """
        versions = self._objects.versions(bucket, key)
        if not versions:
            return None
        if version_id is None:
            return versions[-1]
        index = find_version(versions, None if version_id == NULL_VERSION_ID else version_id)
        return None if index is None else versions[index]

    def object_versions(self, bucket: str, key: str) -> Versions:
        """Every version of a key, oldest first (empty if none)."""
        return self._objects.versions(bucket, key)

    def quota_allows(self, bucket: str, key: str, incoming_size: int, reserved: int = 0) -> bool:
        """Whether storing ``incoming_size`` bytes as ``key`` would keep the bucket within
        its quota, with ``reserved`` bytes promised to PUTs in flight; False for a missing
        bucket. The authoritative check is ``apply``'s."""
        record = self._buckets.get(bucket)
        if record is None:
            return False
        freed = 0
        if not record.versioning_enabled:
            current = self.head_object(bucket, key, NULL_VERSION_ID)
            freed = 0 if current is None else current.size
        return self._quota_allows(record, reserved + incoming_size - freed)

    def list_objects(
        self,
        bucket: str,
        prefix: str = "",
        delimiter: str | None = None,
        limit: int = 1000,
        start_after: str | None = None,
    ) -> ObjectPage:
        """A page of the bucket's keys (see ``service.meta.listing``); empty if no bucket."""
        if bucket not in self._buckets:
            return ObjectPage((), (), None, False)
        return self._objects.list_objects(bucket, prefix, delimiter, limit, start_after)

    def list_versions(
        self,
        bucket: str,
        prefix: str = "",
        limit: int = 1000,
        start_after: tuple[str, int] | None = None,
    ) -> VersionPage:
        """A page of the bucket's versions (see ``service.meta.listing``)."""
        if bucket not in self._buckets:
            return VersionPage((), None, False)
        return self._objects.list_versions(bucket, prefix, limit, start_after)

    def referenced_payloads(self) -> set[str]:
        """Every payload id a version or a part references (a copy: safe to use off-loop).
        O(payloads): for checks and tests; the GC asks ``payload_holder`` instead."""
        return set(self._objects.referenced())

    def holds_payload(self, payload_id: str) -> bool:
        """Whether a version or a part references the payload (event-loop thread)."""
        return self._objects.ref_count(payload_id) > 0

    def payload_holder(self) -> PayloadHolder:
        """Whether a record holds a payload id, as of now (the last committed batch), for a
        GC pass on another thread; ``close`` it when done."""
        return self._objects.holder()

    def counts(self) -> Counts:
        usages = self._objects.usages().values()
        return Counts(
            buckets=len(self._buckets),
            objects=sum(usage.object_count for usage in usages),
            bytes_stored=sum(usage.size_bytes for usage in usages),
        )
