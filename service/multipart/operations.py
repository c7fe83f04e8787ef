"""Resumable multipart uploads: sessions, parts, complete (join) and abort.

Transport-free. A part of the session's recommended size (or a shorter last one) is written
once, straight into its upload's file at its final offset (``service.multipart.in_place``),
and ``complete`` seals that file into the object. Other parts are ordinary payload files
referenced by the session's records; either way they survive restarts. For an upload of
such parts only, the contiguous
prefix of them is assembled into one file with its SHA-256 state at every part boundary
(``service.multipart.assembly``), so ``complete`` mostly appends the parts not assembled
yet, finishes the hash and seals; without a usable assembly (after a restart, or a manifest
that skips part 1) it joins the named parts in one pass off the event loop, as before.
Either way it promotes the result and commits one ``UploadCompleted`` record; the parts are
released only by that commit, so a crash before it leaves the session open and completable.

While a session is being completed, part uploads and aborts on it answer 409 InvalidState:
the join must read exactly the parts the record will name.
"""

from __future__ import annotations

import itertools
import math
import os
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from fsseam import crashpoints
from service.common.api_errors import ApiError
from service.common.header_fields import (
    guess_content_type,
    require_content_type,
    validate_custom_metadata,
)
from service.common.numbers import require_int
from service.common.timefmt import now_ms
from service.common.wire import MAX_PART_NUMBER, MIN_PART_NUMBER, QUERY_PART_NUMBER
from service.engine.core import Engine
from service.meta import ObjectVersion, PartInfo, UploadSession, records
from service.multipart.uploads import Uploads
from service.ops.buckets import outcome_error, require_bucket
from service.ops.objects import (
    new_version_token,
    promote_staged,
    require_key,
    storage_failure,
)
from service.storage import StagedPayload
from service.storage.direct import DirectStaged, is_direct_id

MIB = 1024 * 1024
DEFAULT_PART_SIZE = 8 * MIB
MAX_PARTS_IN_MANIFEST = MAX_PART_NUMBER


MIN_DECLARED_PART_SIZE = MIB
MAX_DECLARED_PART_SIZE = 5 * 1024 * MIB


def recommended_part_size(declared_size: int | None, part_size: int | None = None) -> int:
    """The client's declared ``part_size`` (else 8 MiB), or larger (whole MiB) so that
    10,000 parts cover ``declared_size``. Parts of this size are written in place.

    >>> recommended_part_size(None) == 8 * MIB
    True
    >>> recommended_part_size(5 * 1024**4) // MIB
    525
    >>> recommended_part_size(1024**3, 32 * MIB) // MIB
    32
    """
    base = DEFAULT_PART_SIZE if part_size is None else part_size
    if declared_size is None:
        return base
    needed = math.ceil(declared_size / MAX_PART_NUMBER / MIB) * MIB
    return max(base, needed)


def optional_size(
    body: Mapping[str, Any], name: str, low: int, high: int | None = None
) -> int | None:
    """An optional integer field of an ``init`` body, ``low..high`` (400 otherwise)."""
    value = body.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bounds = "a non-negative integer" if high is None and low == 0 else f"{low}..{high}"
        raise ApiError("InvalidArgument", f"{name} must be {bounds}")
    return value


def max_parallel_parts() -> int:
    """How many parts a client should send at once, from the machine's core count."""
    return min(16, max(4, (os.cpu_count() or 2) * 2))


def parse_part_number(raw: str | None) -> int:
    if raw is None:
        raise ApiError("InvalidPartNumber", f"partNumber must be an integer 1..{MAX_PART_NUMBER}")
    return require_int(
        raw, QUERY_PART_NUMBER, MIN_PART_NUMBER, MAX_PART_NUMBER, code="InvalidPartNumber"
    )


def open_session(engine: Engine, upload_id: str) -> UploadSession:
    """The open, unexpired session ``upload_id`` or 404 NoSuchUpload."""
    session = engine.state.get_upload(upload_id)
    if session is None or session.expires_at <= now_ms():
        raise ApiError("NoSuchUpload", "no such upload, or it expired")
    return session


def stored_parts(engine: Engine, upload_id: str) -> dict[int, PartInfo]:
    """The session's stored parts by number."""
    return {part.part_number: part for part in engine.state.upload_parts(upload_id)}


def ensure_not_completing(uploads: Uploads, upload_id: str) -> None:
    if upload_id in uploads.completing:
        raise ApiError("InvalidState", "the upload is being completed")


