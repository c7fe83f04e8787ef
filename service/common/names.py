"""Validation of bucket names and object keys, exactly as the contract's Names section.

Pure functions; they return an error message or None so callers pick the error code.
"""

from __future__ import annotations

import re

_BUCKET_CHARS = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_IPV4_SHAPE = re.compile(r"^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$")
MAX_KEY_BYTES = 1024


def bucket_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid bucket name, or None.

    >>> bucket_name_problem("photos-2026") is None
    True
    >>> bucket_name_problem("192.168.1.1")
    'bucket name must not look like an IPv4 address'
    """
    if not 3 <= len(name) <= 63:
        return "bucket name must be 3 to 63 characters"
    if not _BUCKET_CHARS.match(name):
        return "bucket name may hold only a-z 0-9 . - and must start and end with a letter or digit"
    if ".." in name:
        return "bucket name must not contain two adjacent periods"
    if _IPV4_SHAPE.match(name):
        return "bucket name must not look like an IPv4 address"
    return None


def key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid object key, or None.

    >>> key_problem("photos/2026/cat.jpg") is None
    True
    >>> key_problem("")
    'key must be 1 to 1024 bytes of UTF-8'
    """
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        return "key must be valid UTF-8"
    if not 1 <= len(encoded) <= MAX_KEY_BYTES:
        return "key must be 1 to 1024 bytes of UTF-8"
    if any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in key):
        return "key must not contain NUL or control characters"
    return None
