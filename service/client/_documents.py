"""Building JSON request documents: optional fields left out, PATCH's "not given" sentinel.

In a PATCH, ``None`` is a value (``quota_bytes: null`` removes the quota), so "leave this
field alone" needs its own marker, ``UNSET``. Pure.
"""

from __future__ import annotations

import enum
from typing import Any, Final

__all__ = ["UNSET", "Unset", "document", "patch_document"]


class Unset(enum.Enum):
    """The type of ``UNSET``."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET


def document(**fields: Any) -> dict[str, Any]:
    """The fields that were given (not None).

    >>> document(bucket="b", width=None, quality=80)
    {'bucket': 'b', 'quality': 80}
    """
    return {name: value for name, value in fields.items() if value is not None}


def patch_document(**fields: Any) -> dict[str, Any]:
    """The fields that were given (not UNSET); None is kept, it means "clear".

    >>> patch_document(quota_bytes=None, tags=UNSET)
    {'quota_bytes': None}
    """
    document = {name: value for name, value in fields.items() if value is not UNSET}
    if not document:
        raise ValueError("nothing to update: give at least one field")
    return document