async def start_upload(engine: Engine, owner: str, body: Mapping[str, Any]) -> UploadSession:
    """Open a session from a ``POST /multipart/init`` body."""
    bucket, key = body.get("bucket"), body.get("key")
    if not isinstance(bucket, str) or not isinstance(key, str):
        raise ApiError("InvalidArgument", "bucket and key are required strings")
    require_bucket(engine, bucket)
    require_key(key)
    declared_type = body.get("content_type")
    content_type = (
        guess_content_type(key)
        if declared_type in (None, "")
        else require_content_type(declared_type)
    )
    metadata = validate_custom_metadata(body.get("custom_metadata") or {})
    declared = optional_size(body, "size_bytes", 0)
    part_size = optional_size(body, "part_size", MIN_DECLARED_PART_SIZE, MAX_DECLARED_PART_SIZE)
    upload_id = secrets.token_hex(16)
    at = now_ms()
    outcome = await engine.commit(
        records.upload_started(
            upload_id=upload_id,
            bucket=bucket,
            key=key,
            owner=owner,
            content_type=content_type,
            custom_metadata=metadata,
            recommended_part_size=recommended_part_size(declared, part_size),
            at=at,
            expires_at=at + int(engine.config.multipart_ttl * 1000),
        )
    )
    if not outcome.ok:
        raise outcome_error(outcome)
    return open_session(engine, upload_id)


def part_quota_room(engine: Engine, session: UploadSession) -> int | None:
    """Bytes one more part may hold before the bucket's quota would be crossed."""
    bucket = require_bucket(engine, session.bucket)
    if bucket.quota_bytes is None:
        return None
    used = engine.state.bucket_usage(session.bucket).size_bytes
    return max(0, bucket.quota_bytes - used)


async def store_part(
    uploads: Uploads,
    session: UploadSession,
    part_number: int,
    staged: StagedPayload,
    expected_sha256: str | None,
) -> PartInfo:
    """Promote a staged part and register it (replacing a part of the same number).

    A part written in place (``DirectStaged``) is named already: nothing to promote or,
    when refused, to remove (its region is no stored part's)."""
    engine = uploads.engine
    in_place = isinstance(staged, DirectStaged)
    if expected_sha256 is not None and expected_sha256 != staged.sha256:
        if not in_place:
            await engine.run_blocking(engine.store.discard_staged, staged)
        raise ApiError("BadDigest", "the part's SHA-256 does not match X-Checksum-Sha256")
    ensure_not_completing(uploads, session.upload_id)
    engine.ensure_writable()
    if isinstance(staged, DirectStaged):
        payload_id = staged.payload_id
    else:
        payload_id = await promote_staged(engine, staged)
        crashpoints.hit("multipart.part_promoted")
    outcome = await engine.commit(
        records.part_stored(
            upload_id=session.upload_id,
            part_number=part_number,
            payload_id=payload_id,
            size=staged.size,
            sha256=staged.sha256,
            at=now_ms(),
        )
    )
    if not outcome.ok:
        raise outcome_error(outcome)
    part = stored_parts(engine, session.upload_id).get(part_number)
    if part is None:
        raise ApiError("NoSuchUpload", "the upload closed while the part arrived")
    await uploads.in_place.part_stored(session)
    await uploads.assemblies.part_stored(session.upload_id)
    return part


def parse_manifest(body: Mapping[str, Any]) -> list[tuple[int, str]]:
    """``{"parts": [{"part_number", "etag"}]}`` as (number, etag) pairs, strictly ascending."""
    parts = body.get("parts")
    if not isinstance(parts, list) or not parts or len(parts) > MAX_PARTS_IN_MANIFEST:
        raise ApiError("InvalidPart", "parts must be a non-empty list of {part_number, etag}")
    manifest: list[tuple[int, str]] = []
    for item in parts:
        if not isinstance(item, dict):
            raise ApiError("InvalidPart", "each part must be an object {part_number, etag}")
        number, etag = item.get("part_number"), item.get("etag")
        if isinstance(number, bool) or not isinstance(number, int):
            raise ApiError("InvalidPartNumber", "part_number must be an integer")
        if not MIN_PART_NUMBER <= number <= MAX_PART_NUMBER:
            raise ApiError("InvalidPartNumber", f"part_number must be 1..{MAX_PART_NUMBER}")
        if not isinstance(etag, str):
            raise ApiError("InvalidPart", "etag must be a string")
        manifest.append((number, etag.strip('"').lower()))
    for (previous, _), (current, _) in itertools.pairwise(manifest):
        if current <= previous:
            raise ApiError("InvalidPartOrder", "parts must be listed in strictly ascending order")
    return manifest


