"""URL paths of the contract's endpoints, percent-encoded.

A key may hold any UTF-8 but NUL and control characters, ``/`` included, and in the URL it is
the percent-encoded rest of the path after ``/objects/``. Slashes stay literal (readable logs,
as in S3), everything else outside RFC 3986's unreserved set is encoded, and ``.``/``..``
segments are encoded too because HTTP clients (httpx among them) would otherwise collapse
them and address a different key. Pure.
"""

from __future__ import annotations

import urllib.parse

from service.client._wire import API_PREFIX, LEGAL_HOLD_SUFFIX, RETENTION_SUFFIX

__all__ = [
    "api",
    "bucket_path",
    "encode_key",
    "encode_segment",
    "image_path",
    "legal_hold_path",
    "object_path",
    "retention_path",
]

_DOT_SEGMENTS = {".": "%2E", "..": "%2E%2E"}
_LOCK_SEGMENTS = frozenset({RETENTION_SUFFIX[1:], LEGAL_HOLD_SUFFIX[1:]})


def encode_segment(value: str) -> str:
    """One path segment (a bucket name, an id), ``/`` included in the encoding.

    >>> encode_segment("a/b c")
    'a%2Fb%20c'
    """
    if not value:
        raise ValueError("a name or id in a path must not be empty")
    return _DOT_SEGMENTS.get(value) or urllib.parse.quote(value, safe="")


def encode_key(key: str) -> str:
    """A key as a URL path tail: UTF-8 percent-encoded, ``/`` kept, dot segments encoded.

    >>> encode_key("photos/2024 summer/été.jpg")
    'photos/2024%20summer/%C3%A9t%C3%A9.jpg'
    >>> encode_key("a/../b/./c?d#e")
    'a/%2E%2E/b/%2E/c%3Fd%23e'
    >>> encode_key("notes/retention")
    'notes%2Fretention'
    """
    if not key:
        raise ValueError("an object key must not be empty")
    if len(key.encode("utf-8")) > 1024:
        raise ValueError("an object key is at most 1024 bytes of UTF-8")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in key):
        raise ValueError("an object key must not contain control characters")
    segments = key.split("/")
    encoded = "/".join(
        _DOT_SEGMENTS.get(segment) or urllib.parse.quote(segment, safe="") for segment in segments
    )
    if len(segments) > 1 and segments[-1] in _LOCK_SEGMENTS:
        # ``.../objects/{key}/retention`` is the retention of ``key``: this key's own last
        # ``/`` goes encoded, so the server reads the whole of it as the key.
        head, _, tail = encoded.rpartition("/")
        encoded = f"{head}%2F{tail}"
    return encoded


def api(path: str) -> str:
    """``path`` below the API prefix."""
    return f"{API_PREFIX}{path}"


def bucket_path(bucket: str) -> str:
    return api(f"/buckets/{encode_segment(bucket)}")


def object_path(bucket: str, key: str) -> str:
    return f"{bucket_path(bucket)}/objects/{encode_key(key)}"


def retention_path(bucket: str, key: str) -> str:
    return object_path(bucket, key) + RETENTION_SUFFIX


def legal_hold_path(bucket: str, key: str) -> str:
    return object_path(bucket, key) + LEGAL_HOLD_SUFFIX


def image_path(bucket: str, key: str) -> str:
    return f"{bucket_path(bucket)}/images/{encode_key(key)}"
