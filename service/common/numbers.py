"""The one parser for numbers a client sends: bounded ASCII decimal integers.

Every number in a query string, a header or a path goes through ``bounded_int`` (JSON
numbers are bounded by ``service.http.json_body``'s loader, which uses ``MAX_DIGITS`` too).
Why one parser: ``str.isdigit()`` accepts digits of other scripts and superscripts that
``int()`` then refuses (a 500) or silently converts, and ``int()`` of thousands of digits is
slow or refused outright. Here a number is 1 to ``MAX_DIGITS`` ASCII digits ``0-9`` and
nothing else (no sign, no spaces, no underscores), within the field's range; anything else
is the caller's 400.

Pure functions; safe from any thread.
"""

from __future__ import annotations

import re

from service.common.api_errors import ApiError

MAX_DIGITS = 18
"""At most this many digits: every such number fits a signed 64-bit integer (journal,
msgpack) with room to spare."""

_ASCII_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")


def bounded_int(text: str, low: int, high: int) -> int | None:
    """``text`` as an integer in ``low..high``, or None when it is anything else.

    >>> bounded_int("42", 1, 100)
    42
    >>> bounded_int("007", 0, 10)
    7
    >>> [bounded_int(t, 0, 10**18) for t in ("\\u0663", "\\u00b2", "+1", " 1", "1_0", "")]
    [None, None, None, None, None, None]
    >>> bounded_int("9" * 19, 0, 10**30) is None
    True
    """
    if _ASCII_DIGITS.fullmatch(text) is None:
        return None
    value = int(text)
    return value if low <= value <= high else None


def require_int(text: str, name: str, low: int, high: int, *, code: str = "InvalidArgument") -> int:
    """``text`` as an integer in ``low..high``, else ApiError ``code`` naming ``name``."""
    value = bounded_int(text, low, high)
    if value is None:
        raise ApiError(code, f"{name} must be an integer from {low} to {high}")
    return value
