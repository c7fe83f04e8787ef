"""The one JSON loader for everything a client sends as JSON (bodies, listing cursors).

Limits, from the contract's Conventions: at most ``MAX_JSON_BYTES`` (413 EntityTooLarge; a
body that arrives bigger is refused by the connection, ``service.http.protocol``), nested at
most ``MAX_JSON_DEPTH`` deep (400 MalformedJSON), and numbers of bounded length: an integer
of at most ``MAX_DIGITS`` digits, a fraction or exponent of at most ``MAX_FLOAT_CHARS``
characters that is finite (else 400 InvalidArgument); an integral one (``1548.0``) is read as
that integer, as JSON Schema's ``integer`` admits it. ``NaN`` and ``Infinity`` are not
JSON (400 MalformedJSON). The text must be UTF-8.

Why a depth check before parsing: the standard library's parser recurses once per level, so
a body nested a thousand deep raised RecursionError (a 500) before any of our code ran. The
check counts brackets outside strings, in C-speed passes for ordinary bodies; only a body
with more than ``MAX_JSON_DEPTH`` brackets is walked bracket by bracket, and the walk stops
at the first level too deep.

Pure functions; safe from any thread.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from service.common.api_errors import ApiError
from service.common.numbers import MAX_DIGITS

MAX_JSON_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 32
MAX_FLOAT_CHARS = 64
_INTEGER_LIMIT = 10.0**MAX_DIGITS

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPENERS = frozenset(b"[{")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def nesting_depth_exceeds(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the arrays and objects of ``data`` nest deeper than ``limit``.

    Exact for valid JSON; for invalid JSON it never says less than the parser would reach.

    >>> nesting_depth_exceeds(b'[[1], {"a": [2]}]', 2), nesting_depth_exceeds(b'[[[]]]', 2)
    (False, True)
    >>> nesting_depth_exceeds(b'["[[[[", "]]"]', 1)
    False
    """
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return False
    depth = 0
    for byte in brackets:
        depth += 1 if byte in _OPENERS else -1
        if depth > limit:
            return True
    return False


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ApiError("InvalidArgument", f"JSON integers have at most {MAX_DIGITS} digits")
    return int(text)


def _fraction(text: str) -> float | int:
    """A number written with a fraction or exponent; an integral one (``1548.0``, ``2e3``)
    is that integer, as JSON Schema's ``integer`` has it."""
    value = float(text) if len(text) <= MAX_FLOAT_CHARS else math.inf
    if not math.isfinite(value):
        raise ApiError(
            "InvalidArgument",
            f"JSON numbers must be finite and at most {MAX_FLOAT_CHARS} characters",
        )
    if value.is_integer():
        if abs(value) >= _INTEGER_LIMIT:
            raise ApiError("InvalidArgument", f"JSON integers have at most {MAX_DIGITS} digits")
        return int(value)
    return value


def _constant(text: str) -> Any:
    raise ApiError("MalformedJSON", f"{text} is not JSON")


def load_json(data: bytes, what: str = "request body") -> Any:
    """``data`` parsed under the limits above, or the contract's 400/413 naming ``what``."""
    if len(data) > MAX_JSON_BYTES:
        raise ApiError("EntityTooLarge", f"the {what} is larger than {MAX_JSON_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError("MalformedJSON", f"the {what} is not UTF-8") from None
    if nesting_depth_exceeds(data):
        raise ApiError("MalformedJSON", f"the {what} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_int=_integer, parse_float=_fraction, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise ApiError("MalformedJSON", f"the {what} is not valid JSON: {exc}") from None


def load_json_object(data: bytes) -> dict[str, Any]:
    """A request body that must be a JSON object; an empty body is ``{}``."""
    if not data.strip():
        return {}
    parsed = load_json(data)
    if not isinstance(parsed, dict):
        raise ApiError("MalformedJSON", "the request body must be a JSON object")
    return parsed
