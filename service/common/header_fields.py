"""Fields that travel in HTTP headers: custom metadata and content types. One validator.

Every entry point that stores one of these (PUT's headers; the JSON of multipart init,
image optimize and video thumbnails; presign's signed content type) validates it here, so
nothing reaches storage that a later GET or HEAD could not send. The rules (the contract's
Names section):

- a metadata name is 1 to ``MAX_NAME_CHARS`` HTTP token characters, stored lowercased;
- a metadata value is text without control characters (C0, DEL, C1: CR, LF, NUL, TAB ...),
  at most ``MAX_METADATA_BYTES`` of names and values together per object;
- a content type is a media type (``type/subtype`` and ``; name=value`` parameters, value a
  token or a quoted string) of visible ASCII, at most ``MAX_CONTENT_TYPE_CHARS``.

Values outside visible ASCII travel in headers as RFC 2047 encoded words
(``=?UTF-8?B?...?=``): ``decode_header_value`` reads them on a PUT (raw UTF-8 bytes are
accepted too), ``encode_header_value`` writes them on GET/HEAD. The encoder is also the safe
way to send what older versions stored unchecked: any text, control characters included,
goes out as base64 encoded words and can never break a header; a stored name or content type
that is not a valid header is replaced on the wire (``header_safe_*``), never sent raw.

Pure functions; safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from collections.abc import Mapping
from typing import Any

from service.common.api_errors import ApiError

MAX_NAME_CHARS = 128
MAX_METADATA_BYTES = 8 * 1024
MAX_CONTENT_TYPE_CHARS = 1024
FALLBACK_CONTENT_TYPE = "application/octet-stream"
WORD_BYTES = 45
"""UTF-8 bytes per encoded word: 60 base64 characters, 72 with the frame (RFC 2047: 75)."""

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
_NAME = re.compile(_TOKEN)
_MEDIA_TYPE = re.compile(
    rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))*[ \t]*;?"
)
MEDIA_TYPE_PATTERN = _MEDIA_TYPE.pattern
"""What a content type must match in full (the OpenAPI document states it too)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_PLAIN = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?|")
"""Sent as is: visible ASCII, inner spaces only (HTTP strips a value's outer spaces)."""
_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=")
_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii"})


def _invalid(message: str) -> ApiError:
    return ApiError("InvalidArgument", message)


# -- validation ---------------------------------------------------------------------------


def metadata_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a custom metadata name, or None.

    >>> metadata_name_problem("color") is None, metadata_name_problem("a b") is None
    (True, False)
    """
    if len(name) > MAX_NAME_CHARS or _NAME.fullmatch(name) is None:
        return f"metadata name {name[:40]!r} must be 1 to {MAX_NAME_CHARS} HTTP token characters"
    return None


def text_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be stored as a header-bound text, or None.

    >>> text_problem("caf\\u00e9 \\u65e5\\u672c", "v") is None, text_problem("a\\r\\nb", "v")
    (True, 'v must not contain control characters (CR, LF, NUL, ...)')
    """
    if _CONTROL.search(value):
        return f"{what} must not contain control characters (CR, LF, NUL, ...)"
    if _SURROGATE.search(value):
        return f"{what} must be valid UTF-8 text"
    return None


def validate_custom_metadata(metadata: Any) -> dict[str, str]:
    """``metadata`` (a decoded JSON value or parsed headers) checked, names lowercased.

    Raises 400 InvalidArgument naming the first problem.
    """
    if not isinstance(metadata, Mapping):
        raise _invalid("custom_metadata must be an object of strings")
    checked: dict[str, str] = {}
    total = 0
    for name, value in metadata.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise _invalid("custom_metadata must be an object of strings")
        problem = metadata_name_problem(name) or text_problem(value, f"metadata value of {name!r}")
        if problem:
            raise _invalid(problem)
        lowered = name.lower()
        if lowered in checked:
            raise _invalid(f"metadata name {lowered!r} is given twice")
        checked[lowered] = value
        total += len(lowered) + len(value.encode("utf-8"))
    if total > MAX_METADATA_BYTES:
        raise _invalid(f"custom metadata exceeds {MAX_METADATA_BYTES} bytes")
    return checked