def check_manifest(
    stored: Mapping[int, PartInfo], manifest: Sequence[tuple[int, str]]
) -> list[PartInfo]:
    chosen = []
    for number, etag in manifest:
        part = stored.get(number)
        if part is None:
            raise ApiError("InvalidPart", f"part {number} was not uploaded")
        if part.sha256 != etag:
            raise ApiError("InvalidPart", f"part {number}'s etag does not match")
        chosen.append(part)
    return chosen


def refuse_quarantined_parts(engine: Engine, parts: Sequence[PartInfo]) -> None:
    """A part whose bytes failed verification after a power loss must be sent again."""
    for part in parts:
        if part.payload_id in engine.quarantined:
            raise ApiError(
                "InvalidPart",
                f"part {part.part_number} failed verification after an unclean shutdown; "
                "upload it again",
            )


def _is_own_file(parts: Sequence[PartInfo]) -> bool:
    """Whether the manifest is one part stored in a payload file of its own (not in place):
    then that file is the object as it is, and the version shares it with the part (the
    payload references are counted, ``service.meta.refs``) instead of a copy being joined
    and hashed again. A fleet worker's outputs arrive so (``service.media.fleet_outputs``)."""
    return len(parts) == 1 and not is_direct_id(parts[0].payload_id)


async def complete_upload(
    uploads: Uploads, session: UploadSession, body: Mapping[str, Any]
) -> ObjectVersion:
    """Join the manifest's parts into the key's new version and close the session."""
    engine = uploads.engine
    manifest = parse_manifest(body)
    ensure_not_completing(uploads, session.upload_id)
    engine.ensure_writable()
    parts = check_manifest(stored_parts(engine, session.upload_id), manifest)
    refuse_quarantined_parts(engine, parts)
    uploads.completing.add(session.upload_id)
    try:
        try:
            staged = await uploads.in_place.take(session, parts)
            if staged is None:
                staged = await uploads.assemblies.take(session.upload_id, parts)
            if staged is None and not _is_own_file(parts):
                staged = await engine.run_blocking(engine.store.join, [p.payload_id for p in parts])
        except OSError as exc:
            raise storage_failure(exc) from None  # the join or seal discarded its file
        if staged is None:  # one part in a payload file of its own: the object already
            payload_id, size, sha256 = parts[0].payload_id, parts[0].size, parts[0].sha256
        else:
            payload_id = await promote_staged(engine, staged)
            size, sha256 = staged.size, staged.sha256
        crashpoints.hit("multipart.joined_promoted")
        outcome = await engine.commit(
            records.upload_completed(
                upload_id=session.upload_id,
                part_numbers=[part.part_number for part in parts],
                payload_id=payload_id,
                size=size,
                sha256=sha256,
                version_token=new_version_token(),
                at=now_ms(),
            )
        )
    finally:
        uploads.completing.discard(session.upload_id)
        uploads.in_place.completed(session.upload_id)
    crashpoints.hit("multipart.after_complete_record")
    if not outcome.ok or not isinstance(outcome.value, ObjectVersion):
        raise outcome_error(outcome)
    await uploads.in_place.drop(session.upload_id)
    return outcome.value


async def abort_upload(uploads: Uploads, session: UploadSession, reason: str = "aborted") -> None:
    """Close a session without an object; its parts are released by the commit."""
    ensure_not_completing(uploads, session.upload_id)
    outcome = await uploads.engine.commit(
        records.upload_aborted(upload_id=session.upload_id, reason=reason, at=now_ms())
    )
    crashpoints.hit("multipart.after_abort_record")
    if not outcome.ok:
        raise outcome_error(outcome)
    await uploads.assemblies.drop(session.upload_id)
    await uploads.in_place.drop(session.upload_id)


async def reap_expired_uploads(uploads: Uploads) -> int:
    """Abort every session past its expiry (the background reaper); how many."""
    engine = uploads.engine
    reaped = 0
    for session in engine.state.expired_uploads(now_ms()):
        if session.upload_id in uploads.completing or engine.read_only_reason:
            continue
        outcome = await engine.commit(
            records.upload_aborted(upload_id=session.upload_id, reason="expired", at=now_ms())
        )
        reaped += int(outcome.ok)
        if outcome.ok:
            await uploads.assemblies.drop(session.upload_id)
            await uploads.in_place.drop(session.upload_id)
    return reaped
