"""Object headers in both directions: building a PUT's headers, parsing a GET/HEAD's.

Custom metadata travels as ``X-Meta-<name>: <value>`` headers, so names must be HTTP tokens
and values text without control characters; they are checked here, before anything is sent,
instead of failing deep inside httpx. Values outside visible ASCII travel as RFC 2047 encoded
words (``=?UTF-8?B?...?=``, the contract's Names section): encoded on a PUT, decoded from a
GET or HEAD. Pure; ``ObjectHeaders`` is immutable.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import email.utils
import re
from collections.abc import Mapping

from service.client._ranges import ContentRange
from service.client._wire import (
    HEADER_CHECKSUM_SHA256,
    HEADER_LEGAL_HOLD,
    HEADER_META_PREFIX,
    HEADER_RETAIN_UNTIL,
    HEADER_RETENTION_MODE,
    HEADER_VERSION_ID,
    NULL_VERSION_ID,
)

__all__ = ["ObjectHeaders", "put_headers", "quote_etag", "unquote_etag"]

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_PRINTABLE_ASCII = re.compile(r"^[\x20-\x7e\t]*$")
_PLAIN_VALUE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?|")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=")
_WORD_BYTES = 45
_SHA256_HEX = re.compile(r"^[0-9a-fA-F]{64}$")


@dataclasses.dataclass(frozen=True)
class ObjectHeaders:
    """What a GET or HEAD said about an object, from its headers.

    ``content_length`` is the length of *this* answer (the window for a 206); the object's
    full size is ``size``. ``etag`` and ``sha256`` are the hex SHA-256 of the whole object;
    ``custom_metadata`` has lowercase names, as HTTP header names are case-insensitive.
    """

    content_length: int | None
    content_type: str | None
    etag: str | None
    sha256: str | None
    last_modified: datetime.datetime | None
    accept_ranges: str | None
    content_range: ContentRange | None
    version_id: str | None
    custom_metadata: dict[str, str]
    retention_mode: str | None = None
    """The version's retention mode (object lock), None without one."""
    retain_until: datetime.datetime | None = None
    legal_hold: bool = False

    @property
    def size(self) -> int | None:
        """The whole object's size: from ``Content-Range`` on a 206, else the length."""
        if self.content_range is not None:
            return self.content_range.size
        return self.content_length

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> ObjectHeaders:
        """Parse case-insensitive ``headers`` (``httpx.Headers``); absent fields are None.

        >>> import httpx
        >>> parsed = ObjectHeaders.from_headers(httpx.Headers({
        ...     "Content-Length": "10", "ETag": '"ab"', "X-Version-Id": "null",
        ...     "X-Meta-Color": "blue", "Content-Range": "bytes 0-9/20"}))
        >>> parsed.etag, parsed.version_id, parsed.custom_metadata, parsed.size
        ('ab', None, {'color': 'blue'}, 20)
        """
        length = headers.get("Content-Length")
        version = headers.get(HEADER_VERSION_ID)
        content_range = headers.get("Content-Range")
        prefix = HEADER_META_PREFIX.lower()
        return cls(
            content_length=int(length) if length is not None and length.isdigit() else None,
            content_type=headers.get("Content-Type"),
            etag=unquote_etag(headers.get("ETag")),
            sha256=headers.get(HEADER_CHECKSUM_SHA256),
            last_modified=_http_date(headers.get("Last-Modified")),
            accept_ranges=headers.get("Accept-Ranges"),
            content_range=ContentRange.parse(content_range) if content_range else None,
            version_id=None if version in (None, NULL_VERSION_ID) else version,
            custom_metadata={
                name[len(prefix) :].lower(): decode_value(value)
                for name, value in headers.items()
                if name.lower().startswith(prefix) and len(name) > len(prefix)
            },
            retention_mode=headers.get(HEADER_RETENTION_MODE),
            retain_until=_rfc3339(headers.get(HEADER_RETAIN_UNTIL)),
            legal_hold=headers.get(HEADER_LEGAL_HOLD) == "on",
        )


def _rfc3339(value: str | None) -> datetime.datetime | None:
    if value is None:
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None


