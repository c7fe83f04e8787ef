"""The object index: per bucket, each key's versions in key order, and the visible keys.

The one place the state keeps object versions, behind a small interface, so that what holds
them (today sortedcontainers in memory; the persistent store of issue 12 next) can change
without touching ``apply``'s rules in ``state``.

Per bucket it holds a SortedDict ``key -> tuple of versions`` (oldest first, latest last)
and a SortedList of the keys whose latest version is not a delete marker, so a listing page
costs O(log n + page) and never steps over deleted keys (``service.meta.listing``).

Thread-safety: like ``MetaState``, event-loop thread only; ``image`` hands out private
copies of the containers for other threads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from sortedcontainers import SortedDict, SortedList

from service.meta import listing
from service.meta.model import ObjectPage, ObjectVersion, VersionPage

Versions = tuple[ObjectVersion, ...]
BucketImage = tuple[list[str], dict[str, Versions]]
"""A bucket's keys in order and each key's versions (a snapshot's view)."""


def visible(versions: Versions) -> bool:
    """Whether a key with these versions is listed: its latest version is not a marker."""
    return bool(versions) and not versions[-1].is_delete_marker


class ObjectStore(Protocol):
    """What the state asks of whatever holds the object versions."""

    def add_bucket(
        self, bucket: str, versions_by_key: Mapping[str, Versions] | None = None
    ) -> None: ...
    def drop_bucket(self, bucket: str) -> Iterator[ObjectVersion]: ...
    def holds_any(self, bucket: str) -> bool: ...
    def versions(self, bucket: str, key: str) -> Versions: ...
    def set_versions(self, bucket: str, key: str, before: Versions, after: Versions) -> None: ...
    def image(self) -> dict[str, BucketImage]: ...
    def iter_versions(self) -> Iterator[ObjectVersion]: ...
    def list_objects(
        self, bucket: str, prefix: str, delimiter: str | None, limit: int, start_after: str | None
    ) -> ObjectPage: ...
    def list_versions(
        self, bucket: str, prefix: str, limit: int, start_after: tuple[str, int] | None
    ) -> VersionPage: ...


class ObjectIndex:
    """Object versions of every bucket in memory; see the module docstring."""

    def __init__(self) -> None:
        self._versions: dict[str, Any] = {}  # bucket -> SortedDict[str, Versions]
        self._visible: dict[str, Any] = {}  # bucket -> SortedList[str]

    def add_bucket(
        self, bucket: str, versions_by_key: Mapping[str, Versions] | None = None
    ) -> None:
        """Start indexing ``bucket``, empty or holding ``versions_by_key`` (a snapshot's)."""
        versions_by_key = versions_by_key or {}
        self._versions[bucket] = SortedDict(versions_by_key)
        self._visible[bucket] = SortedList(
            key for key, versions in versions_by_key.items() if visible(versions)
        )

    def drop_bucket(self, bucket: str) -> Iterator[ObjectVersion]:
        """Stop indexing ``bucket``; yields every version it held (for their references)."""
        versions_by_key = self._versions.pop(bucket)
        del self._visible[bucket]
        for versions in versions_by_key.values():
            yield from versions

    def holds_any(self, bucket: str) -> bool:
        """Whether the bucket has any key, delete markers included."""
        return bool(self._versions[bucket])

    def versions(self, bucket: str, key: str) -> Versions:
        """Every version of a key, oldest first (empty if none or no such bucket)."""
        keys = self._versions.get(bucket)
        return () if keys is None else keys.get(key, ())

    def set_versions(self, bucket: str, key: str, before: Versions, after: Versions) -> None:
        """Replace a key's versions (``before`` is what it held), keeping the visible keys
        in step."""
        keys = self._versions[bucket]
        if after:
            keys[key] = after
        else:
            del keys[key]
        was, now = visible(before), visible(after)
        if was and not now:
            self._visible[bucket].remove(key)
        elif now and not was:
            self._visible[bucket].add(key)

    def iter_versions(self) -> Iterator[ObjectVersion]:
        """Every version of every bucket."""
        for versions_by_key in self._versions.values():
            for versions in versions_by_key.values():
                yield from versions

    def image(self) -> dict[str, BucketImage]:
        """Private copies of every bucket's containers (no record is copied)."""
        return {
            bucket: (list(versions.keys()), dict.copy(versions))
            for bucket, versions in self._versions.items()
        }

    def list_objects(
        self, bucket: str, prefix: str, delimiter: str | None, limit: int, start_after: str | None
    ) -> ObjectPage:
        """A page of the bucket's visible keys (``service.meta.listing``)."""
        return listing.list_objects(
            self._visible[bucket], self._versions[bucket], prefix, delimiter, limit, start_after
        )

    def list_versions(
        self, bucket: str, prefix: str, limit: int, start_after: tuple[str, int] | None
    ) -> VersionPage:
        """A page of the bucket's versions (``service.meta.listing``)."""
        return listing.list_versions(self._versions[bucket], prefix, limit, start_after)
