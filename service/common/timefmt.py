"""Timestamp formats of the contract: RFC 3339 UTC with milliseconds, and HTTP dates."""

from __future__ import annotations

import datetime
import email.utils
import functools
import time

_last_second: tuple[int, str] = (-1, "")
"""The most recent (epoch second, formatted prefix) of ``rfc3339_ms``: log lines and JSON
bodies format the same second over and over. Swapped whole, so any thread may read it."""


_offset_ms = 0
"""Test-only: added to ``now_ms`` (``SERVICE_CLOCK_OFFSET``, ``set_clock_offset``)."""


def now_ms() -> int:
    """Milliseconds since the epoch, the unit events carry."""
    return time.time_ns() // 1_000_000 + _offset_ms


def set_clock_offset(seconds: float) -> None:
    """Test-only: shift the clock events are stamped with (and the object lock counts by)
    by ``seconds``, so a test can start a server whose clock is ahead or behind."""
    global _offset_ms
    _offset_ms = round(seconds * 1000)


def rfc3339_ms(epoch_ms: int) -> str:
    """``2026-11-22T08:41:44.123Z`` for an epoch in milliseconds.

    >>> rfc3339_ms(1_795_336_904_123)
    '2026-11-22T08:41:44.123Z'
    """
    global _last_second
    seconds, millis = divmod(epoch_ms, 1000)
    cached_second, prefix = _last_second
    if cached_second != seconds:
        moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
        prefix = moment.strftime("%Y-%m-%dT%H:%M:%S")
        _last_second = (seconds, prefix)
    return f"{prefix}.{millis:03d}Z"


def rfc3339_seconds(epoch_seconds: float) -> str:
    """RFC 3339 with milliseconds for an epoch in (fractional) seconds."""
    return rfc3339_ms(int(epoch_seconds * 1000))


@functools.lru_cache(maxsize=4096)
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