def _http_date(value: str | None) -> datetime.datetime | None:
    if value is None:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def quote_etag(etag: str) -> str:
    """The header form of an etag: ``"<hex>"`` (already quoted values are kept)."""
    return etag if etag.startswith('"') else f'"{etag}"'


def unquote_etag(value: str | None) -> str | None:
    """The hex of an ``ETag`` header, without quotes or a weak ``W/`` prefix."""
    if value is None:
        return None
    tag = value.strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    return tag[1:-1] if len(tag) >= 2 and tag[0] == tag[-1] == '"' else tag


def put_headers(
    *,
    content_type: str | None,
    metadata: Mapping[str, str] | None,
    checksum: str | None,
    if_match: str | None = None,
    if_none_match: str | None = None,
) -> dict[str, str]:
    """Headers of an object PUT (or a part PUT, with only ``checksum``).

    >>> put_headers(content_type="text/plain", metadata={"Color": "blue"}, checksum=None)
    {'Content-Type': 'text/plain', 'X-Meta-Color': 'blue'}
    """
    headers: dict[str, str] = {}
    if content_type is not None:
        _check_value("content_type", content_type)
        headers["Content-Type"] = content_type
    for name, value in (metadata or {}).items():
        if not _TOKEN.match(name):
            raise ValueError(f"metadata name {name!r} must be letters, digits and -_.")
        if not isinstance(value, str) or _CONTROL.search(value):
            raise ValueError(f"metadata value of {name!r} must be text without control characters")
        headers[HEADER_META_PREFIX + name] = encode_value(value)
    if checksum is not None:
        if not _SHA256_HEX.match(checksum):
            raise ValueError("checksum must be the 64-character hex SHA-256 of the data")
        headers[HEADER_CHECKSUM_SHA256] = checksum.lower()
    if if_match is not None:
        headers["If-Match"] = quote_etag(if_match)
    if if_none_match is not None:
        headers["If-None-Match"] = (
            if_none_match if if_none_match == "*" else quote_etag(if_none_match)
        )
    return headers


def _check_value(what: str, value: str) -> None:
    if not isinstance(value, str) or not _PRINTABLE_ASCII.match(value):
        raise ValueError(f"{what} must be printable ASCII (it travels as an HTTP header)")


def encode_value(value: str) -> str:
    """A metadata value as a header: visible ASCII as is, else base64 encoded words.

    >>> encode_value("blue"), encode_value("caf\u00e9")
    ('blue', '=?UTF-8?B?Y2Fmw6k=?=')
    """
    if _PLAIN_VALUE.fullmatch(value) and "=?" not in value:
        return value
    data = value.encode("utf-8")
    words, start = [], 0
    while start < len(data):
        end = min(start + _WORD_BYTES, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end -= 1  # a UTF-8 sequence stays in one word
        words.append("=?UTF-8?B?" + base64.b64encode(data[start:end]).decode("ascii") + "?=")
        start = end
    return " ".join(words)


def decode_value(value: str) -> str:
    """A metadata header's text: its UTF-8 encoded words decoded (others left as sent).

    >>> decode_value("=?UTF-8?B?Y2Fm?= =?UTF-8?B?w6k=?="), decode_value("plain")
    ('café', 'plain')
    """
    if "=?" not in value:
        return value
    out: list[str] = []
    pending, position = b"", 0
    for match in _ENCODED_WORD.finditer(value):
        between = value[position : match.start()]
        word = _word(match)
        if word is None:
            continue
        if pending and between.strip(" \t") == "":
            between = ""
        elif pending:
            out.append(pending.decode("utf-8", "replace"))
            pending = b""
        out.append(between)
        pending += word
        position = match.end()
    out.append(pending.decode("utf-8", "replace"))
    out.append(value[position:])
    return "".join(out)


def _word(match: re.Match[str]) -> bytes | None:
    charset, kind, payload = match.groups()
    if charset.lower() not in ("utf-8", "utf8", "us-ascii"):
        return None
    try:
        if kind in "Bb":
            return base64.b64decode(payload, validate=True)
        return binascii.a2b_qp(payload.encode("ascii"), header=True)
    except (binascii.Error, ValueError, UnicodeError):
        return None
