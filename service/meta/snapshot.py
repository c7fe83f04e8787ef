"""Snapshots of the metadata state: ``freeze`` on the loop, ``iter_snapshot`` anywhere.

``freeze(state)`` takes a point-in-time image (shallow copies of the containers; records
are immutable and shared), cheap enough for the event-loop thread. ``iter_snapshot`` turns
the image into msgpack bytes, in chunks the journal streams to the file (``encode_snapshot``
joins them), and may run in a worker thread while the loop keeps applying events.
``stream_image`` reads one a piece at a time, handing each key's versions to the caller
(a rebuild of the persistent index), and ``decode_snapshot`` rebuilds a live ``MetaState``
(derived indexes - usage, payload
references, the visible-key lists - are recomputed, not stored, so they cannot disagree with
the records).

Format (a msgpack map; ``format`` says how to read the rest):

    format       1
    server_id    str | nil
    buckets      [[name, owner, quota_bytes, versioning_enabled, tags, created_at, updated_at,
                   bucket_id (, object_lock_enabled, default_retention_mode,
                   default_retention_days)]]
    objects      [[bucket, [[key, [[version_id, payload_id, size, content_type, sha256,
                                    custom_metadata, created_at, updated_at,
                                    is_delete_marker (, retention_mode, retain_until,
                                    legal_hold)]]]]]]     versions oldest first
    uploads      [[upload_id, bucket, key, owner, content_type, custom_metadata,
                   recommended_part_size, created_at, expires_at,
                   [[part_number, payload_id, size, sha256, stored_at]]]]
    users        [[user_id, username, password_hash, role, status, created_at, updated_at]]
    access_keys  [[access_key_id, user_id, name, secret_digest, status, created_at, updated_at]]
    key_last_used {access_key_id: ms}
    anomalies    {name: count}
    video_jobs   [[job_id, bucket, key, created_by, params, output_prefix, status, progress,
                   outputs, error, created_at, updated_at, attempts, worker, active,
                   publishing]]
    video_shares [[share_id, job_id, bucket, created_by, created_at, expires_at]]
    lifecycle    {bucket: [rule document]}        (service.meta.lifecycle_state)
    notifications {bucket: [webhook document]}    (service.meta.notification_state)
    latest_at    int: the newest ``at`` of any applied event (ms; the object lock's clock rule)
    epochs       [[epoch, sequence, server_id, at]]   (service.meta.epoch_state)

``video_jobs`` and ``video_shares`` came later within format 1: a snapshot without them
(written before videos existed) reads as having none; so did ``lifecycle`` and
``notifications``, and ``latest_at`` (0 when absent), and ``epochs`` (none when absent:
the history reads as epoch 1 from record 1). A bucket row of seven columns (written
before bucket identities) gets the identity derived from its name and ``created_at``
(``service.meta.identity``), as the replay of its creation record would. The object lock
fields in parentheses are written only for a bucket with object lock and a version with a
retention or legal hold (``service.meta.model.bucket_row`` / ``version_row``): rows without
them read as unlocked.
A job row's last four fields (the media fleet's attempts) came later still: a shorter row
reads as a job with no attempt recorded.

Everything is written in a canonical order (buckets, keys, ids sorted), so equal states give
equal bytes.

Thread-safety: ``freeze`` on the event-loop thread; the others on any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import msgpack

from service.meta.epoch_state import EpochStart
from service.meta.frozen import FrozenState
from service.meta.identity import legacy_bucket_id
from service.meta.model import (
    AccessKey,
    Bucket,
    ObjectVersion,
    PartInfo,
    UploadSession,
    User,
    VideoJob,
    VideoShare,
    bucket_row,
    version_row,
)
from service.meta.state import MetaState

FORMAT = 1
LEGACY_BUCKET_COLUMNS = 7
"""Columns of a bucket row written before bucket identities."""
CHUNK_BYTES = 1024 * 1024
"""About how much ``iter_snapshot`` gathers before it yields."""


class SnapshotFormatError(ValueError):
    """The bytes are not a snapshot this version can read."""


def freeze(state: MetaState) -> FrozenState:
    """A point-in-time image of ``state`` for ``encode_snapshot`` in another thread."""
    return state.freeze()


def _bucket(row: list[Any]) -> Bucket:
    """A bucket row; one from before identities gets the derived one."""
    if len(row) == LEGACY_BUCKET_COLUMNS:
        name, owner, quota, versioning, tags, created_at, updated_at = row
        legacy = legacy_bucket_id(name, created_at)
        return Bucket(name, owner, quota, versioning, tags, created_at, updated_at, legacy)
    return Bucket(*row)


def _key_row(k: AccessKey) -> list[Any]:
    return [
        k.access_key_id,
        k.user_id,
        k.name,
        k.secret_digest,
        k.status,
        k.created_at,
        k.updated_at,
    ]


def _upload_row(session: UploadSession, parts: dict[int, PartInfo]) -> list[Any]:
    return [
        session.upload_id,
        session.bucket,
        session.key,
        session.owner,
        session.content_type,
        dict(session.custom_metadata),
        session.recommended_part_size,
        session.created_at,
        session.expires_at,
        [
            [p.part_number, p.payload_id, p.size, p.sha256, p.stored_at]
            for _, p in sorted(parts.items())
        ],
    ]


def _job_row(job: VideoJob) -> list[Any]:
    return [
        job.job_id,
        job.bucket,
        job.key,
        job.created_by,
        dict(job.params),
        job.output_prefix,
        job.status,
        job.progress,
        dict(job.outputs),
        job.error,
        job.created_at,
        job.updated_at,
        job.attempts,
        job.worker,
        job.active,
        None if job.publishing is None else dict(job.publishing),
    ]


def _share_row(share: VideoShare) -> list[Any]:
    return [
        share.share_id,
        share.job_id,
        share.bucket,
        share.created_by,
        share.created_at,
        share.expires_at,
    ]


class StoredObjects(Protocol):
    """Object versions as a persistent index stores them: msgpack arrays of version rows."""

    def count(self, bucket: str) -> int: ...
    def rows(self, bucket: str) -> Iterator[tuple[str, bytes]]: ...


def encode_snapshot(state: MetaState | FrozenState, stored: StoredObjects | None = None) -> bytes:
    """The snapshot bytes of a frozen image (or of a live state, frozen first)."""
    return b"".join(iter_snapshot(state, stored))


def iter_snapshot(
    state: MetaState | FrozenState, stored: StoredObjects | None = None
) -> Iterator[bytes]:
    """The snapshot of a frozen image (or of a live state, frozen first) in chunks of about
    ``CHUNK_BYTES``, for a writer that streams them to the file.

    Objects are packed key by key, so the memory it takes beyond the image stays small
    however many objects there are. With ``stored``, the image holds no objects
    (``freeze(objects=False)``) and each bucket's keys come from ``stored``, their rows
    copied as stored, never decoded (``service.index.lmdb_index.StoredRows``).
    """
    image = state.freeze() if isinstance(state, MetaState) else state
    packer = msgpack.Packer(autoreset=False, use_bin_type=True)
    pending = bytearray()

    def flush(extra: bytes = b"") -> bytes | None:
        pending.extend(packer.bytes())
        pending.extend(extra)
        packer.reset()
        if len(pending) < CHUNK_BYTES:
            return None
        chunk = bytes(pending)
        pending.clear()
        return chunk

    packer.pack_map_header(15)
    packer.pack("format")
    packer.pack(FORMAT)
    packer.pack("server_id")
    packer.pack(image.server_id)
    packer.pack("buckets")
    packer.pack([bucket_row(bucket) for _, bucket in sorted(image.buckets.items())])
    packer.pack("objects")
    packer.pack_array_header(len(image.objects))
    for bucket, (keys, versions) in sorted(image.objects.items()):
        packer.pack_array_header(2)
        packer.pack(bucket)
        if stored is None:
            packer.pack_array_header(len(keys))
            for key in keys:
                packer.pack([key, [version_row(v) for v in versions[key]]])
                if (chunk := flush()) is not None:
                    yield chunk
            continue
        packer.pack_array_header(stored.count(bucket))
        for key, rows in stored.rows(bucket):
            packer.pack_array_header(2)
            packer.pack(key)
            if (chunk := flush(rows)) is not None:
                yield chunk
    packer.pack("uploads")
    packer.pack(
        [
            _upload_row(session, image.parts.get(upload_id, {}))
            for upload_id, session in sorted(image.uploads.items())
        ]
    )
    packer.pack("users")
    packer.pack(
        [
            [u.user_id, u.username, u.password_hash, u.role, u.status, u.created_at, u.updated_at]
            for _, u in sorted(image.users.items())
        ]
    )
    packer.pack("access_keys")
    packer.pack([_key_row(key) for _, key in sorted(image.access_keys.items())])
    packer.pack("key_last_used")
    packer.pack(dict(sorted(image.key_last_used.items())))
    packer.pack("anomalies")
    packer.pack(dict(sorted(image.anomalies.items())))
    packer.pack("video_jobs")
    packer.pack([_job_row(job) for _, job in sorted(image.video_jobs.items())])
    packer.pack("video_shares")
    packer.pack([_share_row(share) for _, share in sorted(image.video_shares.items())])
    packer.pack("lifecycle")
    packer.pack(dict(sorted(image.lifecycle.items())))
    packer.pack("notifications")
    packer.pack(dict(sorted(image.notifications.items())))
    packer.pack("latest_at")
    packer.pack(image.latest_at)
    packer.pack("epochs")
    packer.pack([list(entry) for entry in image.epochs])
    pending.extend(packer.bytes())
    yield bytes(pending)


def decode_snapshot(data: bytes) -> MetaState:
    """The live state a snapshot describes; raises SnapshotFormatError if it is not one."""
    image = decode_image(data)
    try:
        return MetaState.restore(image)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise SnapshotFormatError(f"damaged snapshot: {exc!r}") from exc


def decode_image(data: bytes) -> FrozenState:
    """The image a snapshot describes; raises SnapshotFormatError if it is not one."""
    try:
        doc = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise SnapshotFormatError(f"not a msgpack snapshot: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise SnapshotFormatError(f"unsupported snapshot format {found!r}, expected {FORMAT}")
    try:
        return _image(doc)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise SnapshotFormatError(f"damaged snapshot: {exc!r}") from exc


class SnapshotSource(Protocol):
    """Snapshot bytes to read a piece at a time (``journal.SnapshotReader``)."""

    def read(self, size: int = -1) -> bytes: ...


VersionRows = list[list[Any]]
"""A key's versions as a snapshot holds them, oldest first (``ObjectVersion(bucket, key,
*row)`` for each row)."""


def stream_image(
    source: SnapshotSource, on_key: Callable[[str, str, VersionRows], None]
) -> FrozenState:
    """The image a snapshot describes, but for its objects: each key's version rows go to
    ``on_key(bucket, key, rows)`` as they are read, bucket by bucket, keys in order, and the
    image returned holds none (``objects`` is empty). So a snapshot of any number of
    objects is read in the memory of one key's rows and a read buffer.

    ``buckets`` comes before ``objects`` in the format (the writer's order), so each
    bucket's record is known before its keys: a snapshot with them the other way round
    is refused. Raises SnapshotFormatError if the bytes are not a snapshot."""
    unpacker = msgpack.Unpacker(source, raw=False, read_size=CHUNK_BYTES)
    doc: dict[str, Any] = {}
    try:
        for _ in range(unpacker.read_map_header()):
            name = unpacker.unpack()
            if name != "objects":
                doc[name] = unpacker.unpack()
                continue
            if doc.get("format") != FORMAT or "buckets" not in doc:
                raise SnapshotFormatError(
                    "the snapshot's objects come before its format or buckets"
                )
            known = {row[0] for row in doc["buckets"]}
            for _ in range(unpacker.read_array_header()):
                if unpacker.read_array_header() != 2:
                    raise SnapshotFormatError("damaged snapshot: a bucket's objects are not a pair")
                bucket = unpacker.unpack()
                if bucket not in known:
                    raise SnapshotFormatError(f"damaged snapshot: objects of no bucket {bucket!r}")
                for _ in range(unpacker.read_array_header()):
                    key, rows = unpacker.unpack()
                    on_key(bucket, key, rows)
    except (ValueError, TypeError, KeyError, IndexError, msgpack.UnpackException) as exc:
        if isinstance(exc, SnapshotFormatError):
            raise
        raise SnapshotFormatError(f"damaged snapshot: {exc!r}") from exc
    if doc.get("format") != FORMAT:
        raise SnapshotFormatError(
            f"unsupported snapshot format {doc.get('format')!r}, expected {FORMAT}"
        )
    doc["objects"] = []
    try:
        return _image(doc)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise SnapshotFormatError(f"damaged snapshot: {exc!r}") from exc


def _image(doc: dict[str, Any]) -> FrozenState:
    objects: dict[str, tuple[list[str], dict[str, tuple[ObjectVersion, ...]]]] = {}
    for bucket, entries in doc["objects"]:
        keys = [key for key, _ in entries]
        objects[bucket] = (
            keys,
            {key: tuple(ObjectVersion(bucket, key, *row) for row in rows) for key, rows in entries},
        )
    uploads: dict[str, UploadSession] = {}
    parts: dict[str, dict[int, PartInfo]] = {}
    for row in doc["uploads"]:
        session = UploadSession(*row[:9])
        uploads[session.upload_id] = session
        parts[session.upload_id] = {p[0]: PartInfo(*p) for p in row[9]}
    return FrozenState(
        server_id=doc["server_id"],
        buckets={row[0]: _bucket(row) for row in doc["buckets"]},
        objects=objects,
        uploads=uploads,
        parts=parts,
        users={row[0]: User(*row) for row in doc["users"]},
        access_keys={row[0]: AccessKey(*row) for row in doc["access_keys"]},
        key_last_used=dict(doc["key_last_used"]),
        anomalies=dict(doc["anomalies"]),
        video_jobs={row[0]: VideoJob(*row) for row in doc.get("video_jobs", [])},
        video_shares={row[0]: VideoShare(*row) for row in doc.get("video_shares", [])},
        lifecycle=dict(doc.get("lifecycle", {})),
        notifications=dict(doc.get("notifications", {})),
        latest_at=int(doc.get("latest_at", 0)),
        epochs=tuple(EpochStart(*row) for row in doc.get("epochs", [])),
    )
