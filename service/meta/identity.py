"""Bucket identities: what makes a bucket the same bucket, whatever its name.

A name can be deleted and created again, by another user; the identity cannot. Every reader
of the journal (the state, the event feed, webhooks, lifecycle, a standby, the audit log)
tells buckets apart by it, so one bucket's events, cursors and rules never reach another
bucket that took its name.

- A bucket created by this version carries a random ``bucket_id`` in its ``BucketCreated``
  record (drawn by the operation that journals it, never by ``apply``), kept in snapshots.
- A bucket journaled before identities existed has none in its record, nor in the
  snapshot that holds it. It gets ``legacy_bucket_id(name, created_at)``: a digest of the
  name and the creation time (ms) that its record and every snapshot since carry, so every
  replay, every snapshot reader and every serving process derives the same one. Two legacy
  buckets could share it only if a name was deleted and created again within the same
  millisecond.

Both kinds look alike: ``bkt_`` and 24 lowercase hex digits (96 bits).

``identity_refusal`` is the check of every record that names a bucket and the identity it
was accepted for (lifecycle rules, webhooks, lifecycle deletes).

Pure functions; safe from any thread.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from service.meta import fields
from service.meta.outcome import Outcome, rejected

BUCKET_ID_PREFIX = "bkt_"
BUCKET_ID_HEX_DIGITS = 24
_SHAPE = re.compile(rf"{BUCKET_ID_PREFIX}[0-9a-f]{{{BUCKET_ID_HEX_DIGITS}}}")
_LEGACY_DOMAIN = "service.bucket-identity.legacy.v1"


def legacy_bucket_id(name: str, created_at: int) -> str:
    """The identity of a bucket journaled without one (see the module docstring).

    >>> legacy_bucket_id("photos", 1700000000123)
    'bkt_4acb7bb5a8dcb9f702b8be6a'
    """
    material = f"{_LEGACY_DOMAIN}\0{name}\0{created_at}".encode()
    return BUCKET_ID_PREFIX + hashlib.sha256(material).hexdigest()[:BUCKET_ID_HEX_DIGITS]


def is_bucket_id(text: str) -> bool:
    """Whether ``text`` is shaped like a bucket identity.

    >>> is_bucket_id(legacy_bucket_id("b", 1)), is_bucket_id("photos")
    (True, False)
    """
    return _SHAPE.fullmatch(text) is not None


def identity_refusal(
    bucket_id_of: Callable[[str], str | None], bucket: str, event: Mapping[str, Any]
) -> Outcome | None:
    """Why a record about ``bucket`` must be refused (None: it may apply): the bucket is
    gone, or the record names the identity of a bucket that had the name before (deleted
    and created again since the request was accepted). A record from before identities
    names none and applies to whichever bucket has the name."""
    current = bucket_id_of(bucket)
    if current is None:
        return rejected("NoSuchBucket", f"bucket {bucket!r} does not exist")
    wanted = fields.added_text(event, "bucket_id")
    if wanted is not None and wanted != current:
        return rejected("NoSuchBucket", f"bucket {bucket!r} was deleted (its name is another's)")
    return None
