"""Which events a reader of one bucket gets: those of that bucket, by identity, not by name.

A bucket deleted and created again under its name is another bucket
(``service.meta.identity``), so a stream, a ``since`` replay or a webhook of one never sees
the other's events. Every event derived by this version carries its bucket's ``bucket_id``.
A line of an event log written before identities carries none: it belongs to the bucket of
its name whose creation is not later than the event (``created_at <= time``); an older
bucket of that name was deleted before this one was created, so its events all came before
``created_at``. Such a line is given the identity it was matched to (its JSON gains
``bucket_id``), so every reader sees one shape.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from service.meta import Bucket


class FeedEvent(NamedTuple):
    """One event: what filters need, and its JSON body (one line, newline-terminated).

    ``bucket_id`` is empty for a line of an older log that no reader's scope claimed."""

    sequence: int
    bucket: str
    bucket_id: str
    key: str
    type: str
    body: bytes

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.body)
        return doc


def encode(doc: dict[str, Any]) -> bytes:
    """An event's JSON line, as the log and every reader hold it."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def time_ms(value: object) -> int:
    """An event's RFC 3339 ``time`` in ms since the epoch (0 when unreadable)."""
    if not isinstance(value, str):
        return 0
    try:
        return round(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        return 0


@dataclass(frozen=True, slots=True)
class BucketScope:
    """The events of one bucket (``None`` in a read: every bucket's)."""

    name: str
    bucket_id: str
    created_at: int
    """When the bucket was created (ms): an older log's line of its name from then on is its."""

    @classmethod
    def of(cls, bucket: Bucket) -> BucketScope:
        return cls(bucket.name, bucket.bucket_id, bucket.created_at)

    def holds(self, item: FeedEvent) -> bool:
        return item.bucket_id == self.bucket_id

    def claims(self, doc: dict[str, Any]) -> bool:
        """Whether a line without an identity (an older log's) is this bucket's."""
        return doc.get("bucket") == self.name and time_ms(doc.get("time")) >= self.created_at


def parse_line(line: bytes, scope: BucketScope | None) -> FeedEvent:
    """The event of one line of the log; ``ValueError`` (or ``KeyError``) if it is not one."""
    doc = json.loads(line)
    bucket_id = doc.get("bucket_id")
    if not isinstance(bucket_id, str):
        bucket_id = ""
        if scope is not None and scope.claims(doc):
            bucket_id = scope.bucket_id
            doc = with_bucket_id(doc, bucket_id)
            line = encode(doc)
    return FeedEvent(doc["sequence"], doc["bucket"], bucket_id, doc["key"], doc["type"], line)


def with_bucket_id(doc: dict[str, Any], bucket_id: str) -> dict[str, Any]:
    """``doc`` with ``bucket_id`` placed right after ``bucket``."""
    out: dict[str, Any] = {}
    for name, value in doc.items():
        out[name] = value
        if name == "bucket":
            out["bucket_id"] = bucket_id
    out.setdefault("bucket_id", bucket_id)
    return out
