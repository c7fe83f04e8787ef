"""The replication stream's wire format, shared by the primary's feed and the standby.

Every route is an administrator's (the standby authenticates with the access key of
``SERVICE_FOLLOW_CREDENTIALS``) and a GET, so a standby's requests never change the primary's
state; docs/api.md, "Replication stream", is the reference:

- ``GET /api/v1/replication/snapshot``: the primary's newest journal snapshot, verbatim
  (``X-Snapshot-Sequence``; 0 and an empty body for a primary with no record yet).
- ``GET /api/v1/replication/secret``: the signing secret (presigned URLs, share links).
- ``GET /api/v1/replication/payloads/{id}``: a payload's bytes (404 ``NotFound`` when the
  primary no longer holds it: released by a later record, or lost).
- ``GET /api/v1/replication/records?from=N&wait=S``: the journal's frames from N on, verbatim
  (crc and all), as soon as at least one is durable or after S seconds (then none);
  ``X-First-Sequence``/``X-Last-Sequence`` name them and ``X-Primary-Sequence`` the
  primary's newest, ``X-Server-Id`` its server id. Asking from N confirms every record
  before N (the standby holds them).
  410 ``RecordsGone`` when record N left the primary's log: bootstrap again.

The standby names itself in ``X-Standby-Id`` and its byte lag in ``X-Standby-Lag-Bytes``.

Pure names and parsing: no I/O.
"""

from __future__ import annotations

import hashlib

PREFIX = "/api/v1/replication"
SNAPSHOT_PATH = PREFIX + "/snapshot"
SECRET_PATH = PREFIX + "/secret"
PAYLOADS_PATH = PREFIX + "/payloads"
RECORDS_PATH = PREFIX + "/records"

HEADER_STANDBY_ID = "X-Standby-Id"
HEADER_STANDBY_LAG_BYTES = "X-Standby-Lag-Bytes"
HEADER_SNAPSHOT_SEQUENCE = "X-Snapshot-Sequence"
HEADER_FIRST = "X-First-Sequence"
HEADER_LAST = "X-Last-Sequence"
HEADER_PRIMARY_SEQUENCE = "X-Primary-Sequence"
HEADER_PRIMARY_URL = "X-Primary-Url"
HEADER_SERVER_ID = "X-Server-Id"
"""On every records answer: the primary's identity (``server_identity``), so a standby never
appends another server's records to its journal."""

MAX_WAIT_SECONDS = 30.0
"""The longest a records request waits for a new record (a long poll)."""
BATCH_BYTES = 4 << 20
"""At most about this many bytes of frames per records answer (at least one record)."""
MAX_RECORD_BYTES = 16 << 20
"""A record is never larger (the journal's own bound)."""


def standby_id_ok(value: str) -> bool:
    """A standby's id: 1..64 characters of ``[A-Za-z0-9_-]``.

    >>> standby_id_ok("sb_0123abcd"), standby_id_ok(""), standby_id_ok("a b")
    (True, False, False)
    """
    return 0 < len(value) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in value)


def server_identity(secret: bytes) -> str:
    """A server's identity on the wire: a digest of its signing secret, which a data dir makes
    at its first start and a standby copies at its bootstrap (so they share it), and which
    reveals nothing of the secret.

    >>> server_identity(b"x" * 32) == server_identity(b"x" * 32) != server_identity(b"y" * 32)
    True
    """
    return hashlib.sha256(b"service replication identity\0" + secret).hexdigest()[:32]


def parse_credentials(text: str) -> tuple[str, str]:
    """``SERVICE_FOLLOW_CREDENTIALS``: (access key id, secret); ValueError if malformed.

    >>> parse_credentials("bk_abc:sk_secret")
    ('bk_abc', 'sk_secret')
    """
    key, sep, secret = text.partition(":")
    if not sep or not key.startswith("bk_") or not secret.startswith("sk_"):
        raise ValueError("expected bk_ID:sk_SECRET")
    return key, secret
