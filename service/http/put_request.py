"""What an object PUT's head says and what its answer carries.

Shared by the two ways a PUT is answered, so that they cannot drift apart: ``ObjectHandler``
(``service.http.object_handlers``: every PUT) and ``SmallPut`` (``service.http.object_writes``:
the common small one, below Tornado's ``RequestHandler``).

Thread-safety: pure functions, except ``record_put_stages`` (event-loop thread).
"""

from __future__ import annotations

import json
import re
from typing import Any

from service.common.api_errors import ApiError
from service.common.header_fields import (
    content_type_problem,
    decode_header_value,
    guess_content_type,
    validate_custom_metadata,
)
from service.common.numbers import MAX_DIGITS, require_int
from service.common.wire import (
    HEADER_CHECKSUM_SHA256,
    HEADER_META_PREFIX,
    HEADER_VERSION_ID,
    NULL_VERSION_ID,
)
from service.context import AppContext
from service.http.render import object_json
from service.meta import ObjectVersion
from service.ops.objects import SMALL_PUT_BYTES, PutIntent, PutTimings

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_META_PREFIX = HEADER_META_PREFIX.lower()
MAX_CONTENT_LENGTH = 10**MAX_DIGITS - 1


def parse_custom_metadata(headers: Any) -> dict[str, str]:
    """``X-Meta-<name>: <value>`` headers as checked metadata with lowercase names; values
    may be RFC 2047 encoded words or raw UTF-8 (``service.common.header_fields``)."""
    metadata: dict[str, str] = {}
    for name, value in headers.get_all():
        lowered = name.lower()
        if lowered.startswith(_META_PREFIX) and len(lowered) > len(_META_PREFIX):
            field = lowered[len(_META_PREFIX) :]
            metadata[field] = decode_header_value(value, f"metadata value of {field!r}")
    return validate_custom_metadata(metadata)


def put_content_type(headers: Any, key: str) -> str:
    """The PUT's ``Content-Type`` (checked), or the type guessed from the key's extension."""
    declared = headers.get("Content-Type")
    if not declared:
        return guess_content_type(key)
    problem = content_type_problem(declared)
    if problem:
        raise ApiError("InvalidArgument", problem)
    return str(declared)


def parse_if_match(value: str | None) -> str | None:
    """The hex etag of an ``If-Match: "<etag>"`` header (None when absent)."""
    if value is None:
        return None
    tag = value.strip()
    if tag.startswith('"') and tag.endswith('"') and len(tag) >= 2:
        return tag[1:-1]
    raise ApiError("InvalidArgument", 'If-Match must be a quoted ETag: "<hex>"')


def parse_expected_sha256(value: str | None) -> str | None:
    if value is None:
        return None
    digest = value.strip().lower()
    if not _SHA256_HEX.match(digest):
        raise ApiError("InvalidArgument", "X-Checksum-Sha256 must be 64 hex characters")
    return digest


def read_put_intent(headers: Any, bucket: str, key: str, max_object_bytes: int) -> PutIntent:
    """The PUT the head asks for, its headers checked in the contract's order (the length,
    ``If-None-Match``, the type, the metadata, ``If-Match``, the checksum)."""
    length_header = headers.get("Content-Length")
    content_length = None
    if length_header is not None:
        content_length = require_int(length_header, "Content-Length", 0, MAX_CONTENT_LENGTH)
        if content_length > max_object_bytes:
            raise ApiError("EntityTooLarge", "the object is larger than the server accepts")
    if_none_match = headers.get("If-None-Match")
    if if_none_match is not None and if_none_match.strip() != "*":
        raise ApiError("InvalidArgument", "a PUT supports only If-None-Match: *")
    return PutIntent(
        bucket=bucket,
        key=key,
        content_type=put_content_type(headers, key),
        custom_metadata=parse_custom_metadata(headers),
        if_none_match=if_none_match is not None,
        if_match=parse_if_match(headers.get("If-Match")),
        expected_sha256=parse_expected_sha256(headers.get(HEADER_CHECKSUM_SHA256)),
        content_length=content_length,
    )


def kept_in_memory(intent: PutIntent, headers: Any) -> bool:
    """Whether the body is small and of a declared length: then it is kept in memory and
    stored by one executor job (``objects.store_small_object``)."""
    length = intent.content_length
    return length is not None and length <= SMALL_PUT_BYTES and "Transfer-Encoding" not in headers


def put_answer(version: ObjectVersion) -> tuple[list[tuple[str, str]], bytes]:
    """The 200's own headers (``ETag``, the checksum, the version id) and its JSON body."""
    headers = [
        ("Etag", f'"{version.sha256}"'),
        (HEADER_CHECKSUM_SHA256, version.sha256),
        (HEADER_VERSION_ID, version.version_id or NULL_VERSION_ID),
    ]
    body = json.dumps(object_json(version), separators=(",", ":"), ensure_ascii=False)
    return headers, body.encode("utf-8")


def record_put_stages(
    ctx: AppContext, size: int, stage_write: float, flush: float, timings: PutTimings, total: float
) -> None:
    """A stored PUT's stages into the performance window and the metrics."""
    ctx.performance.record_put(
        size, stage_write, flush, timings.promote, timings.journal_commit, total
    )
    ctx.metrics.observe_put_stages(
        stage_write, flush, timings.promote, timings.journal_commit, total
    )
