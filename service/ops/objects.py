"""Object operations: the write path after staging, deletes, and version resolution.

Transport-free: the HTTP handlers feed bytes into a ``StagingUpload`` and hand the staged
payload here; the in-process engine tests drive the same functions.

Write path (``store_object``): the staged file is already flushed (fsync in strict) ->
promote (atomic rename + directory fsync in strict) -> journal commit -> the outcome. A
promote that fails takes back whatever it left and answers 507 when the disk is full. A
commit refused outright (rejected by ``apply``: a precondition or quota lost a race, the
bucket vanished) releases the promoted payload at once. A commit whose outcome is unknown
(journal fail-stop) leaves the payload for the next replay and the GC to settle.
"""

from __future__ import annotations

import contextlib
import errno
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

from fsseam.fs import ReadableFile, pread, pread_cached
from service.common.api_errors import ApiError, ServiceError
from service.common.header_fields import content_type_problem, validate_custom_metadata
from service.common.names import key_problem
from service.common.sizes import CHUNK_BYTES
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.meta import Bucket, ObjectVersion, records
from service.ops.buckets import outcome_error, require_bucket
from service.storage import DigestMismatch, PayloadStore, StagedPayload, StagingUpload
from service.storage.entropy import random_hex

DEFAULT_CONTENT_TYPE = "application/octet-stream"
SMALL_PUT_BYTES = CHUNK_BYTES
"""Bodies of at most this size (one buffer) are stored by ``store_small_object``: one
executor hop for staging, hashing, sealing and promoting, instead of the streaming path."""


@dataclass(frozen=True, slots=True)
class PutIntent:
    """Everything a PUT declares before its body arrives."""

    bucket: str
    key: str
    content_type: str = DEFAULT_CONTENT_TYPE
    custom_metadata: Mapping[str, str] = field(default_factory=dict)
    if_none_match: bool = False
    if_match: str | None = None
    expected_sha256: str | None = None
    content_length: int | None = None


@dataclass(slots=True)
class PutTimings:
    """Seconds spent in each stage after the body was staged."""

    promote: float = 0.0
    journal_commit: float = 0.0


def new_version_token() -> str:
    """A version id: sortable by time (ms prefix), unique by a random suffix."""
    return f"{now_ms():013x}{random_hex(6)}"


def require_key(key: str) -> None:
    problem = key_problem(key)
    if problem:
        raise ApiError("InvalidKey", problem)


def validate_metadata(metadata: Mapping[str, str]) -> None:
    """The contract's rules for custom metadata (``service.common.header_fields``), or 400."""
    validate_custom_metadata(metadata)


def validate_content_type(content_type: str) -> None:
    problem = content_type_problem(content_type)
    if problem:
        raise ApiError("InvalidArgument", problem)


def storage_failure(exc: OSError) -> ApiError:
    """The contract's answer to a payload file operation that failed: 507 when the disk is
    full (nothing partial is kept), 500 otherwise."""
    if exc.errno == errno.ENOSPC:
        return ApiError("InsufficientStorage", "the disk is full; nothing was stored")
    return ApiError("InternalError", "writing the payload failed", log_detail=repr(exc))


def take_back_promote(store: PayloadStore, staged: StagedPayload, payload_id: str) -> None:
    """Undo a failed promote: the staged file or the renamed payload, whichever is left.

    Nothing references ``payload_id`` yet. Blocking; best effort (the staging sweep and the
    GC collect anything left behind).
    """
    with contextlib.suppress(OSError):
        store.discard_staged(staged)
    with contextlib.suppress(OSError):
        store.remove([payload_id])


async def promote_staged(engine: Engine, staged: StagedPayload) -> str:
    """Promote ``staged`` under a fresh payload id and return it; on failure leave nothing
    and raise the contract's error (507 when the disk is full)."""
    payload_id = engine.store.next_payload_id()
    try:
        await engine.run_blocking(engine.store.promote, staged, payload_id)
    except OSError as exc:
        await engine.run_blocking(take_back_promote, engine.store, staged, payload_id)
        raise storage_failure(exc) from None
    return payload_id


def quota_room(engine: Engine, record: Bucket, current: ObjectVersion | None) -> int | None:
    """How many body bytes a PUT may still add to bucket ``record`` (None without a quota),
    given the key's current version."""
    if record.quota_bytes is None:
        return None
    used = engine.state.bucket_usage(record.name).size_bytes
    return max(0, record.quota_bytes - used + replaced_bytes(record, current))


