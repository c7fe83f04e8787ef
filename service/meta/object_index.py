"""The object index: per bucket, each key's versions in key order, and the visible keys.

The one place the state keeps object versions, behind a small interface, so that what holds
them (sortedcontainers in memory here; the persistent LMDB index, ``service.index``) can
change without touching ``apply``'s rules in ``state``. Beside the versions it keeps what
is derived from them and must not be recounted at a start: each bucket's usage and each
payload's reference count (``service.meta.refs``).

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
from service.meta.model import ObjectPage, ObjectVersion, Usage, VersionPage

Versions = tuple[ObjectVersion, ...]
BucketImage = tuple[list[str], dict[str, Versions]]
"""A bucket's keys in order and each key's versions (a snapshot's view)."""


def visible(versions: Versions) -> bool:
    """Whether a key with these versions is listed: its latest version is not a marker."""
    return bool(versions) and not versions[-1].is_delete_marker


def find_version(versions: Versions, version_id: str | None) -> int | None:
    """The position of the version called ``version_id`` (None: the null version)."""
    for index, version in enumerate(versions):
        if version.version_id == version_id:
            return index
    return None


class PayloadHolder(Protocol):
    """Whether a record holds a payload id, as of when it was taken (the GC's question,
    asked from its thread for a whole pass); ``close`` when done."""

    def __call__(self, payload_id: str) -> bool: ...
    def close(self) -> None: ...


class _HeldIds:
    def __init__(self, ids: set[str]) -> None:
        self._ids = ids

    def __call__(self, payload_id: str) -> bool:
        return payload_id in self._ids

    def close(self) -> None:
        self._ids = set()


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
    def list_objects(
        self, bucket: str, prefix: str, delimiter: str | None, limit: int, start_after: str | None
    ) -> ObjectPage: ...
    def list_versions(
        self, bucket: str, prefix: str, limit: int, start_after: tuple[str, int] | None
    ) -> VersionPage: ...
    def usage(self, bucket: str) -> Usage: ...
    def set_usage(self, bucket: str, usage: Usage | None) -> None: ...
    def usages(self) -> dict[str, Usage]: ...
    def ref_count(self, payload_id: str) -> int: ...
    def set_ref_count(self, payload_id: str, count: int) -> None: ...
    def referenced(self) -> Iterator[str]: ...
    def holder(self) -> PayloadHolder: ...


class ObjectIndex:
    """Object versions of every bucket in memory; see the module docstring."""

    def __init__(self) -> None:
        self._versions: dict[str, Any] = {}  # bucket -> SortedDict[str, Versions]
        self._visible: dict[str, Any] = {}  # bucket -> SortedList[str]
        self._usage: dict[str, Usage] = {}
        self._refs: dict[str, int] = {}

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

    # -- counters -----------------------------------------------------------------------

    def usage(self, bucket: str) -> Usage:
        """The bucket's usage (zero when none is kept)."""
        return self._usage.get(bucket, Usage())

    def set_usage(self, bucket: str, usage: Usage | None) -> None:
        """Keep ``usage`` for the bucket (None: forget it)."""
        if usage is None:
            self._usage.pop(bucket, None)
        else:
            self._usage[bucket] = usage

    def usages(self) -> dict[str, Usage]:
        return dict(self._usage)

    def ref_count(self, payload_id: str) -> int:
        """How many records hold the payload. Safe from any thread (one dict lookup)."""
        return self._refs.get(payload_id, 0)

    def set_ref_count(self, payload_id: str, count: int) -> None:
        if count > 0:
            self._refs[payload_id] = count
        else:
            self._refs.pop(payload_id, None)

    def referenced(self) -> Iterator[str]:
        """Every payload id held (from a copy)."""
        return iter(list(self._refs))

    def holder(self) -> PayloadHolder:
        """The ids held now (a copy), for a GC pass on another thread."""
        return _HeldIds(set(self._refs))
