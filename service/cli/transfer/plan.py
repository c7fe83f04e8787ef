"""The merge-join of a source walk and a target walk by relative key (pure, lazy).

Both inputs come in key order; the join yields each key once with what each side holds, so a
transfer decides per key (copy, compare, remove) while holding one entry of each side.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, Sequence

from service.cli.transfer.walk import Entry

__all__ = ["excluded", "merge"]


def merge(
    source: Iterable[Entry], target: Iterable[Entry]
) -> Iterator[tuple[Entry | None, Entry | None]]:
    """``(source_entry, target_entry)`` pairs in key order; None where a side lacks the key.

    >>> a, b, c = Entry("a", 1), Entry("b", 2), Entry("c", 3)
    >>> [(s and s.rel, t and t.rel) for s, t in merge([a, c], [b, c])]
    [('a', None), (None, 'b'), ('c', 'c')]
    """
    sources, targets = iter(source), iter(target)
    left, right = next(sources, None), next(targets, None)
    while left is not None or right is not None:
        if right is None or (left is not None and left.rel < right.rel):
            yield left, None
            left = next(sources, None)
        elif left is None or right.rel < left.rel:
            yield None, right
            right = next(targets, None)
        else:
            yield left, right
            left, right = next(sources, None), next(targets, None)


def excluded(rel: str, patterns: Sequence[str]) -> bool:
    """Whether ``rel`` matches a ``--exclude`` glob, by its whole path or its file name.

    >>> excluded("a/b.tmp", ["*.tmp"]), excluded("cache/x", ["cache/*"]), excluded("a", [])
    (True, True, False)
    """
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(name, p) for p in patterns)