def replaced_bytes(record: Bucket, current: ObjectVersion | None) -> int:
    """The bytes a new version of a key frees in bucket ``record``: its current version's
    when versioning is off (the PUT replaces it), else none."""
    if (
        not record.versioning_enabled
        and current is not None
        and current.version_id is None
        and not current.is_delete_marker
    ):
        return current.size
    return 0


def precheck_put(engine: Engine, intent: PutIntent) -> int | None:
    """Refuse a PUT before its body is read, when the answer is already known; return the
    bytes its body may add (``quota_room``), the bucket and the key looked up once."""
    engine.ensure_writable()
    record = require_bucket(engine, intent.bucket)
    require_key(intent.key)
    validate_metadata(intent.custom_metadata)
    validate_content_type(intent.content_type)
    current = engine.state.head_object(intent.bucket, intent.key, None)
    visible = current is not None and not current.is_delete_marker
    if intent.if_none_match and visible:
        raise ApiError("PreconditionFailed", "the key already exists (If-None-Match: *)")
    if intent.if_match is not None and (
        not visible or current is None or current.sha256 != intent.if_match
    ):
        raise ApiError("PreconditionFailed", "the current ETag does not match If-Match")
    room = quota_room(engine, record, current)
    if room is not None and intent.content_length is not None and intent.content_length > room:
        raise ApiError("QuotaExceeded", "the object would take the bucket past its quota")
    return room


async def store_object(
    engine: Engine, intent: PutIntent, staged: StagedPayload
) -> tuple[ObjectVersion, PutTimings]:
    """Promote a staged payload and commit it as the key's new version."""
    timings = PutTimings()
    if intent.expected_sha256 is not None and intent.expected_sha256 != staged.sha256:
        await engine.run_blocking(engine.store.discard_staged, staged)
        raise ApiError("BadDigest", "the body's SHA-256 does not match X-Checksum-Sha256")
    engine.ensure_writable()
    started = time.perf_counter()
    payload_id = await promote_staged(engine, staged)
    timings.promote = time.perf_counter() - started
    version = await commit_stored(engine, intent, payload_id, staged, timings)
    return version, timings


async def store_small_object(
    engine: Engine, intent: PutIntent, body: bytes
) -> tuple[ObjectVersion, PutTimings]:
    """Store a whole small body as the key's new version: stage, hash, seal and promote in
    one executor hop (``PayloadStore.store_small``), then commit as ``store_object`` does.

    In strict mode, where the OS can (``engine.payload_sync``), the hop writes and renames
    the file without syncing it and the PUT then waits for a ``syncfs`` shared with the
    other small PUTs in flight (``service.storage.groupsync``); a failed sync answers every
    PUT it covered with the contract's storage error and leaves their payloads to the GC.
    ``timings.promote`` covers the hop and the shared sync."""
    timings = PutTimings()
    engine.ensure_writable()
    payload_id = engine.store.next_payload_id()
    group = engine.payload_sync
    started = time.perf_counter()
    try:
        if group is None and engine.config.durability == "strict":
            # per-file fsyncs: each on its own pool thread, so one slow sync delays no other
            staged = await engine.run_blocking(
                engine.store.store_small, body, payload_id, intent.expected_sha256
            )
        elif group is None:
            staged = await engine.small_writes.run(
                engine.store.store_small, body, payload_id, intent.expected_sha256
            )
        else:
            ticket = group.ticket()
            staged = await engine.small_writes.run(
                partial(engine.store.store_small, synced=False),
                body,
                payload_id,
                intent.expected_sha256,
            )
            await group.sync(ticket)
    except DigestMismatch:
        raise ApiError("BadDigest", "the body's SHA-256 does not match X-Checksum-Sha256") from None
    except OSError as exc:
        raise storage_failure(exc) from None
    timings.promote = time.perf_counter() - started
    version = await commit_stored(engine, intent, payload_id, staged, timings)
    return version, timings