def content_type_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable content type, or None.

    >>> content_type_problem('text/plain; charset="utf-8"') is None
    True
    >>> content_type_problem("text/plain\\r\\nX-Evil: 1")
    'content type must be a media type such as text/plain; charset=utf-8'
    """
    if len(value) > MAX_CONTENT_TYPE_CHARS or _MEDIA_TYPE.fullmatch(value) is None:
        return "content type must be a media type such as text/plain; charset=utf-8"
    return None


def require_content_type(value: Any) -> str:
    """A content type from a JSON body, checked (400 InvalidArgument)."""
    if not isinstance(value, str):
        raise _invalid("content_type must be a string")
    problem = content_type_problem(value)
    if problem:
        raise _invalid(problem)
    return value


# -- the wire: RFC 2047 encoded words ----------------------------------------------------


def decode_header_value(raw: str, what: str) -> str:
    """The text of a request header value: raw bytes as UTF-8, encoded words decoded.

    ``raw`` is the header as the HTTP layer decoded it (ISO-8859-1, one char per byte).

    >>> decode_header_value("=?UTF-8?B?Y2Fmw6k=?=", "v"), decode_header_value("plain", "v")
    ('café', 'plain')
    >>> decode_header_value("=?utf-8?q?caf=C3=A9_au_lait?=", "v")
    'café au lait'
    """
    try:
        text = raw.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise _invalid(f"{what} must be UTF-8 (or RFC 2047 encoded words)") from None
    if "=?" in text:
        text = _decode_words(text, what)
    problem = text_problem(text, what)
    if problem:
        raise _invalid(problem)
    return text


def _decode_words(text: str, what: str) -> str:
    """Decode every encoded word of ``text``; whitespace between two words is dropped and
    the bytes of adjacent words are joined before decoding (a character may span words)."""
    parts: list[str] = []
    pending = b""
    position = 0
    for match in _ENCODED_WORD.finditer(text):
        between = text[position : match.start()]
        if pending and between.strip(" \t") == "":
            between = ""
        elif pending:
            parts.append(_utf8(pending, what))
            pending = b""
        parts.append(between)
        pending += _word_bytes(match, what)
        position = match.end()
    if pending:
        parts.append(_utf8(pending, what))
    parts.append(text[position:])
    return "".join(parts)


def _word_bytes(match: re.Match[str], what: str) -> bytes:
    charset, encoding, payload = match.group(1), match.group(2), match.group(3)
    if charset.lower().split("*")[0] not in _CHARSETS:
        raise _invalid(f"{what}: encoded words must use the UTF-8 charset")
    try:
        if encoding in "Bb":
            return base64.b64decode(payload, validate=True)
        return binascii.a2b_qp(payload.encode("ascii"), header=True)
    except (binascii.Error, ValueError, UnicodeError):
        raise _invalid(f"{what}: malformed RFC 2047 encoded word") from None


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid(f"{what}: encoded words must hold UTF-8") from None


def encode_header_value(value: str) -> str:
    """``value`` as a header value: visible ASCII as is, anything else (non-ASCII text, an
    outer space, text that looks like an encoded word, control characters stored by older
    versions) as base64 encoded words of at most ``WORD_BYTES`` bytes each.

    >>> encode_header_value("blue"), encode_header_value("caf\\u00e9")
    ('blue', '=?UTF-8?B?Y2Fmw6k=?=')
    """
    if _PLAIN.fullmatch(value) and "=?" not in value:
        return value
    data = value.encode("utf-8", "surrogatepass")
    words = []
    start = 0
    while start < len(data):
        end = min(start + WORD_BYTES, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end -= 1  # never split a UTF-8 sequence between words
        words.append("=?UTF-8?B?" + base64.b64encode(data[start:end]).decode("ascii") + "?=")
        start = end
    return " ".join(words)


def header_safe_name(name: str) -> str | None:
    """A stored metadata name as it may appear in a header, or None if it cannot."""
    return name if metadata_name_problem(name) is None else None


def header_safe_content_type(value: str) -> str:
    """A stored content type as it may be sent: itself when valid, else the fallback."""
    return value if content_type_problem(value) is None else FALLBACK_CONTENT_TYPE


# -- a PUT without Content-Type -------------------------------------------------------------

_TYPES = mimetypes.MimeTypes()
"""Python's built-in table only (not the machine's /etc/mime.types), so every server guesses
the same type for the same key."""
_COMPRESSED = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "compress": "application/x-compress",
    "br": "application/x-brotli",
}


def guess_content_type(key: str) -> str:
    """The content type of an object stored without one, from its key's extension.

    >>> guess_content_type("photos/cat.JPG"), guess_content_type("notes/README")
    ('image/jpeg', 'application/octet-stream')
    >>> guess_content_type("backup.tar.gz"), guess_content_type("data:text/html,x.bin")
    ('application/gzip', 'application/octet-stream')
    """
    name = key.rpartition("/")[2]
    kind, encoding = _TYPES.guess_type("/" + name, strict=False)
    if encoding is not None:
        return _COMPRESSED.get(encoding, FALLBACK_CONTENT_TYPE)
    return kind or FALLBACK_CONTENT_TYPE
