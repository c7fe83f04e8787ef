"""Checked reads of event fields, so ``apply`` validates an event before changing anything.

An event comes from the journal: normally one our own constructors built, but possibly
damaged by a bug or written by another version. Each handler reads every field through
these functions first; a missing or mistyped field raises ``MalformedEventError``, which
``apply`` turns into a rejected outcome while the state is still untouched.

Thread-safety: pure functions, safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class MalformedEventError(ValueError):
    """An event field is missing or has the wrong type."""


def _field(event: Mapping[str, Any], name: str) -> Any:
    if name not in event:
        raise MalformedEventError(f"missing field {name!r}")
    return event[name]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def text(event: Mapping[str, Any], name: str) -> str:
    value = _field(event, name)
    if not isinstance(value, str):
        raise MalformedEventError(f"field {name!r} must be a string")
    return value


def optional_text(event: Mapping[str, Any], name: str) -> str | None:
    value = _field(event, name)
    if value is not None and not isinstance(value, str):
        raise MalformedEventError(f"field {name!r} must be a string or null")
    return value


def added_text(event: Mapping[str, Any], name: str) -> str | None:
    """A string field added after records were first written: None when a record lacks it."""
    value = event.get(name)
    if value is not None and not isinstance(value, str):
        raise MalformedEventError(f"field {name!r} must be a string when present")
    return value


def integer(event: Mapping[str, Any], name: str, *, minimum: int | None = None) -> int:
    value = _field(event, name)
    if not _is_int(value) or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise MalformedEventError(f"field {name!r} must be an integer{bound}")
    return int(value)


def optional_integer(event: Mapping[str, Any], name: str, *, minimum: int = 0) -> int | None:
    if _field(event, name) is None:
        return None
    return integer(event, name, minimum=minimum)


def flag(event: Mapping[str, Any], name: str) -> bool:
    value = _field(event, name)
    if not isinstance(value, bool):
        raise MalformedEventError(f"field {name!r} must be a boolean")
    return value


def mapping(event: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = _field(event, name)
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise MalformedEventError(f"field {name!r} must be a map with string keys")
    return value


def string_map(event: Mapping[str, Any], name: str) -> dict[str, str]:
    value = mapping(event, name)
    if not all(isinstance(item, str) for item in value.values()):
        raise MalformedEventError(f"field {name!r} must map strings to strings")
    return dict(value)


def integer_map(event: Mapping[str, Any], name: str) -> dict[str, int]:
    value = mapping(event, name)
    if not all(_is_int(item) for item in value.values()):
        raise MalformedEventError(f"field {name!r} must map strings to integers")
    return dict(value)


def integer_list(event: Mapping[str, Any], name: str) -> list[int]:
    value = _field(event, name)
    if not isinstance(value, list | tuple) or not all(_is_int(item) for item in value):
        raise MalformedEventError(f"field {name!r} must be a list of integers")
    return list(value)