async def commit_stored(
    engine: Engine,
    intent: PutIntent,
    payload_id: str,
    staged: StagedPayload,
    timings: PutTimings,
) -> ObjectVersion:
    """Commit a promoted payload as the key's new version (``ObjectStored``); a refused
    commit releases the payload."""
    event = records.object_stored(
        bucket=intent.bucket,
        key=intent.key,
        payload_id=payload_id,
        size=staged.size,
        content_type=intent.content_type,
        sha256=staged.sha256,
        custom_metadata=dict(intent.custom_metadata),
        version_token=new_version_token(),
        if_none_match=intent.if_none_match,
        if_match=intent.if_match,
        at=now_ms(),
    )
    started = time.perf_counter()
    try:
        outcome = await engine.commit(event)
    except ServiceError as error:
        if error.code == "ServiceUnavailable":
            # Refused before anything reached the journal: the payload is ours to remove.
            engine.release_payloads([payload_id])
        raise
    timings.journal_commit = time.perf_counter() - started
    if not outcome.ok or not isinstance(outcome.value, ObjectVersion):
        raise outcome_error(outcome)
    return outcome.value


async def store_server_made(engine: Engine, intent: PutIntent, data: bytes | str) -> ObjectVersion:
    """Store bytes the server made (an image variant, a thumbnail, a playlist or a media
    segment) as ``intent.key``, through the same staging, flush, promote and commit as a PUT.

    ``data`` is the bytes themselves, or the path of a scratch file, which is read through
    the file-system seam 256 KiB at a time so a large output never sits in memory. The
    precheck (bucket, key, conditions, quota) runs first, with the size known up front.
    """
    size = (
        len(data)
        if isinstance(data, bytes)
        else await engine.run_blocking(_file_size, engine, data)
    )
    precheck_put(engine, replace(intent, content_length=size))
    if isinstance(data, bytes) and size <= SMALL_PUT_BYTES:
        version, _ = await store_small_object(engine, intent, data)
        return version
    upload = await StagingUpload.start(engine.store, engine.executor)
    try:
        async for chunk in _chunks(engine, data):
            await upload.write(chunk)
        staged = await upload.finish()
    except OSError as exc:
        await upload.abort()
        raise storage_failure(exc) from None
    except BaseException:
        await upload.abort()
        raise
    version, _ = await store_object(engine, intent, staged)
    return version


def _file_size(engine: Engine, path: str) -> int:
    return engine.fs.stat(path).size


async def _chunks(engine: Engine, data: bytes | str) -> AsyncIterator[bytes]:
    """``data`` (bytes, or a scratch file's path) in chunks of ``CHUNK_BYTES``."""
    if isinstance(data, bytes):
        for offset in range(0, len(data), CHUNK_BYTES):
            yield data[offset : offset + CHUNK_BYTES]
        return
    source = await engine.run_blocking(engine.fs.open_read, data)
    try:
        while chunk := await engine.run_blocking(source.read, CHUNK_BYTES):
            yield chunk
    finally:
        await engine.run_blocking(source.close)


async def delete_object(engine: Engine, bucket: str, key: str, version_id: str | None) -> None:
    """Delete the key (a delete marker under versioning) or one version for good (423
    ObjectLocked while its retention or legal hold keeps it)."""
    require_bucket(engine, bucket)
    require_key(key)
    engine.ensure_writable()
    if version_id is None:
        current = engine.state.head_object(bucket, key, None)
        if current is None or current.is_delete_marker:
            raise ApiError("NoSuchKey", f"no object {key!r} in bucket {bucket!r}")
    else:
        version = engine.state.head_object(bucket, key, version_id)
        if version is None:
            raise ApiError("NoSuchVersion", f"no version {version_id!r} of {key!r}")
        # Refused now without a record; ``apply`` judges again with the record's time.
        if problem := engine.state.locks.removal_problem(version, now_ms()):
            raise ApiError("ObjectLocked", problem)
    outcome = await engine.commit(
        records.object_deleted(
            bucket=bucket,
            key=key,
            version_id=version_id,
            version_token=new_version_token(),
            at=now_ms(),
        )
    )
    if not outcome.ok:
        raise outcome_error(outcome)


def read_window(store: PayloadStore, payload_id: str, start: int, length: int) -> bytes:
    """Read ``length`` bytes of a payload from ``start`` (blocking: run on the executor)."""
    payload = store.open_payload(payload_id)
    try:
        payload.seek(start)
        return payload.read(length)
    finally:
        payload.close()


def cached_window(engine: Engine, payload_id: str, start: int, length: int) -> bytes | None:
    """``length`` bytes of a payload from ``start`` when the small-payload cache holds it."""
    body = engine.payload_cache.get(payload_id)
    if body is None:
        return None
    if start == 0 and length >= len(body):
        return body
    return body[start : start + length]


