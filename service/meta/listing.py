"""Paged listings over a bucket's sorted keys.

A page costs O(log n) to find its start plus O(log n) per item: the walk starts with a
bisect, and after a common prefix it jumps with another bisect to the first key past
everything under that prefix instead of stepping over those keys.

Resuming from ``start_after`` (the previous page's ``last_item``) yields each key or common
prefix exactly once across pages. A marker that contains the delimiter after the prefix is
necessarily a common prefix (keys holding the delimiter are never listed as objects), so the
next page starts past every key under it.

Keys compare as Python strings, i.e. by code point, which is also the order of their UTF-8
bytes.

Thread-safety: pure functions over the containers they are given; call them where those
containers are not being mutated (the event-loop thread).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from service.meta.model import ObjectPage, ObjectVersion, VersionEntry, VersionPage

Versions = tuple[ObjectVersion, ...]


def successor(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (None: there is none).

    >>> successor("photos/")
    'photos0'
    >>> successor("")
    """
    head = prefix
    while head:
        last = ord(head[-1])
        if last < sys.maxunicode:
            return head[:-1] + chr(last + 1)
        head = head[:-1]
    return None


def _keys_from(keys: Any, bound: str, inclusive: bool) -> Iterator[str]:
    """Keys of a sortedcontainers SortedList/SortedDict from ``bound`` on, by bisection."""
    iterator: Iterator[str] = keys.irange(minimum=bound, inclusive=(inclusive, True))
    return iterator


def resume_point(prefix: str, delimiter: str, start_after: str | None) -> tuple[str | None, bool]:
    """Where a listing starts: ``(bound, inclusive)``; a None bound means nothing is left."""
    if start_after is None or start_after < prefix:
        return prefix, True
    if delimiter and start_after.startswith(prefix):
        cut = start_after.find(delimiter, len(prefix))
        if cut >= 0:
            return successor(start_after[: cut + len(delimiter)]), True
    return start_after, False


def list_objects(
    visible_keys: Any,
    versions: Any,
    prefix: str,
    delimiter: str | None,
    limit: int,
    start_after: str | None,
) -> ObjectPage:
    """One page of the keys whose latest version is not a delete marker.

    ``visible_keys`` is a SortedList of exactly those keys; ``versions`` maps each key to
    its versions, oldest first (anything with ``irange`` and ``[key]`` will do: the
    persistent index passes cursor views).
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    delimiter = delimiter or ""
    objects: list[ObjectVersion] = []
    prefixes: list[str] = []
    last_item: str | None = None
    truncated = False
    bound, inclusive = resume_point(prefix, delimiter, start_after)
    while bound is not None:
        jump: str | None = None
        for key in _keys_from(visible_keys, bound, inclusive):
            if not key.startswith(prefix):
                break
            if len(objects) + len(prefixes) >= limit:
                truncated = True
                break
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                last_item = key[: cut + len(delimiter)]
                prefixes.append(last_item)
                jump = successor(last_item)
                break
            objects.append(versions[key][-1])
            last_item = key
        if jump is None:
            break
        bound, inclusive = jump, True
    return ObjectPage(tuple(objects), tuple(prefixes), last_item, truncated)


def list_versions(
    versions: Any,
    prefix: str,
    limit: int,
    start_after: tuple[str, int] | None,
) -> VersionPage:
    """One page of every version (delete markers too) in key order, newest first per key.

    ``versions`` is a SortedDict mapping each key to its versions, oldest first;
    ``start_after`` is a previous page's ``last_item``.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    entries: list[VersionEntry] = []
    last_item: tuple[str, int] | None = None
    truncated = False
    resume_key, resume_position = start_after if start_after is not None else (prefix, -1)
    bound = max(prefix, resume_key)
    for key in _keys_from(versions, bound, True):
        if not key.startswith(prefix):
            break
        history: Versions = versions[key]
        top = len(history)
        if key == resume_key and resume_position >= 0:
            # Resume below the last position returned (newest first within a key).
            top = min(top, resume_position)
        for position in range(top - 1, -1, -1):
            if len(entries) >= limit:
                truncated = True
                break
            entries.append(VersionEntry(history[position], position == len(history) - 1))
            last_item = (key, position)
        if truncated:
            break
    return VersionPage(tuple(entries), last_item, truncated)
