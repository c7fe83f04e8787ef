"""Batch upload: every regular file of a tar stream stored as one object, as PUTs of them would.

Many small files cost one request each in HTTP overhead alone (the client's and the server's
CPU per request, not the bytes), so ``POST /api/v1/buckets/{bucket}/batch`` takes a tar stream
(POSIX ustar or pax, GNU long names) and stores each regular-file member as the object
``prefix + name`` (docs/batch.md). The stream is read by our own ``TarReader``
(``service.ops.tar_reader``), which never trusts a declared size: a member's data is only
ever what the body carries.

Two phases, so that a body that breaks changes nothing:

1. ``stage_members`` (blocking; one thread reads the stream): each member is checked as a PUT
   of it would be before its body (key, type, content type, custom metadata, declared
   SHA-256, declared size against ``SERVICE_MAX_OBJECT_BYTES`` and, through ``admit``, the
   bucket's quota, ``service.ops.batch_quota``), then staged, hashed, sealed and promoted
   under a fresh payload id through the PUT path's own ``PayloadStore.store_small`` or
   ``create_staging``/``promote_checked``. In strict mode, where the engine shares a
   ``syncfs`` (``engine.payload_sync``), nothing is synced per file: one shared sync covers
   the whole batch; else every file is synced as a PUT's is. A member that fails its own
   checks (a link, a device, a sparse file, a bad key...) becomes a ``MemberFailure`` and its
   data is skipped, never stored. A stream that is not a well-formed tar (``TarFormatError``:
   a bad header, number, encoding or checksum, cut short, more than 10,000 members, an
   extended header over 64 KiB), a client that went away or a storage error: every payload
   promoted so far is removed (none was committed, so none is referenced) and the request
   fails as a whole.
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
store (thread-safe), its stream and ``admit`` (which hops to the event loop);
``store_batch`` is event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from fsseam import crashpoints
from service.common.api_errors import ApiError, ServiceError
from service.common.header_fields import guess_content_type, validate_custom_metadata
from service.common.sizes import CHUNK_BYTES
from service.common.wire import (
    BATCH_PAX_CONTENT_TYPE,
    BATCH_PAX_META_PREFIX,
    BATCH_PAX_SHA256,
    MAX_BATCH_MEMBERS,
)
from service.engine.core import Engine
from service.meta import ObjectVersion
from service.ops.batch_quota import Admit, quota_gate
from service.ops.objects import (
    SMALL_PUT_BYTES,
    PutIntent,
    PutTimings,
    commit_stored,
    precheck_put,
    require_key,
    storage_failure,
    validate_content_type,
)
from service.ops.tar_reader import (
    ARCHIVE_END,
    MEMBER_END,
    NEED_DATA,
    Data,
    Event,
    Kind,
    Member,
    TarFormatError,
    TarReader,
)
from service.storage import DigestMismatch, PayloadStore, StagedPayload

T = TypeVar("T")

PAX_CONTENT_TYPE = BATCH_PAX_CONTENT_TYPE
PAX_SHA256 = BATCH_PAX_SHA256
PAX_META_PREFIX = BATCH_PAX_META_PREFIX
STREAM_BUFFER = CHUNK_BYTES
"""Bytes asked of the stream at a time: many small members per read, and a large member's
data written in the PUT path's buffer size."""
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
    error: ServiceError


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


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What one batch may hold."""

    max_member_bytes: int
    max_members: int = MAX_BATCH_MEMBERS
    """Members (files, directories and refused entries) one batch may hold; more is 400."""


def member_name(name: str) -> str:
    """A member's name as a key suffix: a leading ``./`` (``tar -C dir .``) dropped.

    >>> member_name("./a/b.txt"), member_name("a/./b"), member_name("././c")
    ('a/b.txt', 'a/./b', 'c')
    """
    while name.startswith("./"):
        name = name[2:]
    return name


def member_intent(bucket: str, prefix: str, member: Member, limits: BatchLimits) -> PutIntent:
    """What a PUT of this member would declare, checked as the PUT checks it before its body
    (the quota and ``precheck_put``'s state checks come later, on the event loop); raises
    ``ApiError``."""
    key = prefix + member_name(member.name)
    require_key(key)
    if member.kind is not Kind.FILE:
        raise ApiError(
            "InvalidArgument",
            f"{member.refusal or 'this member'} is not stored: only regular files are",
        )
    if member.size > limits.max_member_bytes:
        raise ApiError("EntityTooLarge", "the member is larger than the server accepts")
    records = member.records
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
        content_length=member.size,
    )


class _Events:
    """The reader's events, the stream read whenever the reader needs more bytes."""

    def __init__(self, reader: TarReader, source: ByteSource) -> None:
        self.reader = reader
        self._source = source

    def next(self) -> Event:
        while (event := self.reader.next_event()) is NEED_DATA:
            chunk = self._source.read(STREAM_BUFFER)
            if chunk:
                self.reader.feed(chunk)
            else:
                self.reader.end()  # then the reader never needs data again
        return event

    def data(self) -> Iterator[bytes]:
        """The current member's data to its end."""
        while isinstance(event := self.next(), Data):
            yield event.data
        if event is not MEMBER_END:
            raise TarFormatError("a member ended without its end")  # not reached: the reader's rule

    def drain(self) -> None:
        """Read what follows the end of the archive (padding), so the body is consumed."""
        while self._source.read(STREAM_BUFFER):
            pass


def _stage_body(
    store: PayloadStore, data: Iterator[bytes], intent: PutIntent, payload_id: str, synced: bool
) -> StagedPayload:
    """Store one member's data as ``payload_id`` (blocking): whole when small, as a small PUT
    is, else streamed through a staging file a buffer at a time, as a PUT's body is."""
    size = intent.content_length or 0
    if size <= SMALL_PUT_BYTES:
        return store.store_small(b"".join(data), payload_id, intent.expected_sha256, synced=synced)
    staging = store.create_staging(synced=synced)
    try:
        for piece in data:
            staging.write(piece)
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
    admit: Admit | None = None,
) -> list[Staged]:
    """Read the tar stream ``source`` to its end and stage every member (blocking; see the
    module docstring). ``admit(key, size)`` counts a member against the quota before any of
    its bytes is staged (None: no quota). On any failure of the stream or the storage, every
    payload promoted here is removed before the error propagates: an ``ApiError`` for a
    stream that is not a well-formed tar, the contract's storage error for an ``OSError``."""
    entries: list[Staged] = []
    try:
        _read_members(store, source, bucket, prefix, limits, synced, admit, entries)
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
    admit: Admit | None,
    entries: list[Staged],
) -> None:
    events = _Events(TarReader(max_members=limits.max_members), source)
    try:
        while (event := events.next()) is not ARCHIVE_END:
            if not isinstance(event, Member):
                continue  # the end of a member whose data was skipped
            if event.kind is Kind.DIRECTORY or not member_name(event.name):
                events.reader.skip()
                continue
            entries.append(
                _stage_member(store, events, event, bucket, prefix, limits, synced, admit)
            )
        events.drain()
    except TarFormatError as error:
        raise ApiError("InvalidArgument", f"the body is not a valid tar stream: {error}") from None
    except OSError as exc:
        raise storage_failure(exc) from None