def _span(engine: Engine, payload_size: int, start: int, length: int) -> tuple[int, int]:
    """What to read for a window: the whole payload when the cache would keep it."""
    if engine.payload_cache.accepts(payload_size):
        return 0, payload_size
    return start, length


def _keep(
    engine: Engine, payload_id: str, payload_size: int, data: bytes, start: int, length: int
) -> bytes:
    """Keep a whole body read for the cache, and cut the asked window out of it."""
    if not engine.payload_cache.accepts(payload_size):
        return data
    if len(data) == payload_size:
        engine.payload_cache.put(payload_id, data)
    if start == 0 and length >= len(data):
        return data
    return data[start : start + length]


def read_window_now(
    engine: Engine, payload_id: str, payload_size: int, start: int, length: int
) -> bytes | None:
    """The window from the body cache, or read on the event loop from the payload's open
    descriptor when the page cache has it (``fsseam.fs.pread_cached``); None when
    only the executor can read it. Event-loop thread only."""
    cached = cached_window(engine, payload_id, start, length)
    if cached is not None:
        return cached
    descriptors = engine.payload_cache.descriptors
    file = descriptors.acquire(payload_id)
    if file is None:
        return None
    try:
        span_start, span_length = _span(engine, payload_size, start, length)
        data = pread_cached(file, span_start, span_length)
    finally:
        descriptors.release(payload_id, file)
    if data is None:
        return None
    return _keep(engine, payload_id, payload_size, data, start, length)


def _open_and_read(store: PayloadStore, payload_id: str, start: int, length: int) -> OpenRead:
    """Open a payload and read a span of it (blocking: run on the executor)."""
    payload = store.open_payload(payload_id)
    if payload.fileno() is None:
        try:
            payload.seek(start)
            return OpenRead(None, payload.read(length))
        finally:
            payload.close()
    try:
        return OpenRead(payload, pread(payload, start, length))
    except BaseException:
        payload.close()
        raise


@dataclass(frozen=True, slots=True)
class OpenRead:
    """What ``_open_and_read`` returns: the still open file (None if closed) and the bytes."""

    file: ReadableFile | None
    data: bytes


async def read_small_window(
    engine: Engine, payload_id: str, payload_size: int, start: int, length: int
) -> bytes:
    """``length`` bytes of a payload from ``start``: at once when ``read_window_now`` can,
    else on the executor through the payload's open descriptor (opened and kept on the
    first read). A cacheable body is read whole and kept. Event-loop thread only."""
    now = read_window_now(engine, payload_id, payload_size, start, length)
    if now is not None:
        return now
    span_start, span_length = _span(engine, payload_size, start, length)
    descriptors = engine.payload_cache.descriptors
    file = descriptors.acquire(payload_id)
    if file is not None:
        try:
            data = await engine.run_blocking(pread, file, span_start, span_length)
        finally:
            descriptors.release(payload_id, file)
    else:
        opened = await engine.run_blocking(
            _open_and_read, engine.store, payload_id, span_start, span_length
        )
        data = opened.data
        if opened.file is not None:
            if descriptors.adopt(payload_id, opened.file):
                descriptors.release(payload_id, opened.file)
            else:
                await engine.run_blocking(opened.file.close)
    return _keep(engine, payload_id, payload_size, data, start, length)


def resolve_version(engine: Engine, bucket: str, key: str, version_id: str | None) -> ObjectVersion:
    """The version a GET/HEAD reads, or the contract's 404."""
    require_bucket(engine, bucket)
    require_key(key)
    version = engine.state.head_object(bucket, key, version_id)
    if version_id is not None:
        if version is None:
            raise ApiError("NoSuchVersion", f"no version {version_id!r} of {key!r}")
        if version.is_delete_marker:
            raise ApiError("MethodNotAllowed", "the version is a delete marker")
        refuse_quarantined(engine, version)
        return version
    if version is None or version.is_delete_marker:
        raise ApiError("NoSuchKey", f"no object {key!r} in bucket {bucket!r}")
    refuse_quarantined(engine, version)
    return version


def refuse_quarantined(engine: Engine, version: ObjectVersion) -> None:
    """An integrity error instead of bytes that failed verification after a power loss."""
    if version.payload_id is not None and version.payload_id in engine.quarantined:
        raise ApiError(
            "InternalError",
            "the stored bytes of this version are corrupt (their size or SHA-256 no longer "
            "match what was written) and are quarantined; write the object again",
        )
