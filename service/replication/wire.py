"""The replication stream's wire format, shared by the primary's feed and the standby.

Every route is an administrator's (the standby authenticates with the access key of
``SERVICE_FOLLOW_CREDENTIALS``) and a GET, so a standby's requests never change the primary's
state; docs/api.md, "Replication stream", is the reference:

- ``GET /api/v1/replication/snapshot``: the primary's newest journal snapshot, verbatim
  (``X-Snapshot-Sequence``; 0 and an empty body for a primary with no record yet).
- ``GET /api/v1/replication/secret``: the signing secret (presigned URLs, share links).
- ``GET /api/v1/replication/payloads/{id}``: a payload's bytes (404 ``NotFound`` when the
  primary no longer holds it: released by a later record, or lost).
- ``GET /api/v1/replication/payloads?id=A&id=B...``: many payloads in one streamed answer
  (``pack_entry_header``: each payload's id and size, -1 when not held, then its bytes).
- ``GET /api/v1/replication/records?from=N&wait=S[&inline=1]``: the journal's frames from N
  on, verbatim (crc and all), as soon as at least one is durable or after S seconds (then
  none); ``X-First-Sequence``/``X-Last-Sequence`` name them and ``X-Primary-Sequence`` the
  primary's newest, ``X-Server-Id`` its server id. Asking from N confirms every record
  before N (the standby holds them). With ``inline=1`` the answer also carries the bytes of
  the small payloads (``INLINE_MAX_BYTES``) its records reference: ``X-Frames-Bytes`` says
  where the frames end, and entries as the bulk payloads route's follow them.
  410 ``RecordsGone`` when record N left the primary's log: bootstrap again. A standby that
  receives a batch ahead of the one it applies says what it holds with ``confirmed=M``
  (M < N) instead.
- ``GET /api/v1/replication/confirm?sequence=M``: 204; the standby holds every record up to
  M durably (sent the moment a batch is durable: a sync primary acknowledges on it).

The standby names itself in ``X-Standby-Id``, its byte lag in ``X-Standby-Lag-Bytes``, and
where it serves in ``X-Standby-Url``: the primary's scrub fetches a payload it must repair
from the standby's own ``/api/v1/replication/payloads/{id}`` there, with the credentials the
standby presented (``service.replication.repair``).

Pure names and parsing: no I/O.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterator

PREFIX = "/api/v1/replication"
SNAPSHOT_PATH = PREFIX + "/snapshot"
SECRET_PATH = PREFIX + "/secret"
PAYLOADS_PATH = PREFIX + "/payloads"
RECORDS_PATH = PREFIX + "/records"
CONFIRM_PATH = PREFIX + "/confirm"

HEADER_STANDBY_ID = "X-Standby-Id"
HEADER_STANDBY_LAG_BYTES = "X-Standby-Lag-Bytes"
HEADER_STANDBY_URL = "X-Standby-Url"
HEADER_SNAPSHOT_SEQUENCE = "X-Snapshot-Sequence"
HEADER_FIRST = "X-First-Sequence"
HEADER_LAST = "X-Last-Sequence"
HEADER_PRIMARY_SEQUENCE = "X-Primary-Sequence"
HEADER_PRIMARY_URL = "X-Primary-Url"
HEADER_FRAMES_BYTES = "X-Frames-Bytes"
"""On a records answer with inline payloads: the length of its frames (the payloads follow)."""
HEADER_SERVER_ID = "X-Server-Id"
"""On every records answer: the primary's identity (``server_identity``), so a standby never
appends another server's records to its journal."""

MAX_WAIT_SECONDS = 30.0
"""The longest a records request waits for a new record (a long poll)."""
BATCH_BYTES = 4 << 20
"""At most about this many bytes of frames per records answer (at least one record)."""
MAX_RECORD_BYTES = 16 << 20
"""A record is never larger (the journal's own bound)."""
INLINE_MAX_BYTES = 64 << 10
"""A payload this small travels inside the records answer that references it (a larger one
is fetched by id, streamed): a 4 KiB PUT's payload costs the standby no request of its own."""
INLINE_BATCH_BYTES = 8 << 20
"""At most about this many bytes of inline payloads per records answer (the rest by id)."""
BULK_MAX_IDS = 256
"""At most this many ids per bulk payloads request."""

_ENTRY = struct.Struct(">Hq")
"""An entry's header: the id's length, then the payload's size (-1: not held), then the id."""
NOT_HELD = -1


def pack_entry_header(payload_id: str, size: int) -> bytes:
    """The header of one payload entry (its bytes follow; none when ``size`` is ``NOT_HELD``).

    >>> pack_entry_header("ab", 3)
    b'\\x00\\x02\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x03ab'
    """
    name = payload_id.encode("ascii")
    return _ENTRY.pack(len(name), size) + name


def pack_inline(entries: list[tuple[str, bytes]]) -> bytes:
    """Inline payloads as the records answer carries them after its frames."""
    return b"".join(pack_entry_header(name, len(data)) + data for name, data in entries)


def unpack_inline(data: bytes) -> dict[str, bytes]:
    """``pack_inline``'s entries by id; ``ValueError`` for bytes that are not that.

    >>> unpack_inline(pack_inline([("a", b"xy"), ("b", b"")]))
    {'a': b'xy', 'b': b''}
    """
    out: dict[str, bytes] = {}
    read = _Cursor(data).read
    for name, size in iter_entries(read):
        out[name] = read(size) if size > 0 else b""
    return out


def iter_entries(read_exactly: Callable[[int], bytes]) -> Iterator[tuple[str, int]]:
    """The entries of a stream (``read_exactly(n)``: n bytes, fewer only at its end): each
    id and size; the caller takes exactly ``size`` bytes of the stream (when held) before
    the next entry. ``ValueError`` for a truncated or malformed stream."""
    while header := read_exactly(_ENTRY.size):
        if len(header) != _ENTRY.size:
            raise ValueError("a payload entry is cut short")
        length, size = _ENTRY.unpack(header)
        name = read_exactly(length)
        if len(name) != length or size < NOT_HELD:
            raise ValueError("a payload entry is malformed")
        yield name.decode("ascii"), size


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self._view = memoryview(data)
        self._at = 0

    def read(self, count: int) -> bytes:
        chunk = bytes(self._view[self._at : self._at + count])
        self._at += len(chunk)
        if count and len(chunk) < count and chunk:
            raise ValueError("a payload entry is cut short")
        return chunk


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
