"""Batch upload: every regular file of a tar stream stored as one object, as PUTs of them would.

Many small files cost one request each in HTTP overhead alone (the client's and the server's
CPU per request, not the bytes), so ``POST /api/v1/buckets/{bucket}/batch`` takes a tar stream
(POSIX ustar or pax, as Python's ``tarfile`` reads it in stream mode ``r|``) and stores each
regular-file member as the object ``prefix + name`` (docs/batch.md).

Two phases, so that a body that breaks changes nothing:

1. ``stage_members`` (blocking; one thread reads the stream): each member is checked as a PUT
   of it would be before its body (key, content type, custom metadata, declared SHA-256,
   size), then staged, hashed, sealed and promoted under a fresh payload id through the
   PUT path's own ``PayloadStore.store_small`` or ``create_staging``/``promote``. In strict
   mode, where the engine shares a ``syncfs`` (``engine.payload_sync``), nothing is synced
   per file: one shared sync covers the whole batch; else every file is synced as a PUT's
   is. A member that fails its own checks becomes a ``MemberFailure`` and its bytes are
   skipped. A stream that is not a valid tar (bad header checksum, cut short, no end-of-
   archive block), too many members, a client that went away or a storage error: every
   payload promoted so far is removed (none was committed, so none is referenced) and the
   request fails as a whole.
2. ``store_batch`` (event loop): the shared sync, then each staged member passes the PUT's
   ``precheck_put`` (bucket, quota) and is committed with the PUT's ``commit_stored``, all
   commits in flight together so the journal's group commit (or the writer, from a worker
   process) takes them in few batches. Each commit is an ordinary ``ObjectStored``: events,
   webhooks, versioning, usage and lifecycle see one object creation per member. A commit
   refused by ``apply`` (a quota crossed by an earlier member of the same batch, the bucket
   gone) is that member's failure, as for a PUT that lost a race.

Pax records name a member's extras: ``SERVICE.content_type`` (else guessed from the key, as
for a PUT without ``Content-Type``), ``SERVICE.sha256`` (hex; verified, BadDigest on
mismatch) and ``SERVICE.meta.<name>`` (custom metadata, the PUT's rules).

Thread-safety: ``stage_members`` runs on one thread of its own and touches only the payload
store (thread-safe) and its stream; ``store_batch`` is event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tarfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from fsseam import crashpoints
from service.common.api_errors import ApiError
from service.common.header_fields import guess_content_type, validate_custom_metadata
from service.common.wire import (
    BATCH_PAX_CONTENT_TYPE,
    BATCH_PAX_META_PREFIX,
    BATCH_PAX_SHA256,
    MAX_BATCH_MEMBERS,
)
from service.engine.core import Engine
from service.meta import ObjectVersion
from service.ops.objects import (
    CHUNK_BYTES,
    SMALL_PUT_BYTES,
    PutIntent,
    PutTimings,
    commit_stored,
    precheck_put,
    require_key,
    storage_failure,
    validate_content_type,
)
from service.storage import DigestMismatch, PayloadStore, StagedPayload

T = TypeVar("T")

PAX_CONTENT_TYPE = BATCH_PAX_CONTENT_TYPE
PAX_SHA256 = BATCH_PAX_SHA256
PAX_META_PREFIX = BATCH_PAX_META_PREFIX
TAR_BLOCK = 512
STREAM_BUFFER = 64 * 1024
"""``tarfile``'s read size on the stream: a few small members per read."""
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class StagedMember:
    """A member whose body is stored as ``payload_id`` (durable once the batch's sync ran),
    awaiting its commit."""

    intent: PutIntent
    payload_id: str
    staged: StagedPayload


@dataclass(frozen=True, slots=True)
class MemberFailure:
    """A member refused by its own checks; nothing of it was kept."""

    key: str
    error: ApiError


@dataclass(frozen=True, slots=True)
class MemberStored:
    """A member committed as ``version``."""

    version: ObjectVersion


class ByteSource(Protocol):
    """What the tar stream is read from: a binary file or the HTTP layer's body pipe."""

    def read(self, size: int = -1, /) -> bytes: ...


Staged = StagedMember | MemberFailure
Outcome = MemberStored | MemberFailure
Runner = Callable[[Callable[[], T]], Awaitable[T]]


MAX_EXTENDED_HEADER = 64 * 1024
"""Bytes of one pax or GNU long-name header: ``tarfile`` reads such a header into memory
whole, and a member's key (1 KiB) and metadata (8 KiB) need far less."""
_EXTENDED_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


