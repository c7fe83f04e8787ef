"""Typed results of the upkeep routes: lifecycle rules, webhooks, scrub, events, upload pages.

The same conventions as ``_models``: frozen dataclasses whose fields carry the contract's
JSON names, ``from_json`` that ignores unknown fields and parses timestamps. The two
documents a caller also *sends* (``LifecycleRule``, ``Webhook``) have ``to_json``; a webhook's
``secret`` goes out but never comes back (the server does not return it). Pure.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from service.client._models import Session, optional_timestamp, parse_timestamp

__all__ = [
    "CorruptObject",
    "Event",
    "LifecycleRule",
    "LifecycleRun",
    "ScrubStatus",
    "UploadPage",
    "Webhook",
    "WebhookStatus",
]


def _days(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclasses.dataclass(frozen=True)
class LifecycleRule:
    """One lifecycle rule of a bucket: what happens to keys under ``prefix`` after so many
    days (fractions allowed). A rule names at least one action; ids are unique per bucket."""

    id: str
    prefix: str = ""
    enabled: bool = True
    expire_after_days: float | None = None
    noncurrent_expire_after_days: float | None = None
    abort_multipart_after_days: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LifecycleRule:
        return cls(
            id=str(data["id"]),
            prefix=str(data.get("prefix") or ""),
            enabled=bool(data.get("enabled", True)),
            expire_after_days=_days(data.get("expire_after_days")),
            noncurrent_expire_after_days=_days(data.get("noncurrent_expire_after_days")),
            abort_multipart_after_days=_days(data.get("abort_multipart_after_days")),
        )

    def to_json(self) -> dict[str, Any]:
        """The rule as ``PUT .../lifecycle`` takes it (actions that are None left out)."""
        document: dict[str, Any] = {"id": self.id, "prefix": self.prefix, "enabled": self.enabled}
        for name in (
            "expire_after_days",
            "noncurrent_expire_after_days",
            "abort_multipart_after_days",
        ):
            value = getattr(self, name)
            if value is not None:
                document[name] = value
        return document


@dataclasses.dataclass(frozen=True)
class LifecycleRun:
    """What one lifecycle pass did (``run_lifecycle``)."""

    expired: int
    noncurrent_removed: int
    uploads_aborted: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LifecycleRun:
        return cls(
            expired=int(data["expired"]),
            noncurrent_removed=int(data["noncurrent_removed"]),
            uploads_aborted=int(data["uploads_aborted"]),
        )


@dataclasses.dataclass(frozen=True)
class WebhookStatus:
    """How delivery to one webhook is going."""

    delivered: int
    pending: int
    failed_attempts: int
    last_error: str | None
    last_delivered_at: datetime.datetime | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WebhookStatus:
        return cls(
            delivered=int(data["delivered"]),
            pending=int(data["pending"]),
            failed_attempts=int(data["failed_attempts"]),
            last_error=data.get("last_error"),
            last_delivered_at=optional_timestamp(data.get("last_delivered_at")),
        )


@dataclasses.dataclass(frozen=True)
class Webhook:
    """A bucket's webhook: events of ``events`` types (all when empty) for keys under
    ``prefix`` are POSTed to ``url``, signed with ``secret`` (HMAC-SHA256). ``secret`` is
    what you send; the server never returns it, and returns ``status`` instead."""

    id: str
    url: str
    secret: str | None = dataclasses.field(default=None, repr=False)
    events: tuple[str, ...] = ()
    prefix: str = ""
    status: WebhookStatus | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Webhook:
        status = data.get("status")
        return cls(
            id=str(data["id"]),
            url=str(data["url"]),
            events=tuple(str(kind) for kind in data.get("events") or ()),
            prefix=str(data.get("prefix") or ""),
            status=WebhookStatus.from_json(status) if isinstance(status, Mapping) else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The webhook as ``PUT .../notifications`` takes it; ValueError without a secret."""
        if not self.secret:
            raise ValueError(f"webhook {self.id!r} needs a secret to sign its deliveries")
        document: dict[str, Any] = {
            "id": self.id,
            "url": self.url,
            "prefix": self.prefix,
            "secret": self.secret,
        }
        if self.events:
            document["events"] = list(self.events)
        return document


@dataclasses.dataclass(frozen=True)
class CorruptObject:
    """A stored version whose payload failed the scrub's size or SHA-256 check."""

    bucket: str
    key: str
    version_id: str | None
    detected_at: datetime.datetime
    problem: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CorruptObject:
        return cls(
            bucket=data["bucket"],
            key=data["key"],
            version_id=data.get("version_id"),
            detected_at=parse_timestamp(data["detected_at"]),
            problem=data.get("problem"),
        )


@dataclasses.dataclass(frozen=True)
class RepairedObject:
    """A stored version whose payload the scrub put back from the other side's verified copy
    (``source``: ``primary`` or ``standby:<id>``)."""

    bucket: str
    key: str
    version_id: str | None
    repaired_at: datetime.datetime
    source: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RepairedObject:
        return cls(
            bucket=data["bucket"],
            key=data["key"],
            version_id=data.get("version_id"),
            repaired_at=parse_timestamp(data["repaired_at"]),
            source=data["from"],
        )


@dataclasses.dataclass(frozen=True)
class ScrubStatus:
    """The background scrub: ``state`` is ``idle`` or ``running``; ``corrupt`` lists the
    payloads it found damaged (quarantined: their reads answer 500); ``repaired`` those it
    put back from a standby's (or the primary's) verified copy."""

    state: str
    started_at: datetime.datetime | None
    finished_at: datetime.datetime | None
    objects_checked: int
    bytes_checked: int
    corrupt: list[CorruptObject]
    repaired: list[RepairedObject] = dataclasses.field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScrubStatus:
        return cls(
            state=str(data["state"]),
            started_at=optional_timestamp(data.get("started_at")),
            finished_at=optional_timestamp(data.get("finished_at")),
            objects_checked=int(data["objects_checked"]),
            bytes_checked=int(data["bytes_checked"]),
            corrupt=[CorruptObject.from_json(item) for item in data.get("corrupt") or []],
            repaired=[RepairedObject.from_json(item) for item in data.get("repaired") or []],
        )


@dataclasses.dataclass(frozen=True)
class Event:
    """One committed change of an object, from a bucket's event stream. ``type`` is
    ``object.created``, ``object.deleted``, ``object.delete_marker_created`` or
    ``object.version_deleted``; ``sequence`` grows with the server's journal and is what a
    stream resumes after; ``event_id`` is stable across redeliveries."""

    event_id: str
    sequence: int
    type: str
    bucket: str
    key: str
    version_id: str | None
    size_bytes: int | None
    etag: str | None
    time: datetime.datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        size = data.get("size_bytes")
        return cls(
            event_id=str(data["event_id"]),
            sequence=int(data["sequence"]),
            type=str(data["type"]),
            bucket=data["bucket"],
            key=data["key"],
            version_id=data.get("version_id"),
            size_bytes=None if size is None else int(size),
            etag=data.get("etag"),
            time=parse_timestamp(data["time"]),
        )


@dataclasses.dataclass(frozen=True)
class UploadPage:
    """One page of a bucket's open multipart sessions; ``next_cursor`` is None on the last."""

    uploads: list[Session]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UploadPage:
        return cls(
            uploads=[Session.from_json(item) for item in data["uploads"]],
            next_cursor=data.get("next_cursor"),
        )
