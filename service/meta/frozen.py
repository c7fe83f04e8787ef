"""``FrozenState``: a point-in-time image of ``MetaState`` that other threads may read
(snapshots are encoded from it on the executor while the live state moves on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.meta.epoch_state import EpochStart
from service.meta.model import (
    AccessKey,
    Bucket,
    ObjectVersion,
    PartInfo,
    UploadSession,
    User,
    VideoJob,
    VideoShare,
)

Versions = tuple[ObjectVersion, ...]


@dataclass(frozen=True, slots=True)
class FrozenState:
    """A point-in-time image of the durable state: private shallow copies of the containers.

    ``objects`` maps a bucket to ``(keys in order, key -> versions)``. Safe to read from
    any thread while the live state moves on, since records are immutable.
    """

    server_id: str | None
    buckets: dict[str, Bucket]
    objects: dict[str, tuple[list[str], dict[str, Versions]]]
    uploads: dict[str, UploadSession]
    parts: dict[str, dict[int, PartInfo]]
    users: dict[str, User]
    access_keys: dict[str, AccessKey]
    key_last_used: dict[str, int]
    anomalies: dict[str, int]
    video_jobs: dict[str, VideoJob]
    video_shares: dict[str, VideoShare]
    lifecycle: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notifications: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    epochs: tuple[EpochStart, ...] = ()
    """The ``EpochStarted`` records applied (``service.meta.epoch_state``)."""
    latest_at: int = field(default=0, compare=False)
    """The newest ``at`` of the events applied, rejected ones included (journaled all the
    same: ``service.meta.lock_state``); bookkeeping, not content, so equal states compare
    equal whatever it is."""
