"""Timestamp formats of the contract: RFC 3339 UTC with milliseconds, and HTTP dates."""

from __future__ import annotations

import datetime
import email.utils
import time


def now_ms() -> int:
    """Milliseconds since the epoch, the unit events carry."""
    return time.time_ns() // 1_000_000


def rfc3339_ms(epoch_ms: int) -> str:
    """``2026-11-22T08:41:44.123Z`` for an epoch in milliseconds.

    >>> rfc3339_ms(1_795_336_904_123)
    '2026-11-22T08:41:44.123Z'
    """
    seconds, millis = divmod(epoch_ms, 1000)
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{millis:03d}Z"


def rfc3339_seconds(epoch_seconds: float) -> str:
    """RFC 3339 with milliseconds for an epoch in (fractional) seconds."""
    return rfc3339_ms(int(epoch_seconds * 1000))


def http_date(epoch_ms: int) -> str:
    """An IMF-fixdate for ``Last-Modified``.

    >>> http_date(1_795_336_904_123)
    'Sun, 22 Nov 2026 08:41:44 GMT'
    """
    return email.utils.formatdate(epoch_ms / 1000, usegmt=True)


def parse_http_date(value: str) -> float | None:
    """Seconds since the epoch of an HTTP date, or None when it does not parse."""
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed.timestamp()
