"""What a GET or HEAD of an object version answers: status, headers and the bytes to send.

Pure: it takes the version and the request's headers and returns a ``ReadPlan`` (or raises
the contract's 412/416 ``ApiError``), so the object read path (``service.http.object_reads``)
and its tests share one statement of the contract's read headers, conditions and ranges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.common.api_errors import ApiError
from service.common.header_fields import (
    encode_header_value,
    header_safe_content_type,
    header_safe_name,
)
from service.common.timefmt import http_date, rfc3339_ms
from service.common.wire import (
    HEADER_CHECKSUM_SHA256,
    HEADER_LEGAL_HOLD,
    HEADER_RETAIN_UNTIL,
    HEADER_RETENTION_MODE,
    HEADER_VERSION_ID,
    NULL_VERSION_ID,
)
from service.http.conditions import (
    ByteWindow,
    RangeResult,
    Verdict,
    evaluate_read_conditions,
    if_range_allows,
    parse_range,
)
from service.http.served_content import served_headers
from service.meta import ObjectVersion

NOTHING = ByteWindow(0, 0)


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """The answer to one read: send ``headers`` with ``status``, then ``window`` of the
    payload (empty for a HEAD, a 304 or an empty object)."""

    status: int
    headers: list[tuple[str, str]]
    window: ByteWindow


def object_headers(version: ObjectVersion) -> list[tuple[str, str]]:
    """The representation headers every read of ``version`` carries (304 included), with
    the sandbox of user content (``service.http.served_content``).

    Stored fields go out in a form a header can always hold (``service.common.header_fields``):
    metadata values outside visible ASCII as RFC 2047 encoded words, a stored content type
    or name that no header may carry (written by an older version) replaced or left out.
    """
    content_type = header_safe_content_type(version.content_type)
    headers = [
        ("Content-Type", content_type),
        ("ETag", f'"{version.sha256}"'),
        (HEADER_CHECKSUM_SHA256, version.sha256),
        ("Last-Modified", http_date(version.updated_at)),
        ("Accept-Ranges", "bytes"),
        (HEADER_VERSION_ID, version.version_id or NULL_VERSION_ID),
        *served_headers(content_type, version.key),
    ]
    for name, value in version.custom_metadata.items():
        if header_safe_name(name) is not None:
            headers.append((f"X-Meta-{name}", encode_header_value(value)))
    if version.retention_mode is not None or version.legal_hold:
        headers += lock_headers(version)
    return headers


def lock_headers(version: ObjectVersion) -> list[tuple[str, str]]:
    """``X-Retention-Mode`` and ``X-Retain-Until`` (RFC 3339) when a retention is set, and
    ``X-Legal-Hold: on | off``: sent for a version with a retention or a legal hold (the
    others, most of them, go without: none means no retention and no hold)."""
    headers = [(HEADER_LEGAL_HOLD, "on" if version.legal_hold else "off")]
    if version.retention_mode is not None and version.retain_until is not None:
        headers.append((HEADER_RETENTION_MODE, version.retention_mode))
        headers.append((HEADER_RETAIN_UNTIL, rfc3339_ms(version.retain_until)))
    return headers


def plan_read(
    version: ObjectVersion, request_headers: Mapping[str, str], *, head: bool
) -> ReadPlan:
    """The answer to a GET (``head`` False) or HEAD of ``version`` under ``request_headers``.

    Preconditions first (412, then 304), then a single ``Range`` (206, or 416 with
    ``Content-Range: bytes */size``), honoured only when ``If-Range`` allows it.
    """
    modified = version.updated_at // 1000
    headers = object_headers(version)
    verdict = evaluate_read_conditions(request_headers, version.sha256, modified)
    if verdict is Verdict.PRECONDITION_FAILED:
        raise ApiError("PreconditionFailed", "a precondition of the request failed")
    if verdict is Verdict.NOT_MODIFIED:
        headers = [(name, value) for name, value in headers if name != "Content-Type"]
        return ReadPlan(304, headers, NOTHING)
    status = 200
    window = ByteWindow(0, version.size)
    range_header = request_headers.get("Range")
    if range_header is not None and if_range_allows(
        request_headers.get("If-Range"), version.sha256, modified
    ):
        ranged = parse_range(range_header, version.size)
        if ranged is RangeResult.UNSATISFIABLE:
            raise ApiError(
                "InvalidRange",
                "the range is not satisfiable",
                headers={"Content-Range": f"bytes */{version.size}"},
            )
        if isinstance(ranged, ByteWindow):
            status = 206
            window = ranged
            headers.append(("Content-Range", ranged.content_range(version.size)))
    headers.append(("Content-Length", str(window.length)))
    return ReadPlan(status, headers, NOTHING if head else window)