def _stage_member(
    store: PayloadStore,
    events: _Events,
    member: Member,
    bucket: str,
    prefix: str,
    limits: BatchLimits,
    synced: bool,
    admit: Admit | None,
) -> Staged:
    try:
        intent = member_intent(bucket, prefix, member, limits)
        if admit is not None:
            admit(intent.key, member.size)
    except ServiceError as error:
        events.reader.skip()  # refused before a byte of it was read: skipped, never stored
        return MemberFailure(prefix + member_name(member.name), error)
    payload_id = store.next_payload_id()
    try:
        staged = _stage_body(store, events.data(), intent, payload_id, synced)
    except DigestMismatch:
        mismatch = ApiError("BadDigest", f"the member's SHA-256 does not match {PAX_SHA256}")
        return MemberFailure(intent.key, mismatch)
    if staged.size != member.size:  # the reader counts the data; never trust a count twice
        with contextlib.suppress(OSError):
            store.remove([payload_id])
        raise ApiError("InvalidArgument", "the body is not a valid tar stream: short member")
    return StagedMember(intent, payload_id, staged)


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
    entries = await stage_batch(engine, bucket, prefix, source, limits, run=run)
    return await _commit_all(engine, entries)


async def stage_batch(
    engine: Engine,
    bucket: str,
    prefix: str,
    source: ByteSource,
    limits: BatchLimits,
    *,
    run: Runner[list[Staged]] | None = None,
) -> list[Staged]:
    """Phase 1 of ``store_batch``: every member of ``source`` staged and promoted, durable
    (the shared sync ran), none committed yet. Also how a media fleet worker's outputs
    arrive (``service.media.fleet_outputs``), committed as open multipart uploads."""
    engine.ensure_writable()
    group = engine.payload_sync
    ticket = group.ticket() if group is not None else 0
    admit = quota_gate(engine, bucket)

    def stage() -> list[Staged]:
        return stage_members(
            engine.store, source, bucket, prefix, limits, synced=group is None, admit=admit
        )

    entries = await (run or engine.run_blocking)(stage)
    promoted = [entry.payload_id for entry in entries if isinstance(entry, StagedMember)]
    if group is not None and promoted:
        try:
            await group.sync(ticket)
        except OSError as exc:
            await _remove_uncommitted(engine, promoted)
            raise storage_failure(exc) from None
    return entries


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
        except ServiceError as error:
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
        elif isinstance(failure, ServiceError):
            outcomes[index] = MemberFailure(keys[index], failure)
        else:
            raise failure
    return [outcome for outcome in outcomes if outcome is not None]