class _BoundedTarInfo(tarfile.TarInfo):
    """A ``TarInfo`` that refuses an extended header larger than ``MAX_EXTENDED_HEADER``
    before ``tarfile`` reads it into memory (else one request could fill the server's RAM
    with a header as large as the body limit)."""

    def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED_TYPES and self.size > MAX_EXTENDED_HEADER:
            raise tarfile.HeaderError(
                f"an extended header of {self.size} bytes (at most {MAX_EXTENDED_HEADER})"
            )
        member: tarfile.TarInfo = super()._proc_member(archive)  # type: ignore[misc]
        return member


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What one batch may hold."""

    max_member_bytes: int
    max_members: int = MAX_BATCH_MEMBERS
    """Members (files, directories and refused entries) one batch may hold; more is 400."""


def member_name(info: tarfile.TarInfo) -> str:
    """The member's name as a key suffix: a leading ``./`` (``tar -C dir .``) dropped.

    >>> member_name(tarfile.TarInfo("./a/b.txt")), member_name(tarfile.TarInfo("a/./b"))
    ('a/b.txt', 'a/./b')
    """
    name = info.name
    while name.startswith("./"):
        name = name[2:]
    return name


def member_intent(
    bucket: str, prefix: str, info: tarfile.TarInfo, limits: BatchLimits
) -> PutIntent:
    """What a PUT of this member would declare, checked as the PUT checks it before its body
    (``precheck_put``'s state checks come later, on the event loop); raises ``ApiError``."""
    key = prefix + member_name(info)
    require_key(key)
    if not info.isreg():
        raise ApiError(
            "InvalidArgument", "only regular files are stored (links and devices are not)"
        )
    if info.size > limits.max_member_bytes:
        raise ApiError("EntityTooLarge", "the member is larger than the server accepts")
    records = info.pax_headers
    content_type = records.get(PAX_CONTENT_TYPE) or guess_content_type(key)
    validate_content_type(content_type)
    expected = records.get(PAX_SHA256)
    if expected is not None:
        expected = expected.strip().lower()
        if not _SHA256_HEX.match(expected):
            raise ApiError("InvalidArgument", f"{PAX_SHA256} must be 64 hex characters")
    metadata = {
        name[len(PAX_META_PREFIX) :]: value
        for name, value in records.items()
        if name.startswith(PAX_META_PREFIX)
    }
    return PutIntent(
        bucket=bucket,
        key=key,
        content_type=content_type,
        custom_metadata=validate_custom_metadata(metadata),
        expected_sha256=expected,
        content_length=info.size,
    )


def _stage_body(
    store: PayloadStore, source: ByteSource, intent: PutIntent, payload_id: str, synced: bool
) -> StagedPayload:
    """Store one member's body as ``payload_id`` (blocking): whole when small, as a small PUT
    is, else streamed through a staging file a buffer at a time, as a PUT's body is."""
    size = intent.content_length or 0
    if size <= SMALL_PUT_BYTES:
        return store.store_small(
            source.read(size), payload_id, intent.expected_sha256, synced=synced
        )
    staging = store.create_staging(synced=synced)
    try:
        while chunk := source.read(CHUNK_BYTES):
            staging.write(chunk)
        staged = staging.finish()
    except BaseException:
        staging.discard()
        raise
    return store.promote_checked(staged, payload_id, intent.expected_sha256, synced=synced)


def stage_members(
    store: PayloadStore,
    source: ByteSource,
    bucket: str,
    prefix: str,
    limits: BatchLimits,
    *,
    synced: bool,
) -> list[Staged]:
    """Read the tar stream ``source`` to its end and stage every member (blocking; see the
    module docstring). On any failure of the stream or the storage, every payload promoted
    here is removed before the error propagates: an ``ApiError`` for a stream that is not a
    valid tar or holds too many members, the contract's storage error for an ``OSError``."""
    entries: list[Staged] = []
    try:
        _read_members(store, source, bucket, prefix, limits, synced, entries)
    except BaseException:
        promoted = [entry.payload_id for entry in entries if isinstance(entry, StagedMember)]
        with contextlib.suppress(OSError):
            store.remove(promoted)
        raise
    crashpoints.hit("batch.staged")
    return entries


def _read_members(
    store: PayloadStore,
    source: ByteSource,
    bucket: str,
    prefix: str,
    limits: BatchLimits,
    synced: bool,
    entries: list[Staged],
) -> None:
    tail = _TailReader(source)
    try:
        with tarfile.open(  # type: ignore[call-overload]
            fileobj=tail, mode="r|", bufsize=STREAM_BUFFER, tarinfo=_BoundedTarInfo
        ) as archive:
            members = 0
            for info in archive:
                members += 1
                if members > limits.max_members:
                    raise ApiError(
                        "InvalidArgument", f"a batch holds at most {limits.max_members} members"
                    )
                if info.isdir() or not member_name(info):
                    continue
                entries.append(_stage_member(store, archive, info, bucket, prefix, limits, synced))
            end = archive.offset
        # tarfile ends an archive quietly at a damaged header or a body cut at a member's
        # end; only the end-of-archive block (512 zero bytes) where it stopped says "whole".
        if tail.block_at(end) != bytes(TAR_BLOCK):
            raise ApiError(
                "InvalidArgument",
                "the body is not a valid tar stream: a damaged header, or no end-of-archive "
                "block (cut short)",
            )
        while tail.read(STREAM_BUFFER):
            pass  # padding after the end-of-archive blocks
    except tarfile.TarError as error:
        raise ApiError("InvalidArgument", f"the body is not a valid tar stream: {error}") from None
    except OSError as exc:
        raise storage_failure(exc) from None


def _stage_member(
    store: PayloadStore,
    archive: tarfile.TarFile,
    info: tarfile.TarInfo,
    bucket: str,
    prefix: str,
    limits: BatchLimits,
    synced: bool,
) -> Staged:
    try:
        intent = member_intent(bucket, prefix, info, limits)
    except ApiError as error:
        return MemberFailure(prefix + member_name(info), error)
    body = archive.extractfile(info)
    assert body is not None  # a regular file
    payload_id = store.next_payload_id()
    try:
        staged = _stage_body(store, body, intent, payload_id, synced)
    except DigestMismatch:
        mismatch = ApiError("BadDigest", f"the member's SHA-256 does not match {PAX_SHA256}")
        return MemberFailure(intent.key, mismatch)
    if staged.size != info.size:  # tarfile raises on a short body; never trust a count twice
        with contextlib.suppress(OSError):
            store.remove([payload_id])
        raise ApiError("InvalidArgument", "the body is not a valid tar stream: short member")
    return StagedMember(intent, payload_id, staged)


class _TailReader:
    """``source`` read through, keeping its last bytes for the end-of-archive check."""

    KEEP = 2 * STREAM_BUFFER + 2 * TAR_BLOCK
    """More than ``tarfile`` reads ahead of the header it parses."""

    def __init__(self, source: ByteSource) -> None:
        self._source = source
        self._tail = bytearray()
        self._tail_start = 0

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        self._tail += data
        excess = len(self._tail) - self.KEEP
        if excess > 0:
            del self._tail[:excess]
            self._tail_start += excess
        return data

    def block_at(self, offset: int) -> bytes | None:
        """The (up to) 512 bytes read at ``offset``, if still kept."""
        start = offset - self._tail_start
        if start < 0:
            return None
        return bytes(self._tail[start : start + TAR_BLOCK])


async def store_batch(
    engine: Engine,
    bucket: str,
    prefix: str,
    source: ByteSource,
    limits: BatchLimits,
    *,
    run: Runner[list[Staged]] | None = None,
) -> list[Outcome]:
    """Store every member of the tar stream ``source`` (see the module docstring) and return
    each one's outcome in stream order. ``run`` runs the blocking staging off the event loop
    (default: the engine's executor; the HTTP layer gives it a thread of its own, since it
    waits for the client's bytes)."""
    engine.ensure_writable()
    group = engine.payload_sync
    ticket = group.ticket() if group is not None else 0

    def stage() -> list[Staged]:
        return stage_members(engine.store, source, bucket, prefix, limits, synced=group is None)

    entries = await (run or engine.run_blocking)(stage)
    promoted = [entry.payload_id for entry in entries if isinstance(entry, StagedMember)]
    if group is not None and promoted:
        try:
            await group.sync(ticket)
        except OSError as exc:
            await _remove_uncommitted(engine, promoted)
            raise storage_failure(exc) from None
    return await _commit_all(engine, entries)


async def _remove_uncommitted(engine: Engine, payload_ids: list[str]) -> None:
    """Remove payloads no commit named (best effort: the orphan sweep takes what is left)."""
    if payload_ids:
        with contextlib.suppress(OSError):
            await engine.run_blocking(engine.store.remove, payload_ids)


async def _commit_all(engine: Engine, entries: list[Staged]) -> list[Outcome]:
    """Check and commit every staged member, all commits in flight at once."""
    outcomes: list[Outcome | None] = []
    commits: dict[int, asyncio.Future[ObjectVersion]] = {}
    refused: list[str] = []
    keys: dict[int, str] = {}
    for entry in entries:
        if isinstance(entry, MemberFailure):
            outcomes.append(entry)
            continue
        try:
            precheck_put(engine, replace(entry.intent, content_length=entry.staged.size))
        except ApiError as error:
            refused.append(entry.payload_id)
            outcomes.append(MemberFailure(entry.intent.key, error))
            continue
        keys[len(outcomes)] = entry.intent.key
        commits[len(outcomes)] = asyncio.ensure_future(
            commit_stored(engine, entry.intent, entry.payload_id, entry.staged, PutTimings())
        )
        outcomes.append(None)
    await _remove_uncommitted(engine, refused)
    if commits:
        await asyncio.wait(commits.values())
    for index, future in commits.items():
        failure = future.exception()
        if failure is None:
            outcomes[index] = MemberStored(future.result())
        elif isinstance(failure, ApiError):
            outcomes[index] = MemberFailure(keys[index], failure)
        else:
            raise failure
    return [outcome for outcome in outcomes if outcome is not None]
