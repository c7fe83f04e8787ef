"""Which payloads a record or a snapshot references: what must be in an archive (or on a
standby) before that record or snapshot may be.

Every record that brings a payload into the state names it with its size and SHA-256
(``ObjectStored``, ``PartStored``, ``UploadCompleted``: a field ``payload_id`` beside ``size``
and ``sha256``); a snapshot references the payloads of its versions and of its open uploads'
parts. Reading a snapshot's references streams it (``service.meta.snapshot.stream_image``),
so any number of objects is read in bounded memory.

Thread-safety: functions over their arguments (the snapshot source is the caller's;
``for_each_snapshot_payload_batch`` reads its snapshot's file: blocking).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from journal.snapshot import Snapshot, SnapshotReader
from service.meta.snapshot import SnapshotSource, VersionRows, stream_image

_VERSION_PAYLOAD, _VERSION_SIZE, _VERSION_SHA256 = 1, 2, 4
"""Positions in a snapshot's version row (``service.meta.snapshot``'s format)."""


@dataclass(frozen=True, slots=True)
class PayloadRef:
    payload_id: str
    size: int
    sha256: str


def record_payload(event: Mapping[str, Any]) -> PayloadRef | None:
    """The payload a record brings in, if any."""
    payload_id = event.get("payload_id")
    if not isinstance(payload_id, str) or not payload_id:
        return None
    return PayloadRef(payload_id, int(event["size"]), str(event["sha256"]))


def for_each_snapshot_payload(source: SnapshotSource, on_ref: Callable[[PayloadRef], None]) -> None:
    """Hand every payload the snapshot's state holds to ``on_ref`` (versions as the snapshot
    streams, then open uploads' parts), so the caller works in batches of its choosing and
    memory stays bounded for any number of objects. A payload two versions share comes once
    per version. Raises ``SnapshotFormatError`` if the bytes are not a snapshot."""

    def on_key(bucket: str, key: str, rows: VersionRows) -> None:
        for row in rows:
            payload_id = row[_VERSION_PAYLOAD]
            if payload_id:
                on_ref(PayloadRef(payload_id, int(row[_VERSION_SIZE]), row[_VERSION_SHA256]))

    image = stream_image(source, on_key)
    for parts in image.parts.values():
        for part in parts.values():
            on_ref(PayloadRef(part.payload_id, part.size, part.sha256))


def for_each_snapshot_payload_batch(
    snapshot: Snapshot, size: int, on_batch: Callable[[list[PayloadRef]], None]
) -> None:
    """Hand the payloads of a loaded snapshot to ``on_batch`` in lists of ``size`` (the last
    shorter, and called even when empty), then check the snapshot's crc (raises
    ``SnapshotDamagedError``): the archive's shipper and a standby's bootstrap copy a
    snapshot's payloads this way. A list is the caller's to keep."""
    batch: list[PayloadRef] = []

    def on_ref(ref: PayloadRef) -> None:
        nonlocal batch
        batch.append(ref)
        if len(batch) >= size:
            full, batch = batch, []
            on_batch(full)

    reader = SnapshotReader(snapshot)
    try:
        for_each_snapshot_payload(reader, on_ref)
        reader.check()
    finally:
        reader.close()
    on_batch(batch)
