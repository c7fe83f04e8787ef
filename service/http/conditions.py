"""Pure HTTP logic for reads: byte ranges and conditional requests (RFC 9110).

No I/O and no Tornado: functions take header values and object facts and return what to
answer, so they are unit-tested exhaustively.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from service.common.api_errors import ApiError
from service.common.numbers import MAX_DIGITS, bounded_int
from service.common.timefmt import parse_http_date

_MAX_POSITION = 10**MAX_DIGITS - 1


@dataclass(frozen=True, slots=True)
class ByteWindow:
    """A satisfiable range: ``start`` inclusive, ``end`` exclusive."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.end - 1}/{size}"


class RangeResult(Enum):
    WHOLE = "whole"
    """No usable single range: answer 200 with the whole body."""
    UNSATISFIABLE = "unsatisfiable"
    """Answer 416 with ``Content-Range: bytes */size``."""


def parse_range(header: str | None, size: int) -> ByteWindow | RangeResult:
    """Resolve a ``Range`` header against an object of ``size`` bytes.

    >>> parse_range("bytes=0-9", 100)
    ByteWindow(start=0, end=10)
    >>> parse_range("bytes=90-200", 100)
    ByteWindow(start=90, end=100)
    >>> parse_range("bytes=-10", 100)
    ByteWindow(start=90, end=100)
    >>> parse_range("bytes=100-", 100)
    <RangeResult.UNSATISFIABLE: 'unsatisfiable'>
    >>> parse_range("bytes=0-1,5-6", 100)
    <RangeResult.WHOLE: 'whole'>
    >>> parse_range("bytes=0-0", 0)
    <RangeResult.UNSATISFIABLE: 'unsatisfiable'>

    A position that is not 1 to ``MAX_DIGITS`` ASCII digits is 400 InvalidArgument (the
    contract's rule for every number a client sends), not an ignored range.
    """
    if header is None:
        return RangeResult.WHOLE
    unit, sep, spec = header.strip().partition("=")
    if not sep or unit.strip().lower() != "bytes" or "," in spec:
        return RangeResult.WHOLE
    first_text, dash, last_text = spec.strip().partition("-")
    if not dash:
        return RangeResult.WHOLE
    first, last = _position(first_text), _position(last_text)
    if first is None:
        if last is None:
            return RangeResult.WHOLE
        if last == 0 or size == 0:
            return RangeResult.UNSATISFIABLE
        return ByteWindow(max(0, size - last), size)
    if last is not None and last < first:
        return RangeResult.WHOLE
    if first >= size:
        return RangeResult.UNSATISFIABLE
    end = size if last is None else min(last + 1, size)
    return ByteWindow(first, end)


def _position(text: str) -> int | None:
    """A byte position of a range (None when empty): ASCII digits, else 400."""
    text = text.strip()
    if text == "":
        return None
    value = bounded_int(text, 0, _MAX_POSITION)
    if value is None:
        raise ApiError("InvalidArgument", f"range positions are 1 to {MAX_DIGITS} ASCII digits")
    return value


def _etag_list(header: str) -> list[str]:
    return [item.strip() for item in header.split(",") if item.strip()]


def _opaque(tag: str) -> str:
    return tag[2:] if tag.startswith("W/") else tag


def etag_matches(header: str, etag: str, *, weak: bool) -> bool:
    """Does an If-Match / If-None-Match list name ``etag`` (hex, unquoted)?

    Strong comparison (If-Match) refuses weak tags; weak comparison ignores ``W/``.
    """
    quoted = f'"{etag}"'
    for tag in _etag_list(header):
        if tag == "*":
            return True
        if not weak and tag.startswith("W/"):
            continue
        if _opaque(tag) == quoted:
            return True
    return False


class Verdict(Enum):
    PROCEED = "proceed"
    NOT_MODIFIED = "not_modified"
    PRECONDITION_FAILED = "precondition_failed"


def evaluate_read_conditions(
    headers: Mapping[str, str], etag: str, last_modified_seconds: int
) -> Verdict:
    """The RFC 9110 section 13.2.2 order for GET/HEAD preconditions.

    ``last_modified_seconds`` is whole seconds, the resolution of HTTP dates.
    """
    if_match = headers.get("If-Match")
    if if_match is not None:
        if not etag_matches(if_match, etag, weak=False):
            return Verdict.PRECONDITION_FAILED
    else:
        since = headers.get("If-Unmodified-Since")
        stamp = parse_http_date(since) if since else None
        if stamp is not None and last_modified_seconds > stamp:
            return Verdict.PRECONDITION_FAILED
    if_none_match = headers.get("If-None-Match")
    if if_none_match is not None:
        if etag_matches(if_none_match, etag, weak=True):
            return Verdict.NOT_MODIFIED
    else:
        since = headers.get("If-Modified-Since")
        stamp = parse_http_date(since) if since else None
        if stamp is not None and last_modified_seconds <= stamp:
            return Verdict.NOT_MODIFIED
    return Verdict.PROCEED


def if_range_allows(header: str | None, etag: str, last_modified_seconds: int) -> bool:
    """Whether a Range may be honoured under ``If-Range`` (absent: yes).

    An entity tag must match strongly; a date must equal Last-Modified exactly.
    """
    if header is None:
        return True
    value = header.strip()
    if value.startswith('"') or value.startswith("W/"):
        return not value.startswith("W/") and value == f'"{etag}"'
    stamp = parse_http_date(value)
    return stamp is not None and int(stamp) == last_modified_seconds
