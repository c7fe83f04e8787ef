"""Multipart uploads: their part of the metadata state and of ``apply``.

Kept apart from buckets and objects (``state``) the way ``accounts`` is: sessions by id and
by bucket, and each session's parts. Parts hold their payloads in the state's shared
``PayloadRefs``; completing a session stores a version through the objects' own path
(``store_version``, which re-checks versioning and quota) before the session closes.

Thread-safety: like ``MetaState``, mutate only on the event-loop thread.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from service.meta import fields, records
from service.meta.model import PartInfo, UploadSession
from service.meta.outcome import Outcome, accepted, rejected
from service.meta.refs import PayloadRefs

MAX_PART_NUMBER = 10_000

Handler = Callable[[Mapping[str, Any]], Outcome]
StoreVersion = Callable[[str, str, str, int, str, str, dict[str, str], str, int], Outcome]
"""(bucket, key, payload id, size, content type, sha256, metadata, version token, at)."""


class Uploads:
    """Multipart sessions and their parts."""

    def __init__(
        self,
        refs: PayloadRefs,
        bucket_exists: Callable[[str], bool],
        store_version: StoreVersion,
    ) -> None:
        self._refs = refs
        self._bucket_exists = bucket_exists
        self._store_version = store_version
        self._uploads: dict[str, UploadSession] = {}
        self._parts: dict[str, dict[int, PartInfo]] = {}
        self._by_bucket: dict[str, dict[str, None]] = {}

    def handlers(self) -> dict[str, Handler]:
        return {
            records.UPLOAD_STARTED: self._upload_started,
            records.PART_STORED: self._part_stored,
            records.UPLOAD_COMPLETED: self._upload_completed,
            records.UPLOAD_ABORTED: self._upload_aborted,
        }

    # -- images -------------------------------------------------------------------------

    def images(self) -> tuple[dict[str, UploadSession], dict[str, dict[int, PartInfo]]]:
        """Shallow copies of the sessions and their parts (for a snapshot)."""
        parts = {upload_id: dict(parts) for upload_id, parts in self._parts.items()}
        return dict(self._uploads), parts

    def load(
        self,
        uploads: Mapping[str, UploadSession],
        parts: Mapping[str, Mapping[int, PartInfo]],
        *,
        counted: bool = False,
    ) -> None:
        """Hold the given sessions (from a snapshot); their parts take their payload refs
        (unless ``counted``: the refs already hold them). The buckets must be added first."""
        for upload_id, session in uploads.items():
            self._uploads[upload_id] = session
            self._by_bucket[session.bucket][upload_id] = None
            self._parts[upload_id] = dict(parts.get(upload_id, {}))
            for part in self._parts[upload_id].values():
                if not counted:
                    self._refs.ref(part.payload_id)

    # -- buckets ------------------------------------------------------------------------

    def add_bucket(self, name: str) -> None:
        self._by_bucket[name] = {}

    def drop_bucket(self, name: str, released: list[str]) -> None:
        """A deleted bucket's sessions go with it, their parts released."""
        for upload_id in list(self._by_bucket[name]):
            self.close(upload_id, released)
        del self._by_bucket[name]

    # -- apply --------------------------------------------------------------------------

    def _open_upload(self, upload_id: str, at: int) -> UploadSession | None:
        """The session, unless it is closed or expired at ``at``."""
        session = self._uploads.get(upload_id)
        if session is None or at > session.expires_at:
            return None
        return session

    def close(self, upload_id: str, released: list[str]) -> None:
        """Drop the session and release its parts."""
        session = self._uploads.pop(upload_id)
        del self._by_bucket[session.bucket][upload_id]
        for part in self._parts.pop(upload_id).values():
            self._refs.unref(part.payload_id, released)

    def _upload_started(self, event: Mapping[str, Any]) -> Outcome:
        session = UploadSession(
            upload_id=fields.text(event, "upload_id"),
            bucket=fields.text(event, "bucket"),
            key=fields.text(event, "key"),
            owner=fields.text(event, "owner"),
            content_type=fields.text(event, "content_type"),
            custom_metadata=fields.string_map(event, "custom_metadata"),
            recommended_part_size=fields.integer(event, "recommended_part_size", minimum=0),
            created_at=fields.integer(event, "at"),
            expires_at=fields.integer(event, "expires_at"),
        )
        if not self._bucket_exists(session.bucket):
            return rejected("NoSuchBucket", f"bucket {session.bucket!r} does not exist")
        if session.upload_id in self._uploads:
            return rejected("InvalidState", f"upload {session.upload_id!r} already exists")
        self._uploads[session.upload_id] = session
        self._by_bucket[session.bucket][session.upload_id] = None
        self._parts[session.upload_id] = {}
        return accepted(session)

    def _part_stored(self, event: Mapping[str, Any]) -> Outcome:
        upload_id = fields.text(event, "upload_id")
        part = PartInfo(
            part_number=fields.integer(event, "part_number"),
            payload_id=fields.text(event, "payload_id"),
            size=fields.integer(event, "size", minimum=0),
            sha256=fields.text(event, "sha256"),
            stored_at=fields.integer(event, "at"),
        )
        if self._open_upload(upload_id, part.stored_at) is None:
            return self._refs.refuse(
                "NoSuchUpload", f"no open upload {upload_id!r}", part.payload_id
            )
        if not 1 <= part.part_number <= MAX_PART_NUMBER:
            return self._refs.refuse(
                "InvalidPartNumber", f"part numbers are 1 to {MAX_PART_NUMBER}", part.payload_id
            )
        parts = self._parts[upload_id]
        old = parts.get(part.part_number)
        released: list[str] = []
        self._refs.ref(part.payload_id)
        if old is not None:
            self._refs.unref(old.payload_id, released)
        parts[part.part_number] = part
        return accepted(part, released)

    def _upload_completed(self, event: Mapping[str, Any]) -> Outcome:
        upload_id = fields.text(event, "upload_id")
        numbers = fields.integer_list(event, "part_numbers")
        payload_id = fields.text(event, "payload_id")
        size = fields.integer(event, "size", minimum=0)
        sha256 = fields.text(event, "sha256")
        version_token = fields.text(event, "version_token")
        at = fields.integer(event, "at")
        session = self._open_upload(upload_id, at)
        if session is None:
            return self._refs.refuse("NoSuchUpload", f"no open upload {upload_id!r}", payload_id)
        parts = self._parts[upload_id]
        if not numbers:
            return self._refs.refuse("InvalidPart", "at least one part is required", payload_id)
        if any(a >= b for a, b in itertools.pairwise(numbers)):
            return self._refs.refuse(
                "InvalidPartOrder", "parts must be strictly ascending", payload_id
            )
        missing = [number for number in numbers if number not in parts]
        if missing:
            return self._refs.refuse("InvalidPart", f"part {missing[0]} was not stored", payload_id)
        outcome = self._store_version(
            session.bucket,
            session.key,
            payload_id,
            size,
            session.content_type,
            sha256,
            dict(session.custom_metadata),
            version_token,
            at,
        )
        if not outcome.ok:
            return outcome
        released = list(outcome.released_payloads)
        self.close(upload_id, released)
        return accepted(outcome.value, released)

    def _upload_aborted(self, event: Mapping[str, Any]) -> Outcome:
        upload_id = fields.text(event, "upload_id")
        fields.text(event, "reason")
        fields.integer(event, "at")
        created_before = (
            fields.optional_integer(event, "created_before") if "created_before" in event else None
        )
        session = self._uploads.get(upload_id)
        if session is None:
            return rejected("NoSuchUpload", f"no upload {upload_id!r}")
        if created_before is not None and session.created_at >= created_before:
            return rejected("PreconditionFailed", "the session is newer than the lifecycle cutoff")
        released: list[str] = []
        self.close(upload_id, released)
        return accepted(session, released)

    # -- reads --------------------------------------------------------------------------

    def get(self, upload_id: str) -> UploadSession | None:
        """The session, open or expired-but-not-yet-aborted (compare ``expires_at``)."""
        return self._uploads.get(upload_id)

    def parts(self, upload_id: str) -> list[PartInfo]:
        """The session's parts by part number (empty for an unknown session)."""
        parts = self._parts.get(upload_id, {})
        return [parts[number] for number in sorted(parts)]

    def sessions(self, bucket: str | None = None) -> list[UploadSession]:
        """Sessions of ``bucket`` (all for None) by key, then age."""
        if bucket is None:
            sessions = list(self._uploads.values())
        else:
            ids = self._by_bucket.get(bucket, {})
            sessions = [self._uploads[upload_id] for upload_id in ids]
        return sorted(sessions, key=lambda s: (s.bucket, s.key, s.created_at, s.upload_id))

    def expired(self, now_ms: int) -> list[UploadSession]:
        """Sessions past their ``expires_at``, for the task that journals their expiry."""
        return [s for s in self.sessions() if s.expires_at < now_ms]
