"""Byte ranges: the three ways to ask for one, and the ``Content-Range`` that answers.

``ByteRange`` mirrors HTTP's single-range forms (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``)
with an *inclusive* end, as in HTTP, so ``ByteRange(0, 99)`` is the first 100 bytes.
``coerce_range`` also accepts a tuple ``(start, end)`` and the header string itself. Pure;
values are immutable.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TypeAlias

__all__ = ["ByteRange", "ContentRange", "RangeLike", "coerce_range"]

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$")


@dataclasses.dataclass(frozen=True)
class ByteRange:
    """One byte range: ``start`` to ``end`` inclusive, ``start`` to the end of the object
    (``end=None``), or the last ``suffix`` bytes.

    >>> ByteRange(0, 99).header, ByteRange(start=100).header, ByteRange(suffix=10).header
    ('bytes=0-99', 'bytes=100-', 'bytes=-10')
    """

    start: int | None = None
    end: int | None = None
    suffix: int | None = None

    def __post_init__(self) -> None:
        if self.suffix is not None:
            if self.start is not None or self.end is not None:
                raise ValueError("a suffix range takes no start or end")
            if self.suffix <= 0:
                raise ValueError("suffix must be a positive number of bytes")
            return
        if self.start is None:
            raise ValueError("give start (and optionally end), or suffix")
        if self.start < 0:
            raise ValueError("start must be >= 0")
        if self.end is not None and self.end < self.start:
            raise ValueError("end is inclusive and must be >= start")

    @property
    def header(self) -> str:
        """The ``Range`` header value."""
        if self.suffix is not None:
            return f"bytes=-{self.suffix}"
        end = "" if self.end is None else str(self.end)
        return f"bytes={self.start}-{end}"

    @classmethod
    def parse(cls, text: str) -> ByteRange:
        """The range of a ``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` string.

        >>> ByteRange.parse("bytes=5-9"), ByteRange.parse("bytes=-3")
        (ByteRange(start=5, end=9, suffix=None), ByteRange(start=None, end=None, suffix=3))
        """
        match = _RANGE.match(text)
        if match is None:
            raise ValueError(f"not a single byte range: {text!r} (use 'bytes=a-b')")
        first, last = match.groups()
        if not first:
            if not last:
                raise ValueError(f"empty byte range: {text!r}")
            return cls(suffix=int(last))
        return cls(start=int(first), end=int(last) if last else None)

    def length(self, size: int) -> int:
        """How many bytes of an object of ``size`` bytes this range selects (0 if none).

        >>> ByteRange(5, 100).length(10), ByteRange(suffix=4).length(3), ByteRange(20).length(10)
        (5, 3, 0)
        """
        if self.suffix is not None:
            return min(self.suffix, size)
        assert self.start is not None
        last = size - 1 if self.end is None else min(self.end, size - 1)
        return max(0, last - self.start + 1)


#: What ``get_range`` accepts.
RangeLike: TypeAlias = ByteRange | tuple[int, int | None] | str


def coerce_range(value: RangeLike) -> ByteRange:
    """A ``ByteRange`` from any accepted form; a tuple's end is inclusive, as in HTTP.

    >>> coerce_range((0, 9)) == coerce_range("bytes=0-9") == ByteRange(0, 9)
    True
    """
    if isinstance(value, ByteRange):
        return value
    if isinstance(value, str):
        return ByteRange.parse(value)
    if isinstance(value, tuple) and len(value) == 2:
        start, end = value
        if not isinstance(start, int) or not (end is None or isinstance(end, int)):
            raise TypeError("a range tuple is (start, end) of ints, end inclusive or None")
        return ByteRange(start, end)
    raise TypeError(f"a range is a ByteRange, a (start, end) tuple or 'bytes=a-b', not {value!r}")


@dataclasses.dataclass(frozen=True)
class ContentRange:
    """A parsed ``Content-Range``: ``start``/``end`` (inclusive) of the bytes sent, None for
    ``bytes */size``; ``size`` of the whole object, None when the server said ``*``."""

    start: int | None
    end: int | None
    size: int | None

    @classmethod
    def parse(cls, text: str) -> ContentRange | None:
        """None when ``text`` is not a byte content range.

        >>> ContentRange.parse("bytes 0-9/100"), ContentRange.parse("bytes */0")
        (ContentRange(start=0, end=9, size=100), ContentRange(start=None, end=None, size=0))
        """
        match = _CONTENT_RANGE.match(text)
        if match is None:
            return None
        first, last, size = match.groups()
        return cls(
            int(first) if first is not None else None,
            int(last) if last is not None else None,
            None if size == "*" else int(size),
        )
