"""A fleet attempt's output files sent in one request, each held as an open multipart upload.

Why: a packaged video is many small files (HLS and DASH of 30 s: about 20 playlists and
segments; of an hour: about 1,800). Sent one at a time, each costs the worker and the
server a multipart init and a part upload: two HTTP requests, two token checks, two JSON
answers, and on the server the in-place part machinery, for a file of a few hundred KiB.
``POST /api/v1/videos/jobs/{job_id}/outputs`` (``service.http.fleet_handlers``) takes them
as one tar stream instead, read as a batch upload's is (``service.ops.batch.stage_batch``:
each member staged while hashed, promoted, one shared sync), and ``open_output_uploads``
makes of each member what the worker's own init and part would have made: an upload
session on ``<output prefix><name>`` holding the file as its part 1, left open, so durable
and invisible. The completion names these sessions like any other
(``service.media.fleet_runner``, ``fleet_publish``): the exactly-once rules do not change,
and a one-part session is completed without copying its part
(``service.multipart.operations.complete_upload``). Files larger than a bundle may hold go up
as ordinary multipart uploads (``service.media.fleet_task``).

A request that is refused (a member that is not an output name or not a regular file, the
same name twice, the attempt over meanwhile) keeps none of its files. A commit refused
midway leaves the sessions opened before it: they are the attempt's stragglers, aborted with
the attempt or when another attempt publishes (``fleet_publish.abort_sessions``).

May import: the engine, ``service.ops`` (batch results, bucket checks), ``service.meta``,
``service.multipart.operations``, ``service.media.video_outputs``; nothing of HTTP.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from service.common.api_errors import ApiError
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.media.video_outputs import content_type_for, is_output_name
from service.meta import records
from service.multipart.operations import recommended_part_size
from service.ops.batch import MemberFailure, Staged, StagedMember
from service.ops.buckets import outcome_error, require_bucket

OutputUpload = dict[str, Any]
"""``{"upload_id", "parts": [{"part_number": 1, "etag"}]}``: what ``complete`` names."""


def _check(entries: Sequence[Staged], prefix: str) -> list[StagedMember]:
    """The members, if every one is a regular file with an output's name, each name once;
    else the ``ApiError`` saying which is not."""
    members: list[StagedMember] = []
    seen: set[str] = set()
    for entry in entries:
        if isinstance(entry, MemberFailure):
            name = entry.key[len(prefix) :]
            raise ApiError(entry.error.code, f"output {name!r}: {entry.error.message}")
        name = entry.intent.key[len(prefix) :]
        if not is_output_name(name):
            raise ApiError("InvalidArgument", f"{name!r} is not the name of a packaging output")
        if name in seen:
            raise ApiError("InvalidArgument", f"output {name!r} appears twice")
        seen.add(name)
        members.append(entry)
    return members


def _check_quota(engine: Engine, bucket: str, members: Sequence[StagedMember]) -> None:
    """As the part route does: the files must fit in what the bucket's quota leaves."""
    quota = require_bucket(engine, bucket).quota_bytes
    if quota is None:
        return
    used = engine.state.bucket_usage(bucket).size_bytes
    if used + sum(member.staged.size for member in members) > quota:
        raise ApiError("QuotaExceeded", "the outputs would take the bucket past its quota")


async def _discard(engine: Engine, members: Sequence[StagedMember]) -> None:
    """Remove payloads no record names (best effort: the orphan sweep takes what is left)."""
    if members:
        with contextlib.suppress(OSError):
            await engine.run_blocking(engine.store.remove, [m.payload_id for m in members])


async def _open_one(engine: Engine, owner: str, member: StagedMember) -> OutputUpload:
    """One member as an open session holding it as part 1."""
    upload_id = secrets.token_hex(16)
    at = now_ms()
    size, sha256 = member.staged.size, member.staged.sha256
    started = await engine.commit(
        records.upload_started(
            upload_id=upload_id,
            bucket=member.intent.bucket,
            key=member.intent.key,
            owner=owner,
            content_type=content_type_for(member.intent.key),
            custom_metadata={},
            recommended_part_size=recommended_part_size(size),
            at=at,
            expires_at=at + int(engine.config.multipart_ttl * 1000),
        )
    )
    if not started.ok:
        await _discard(engine, [member])  # named by no record
        raise outcome_error(started)
    stored = await engine.commit(
        records.part_stored(
            upload_id=upload_id,
            part_number=1,
            payload_id=member.payload_id,
            size=size,
            sha256=sha256,
            at=now_ms(),
        )
    )
    if not stored.ok:  # the refusal released the payload
        raise outcome_error(stored)
    return {"upload_id": upload_id, "parts": [{"part_number": 1, "etag": sha256}]}


async def open_output_uploads(
    engine: Engine,
    *,
    owner: str,
    room: int,
    bucket: str,
    prefix: str,
    entries: Sequence[Staged],
    still_running: Callable[[], bool],
) -> dict[str, OutputUpload]:
    """Open a session for every staged member (all commits in flight together, so the
    journal's group commit takes them in few batches); ``{name: OutputUpload}``. Refused
    (``ApiError``) with nothing kept if a member is not an output, if the job would hold
    more than ``room`` more open sessions, or if ``still_running`` says the attempt is
    over."""
    members = [entry for entry in entries if isinstance(entry, StagedMember)]
    try:
        members = _check(entries, prefix)
        if len(members) > room:
            raise ApiError("InvalidState", f"a job may hold {room} more open uploads, not more")
        _check_quota(engine, bucket, members)
        if not still_running():
            raise ApiError("AccessDenied", "the job token's attempt is no longer running")
        engine.ensure_writable()
    except BaseException:
        await _discard(engine, members)
        raise
    opened = await asyncio.gather(
        *(_open_one(engine, owner, member) for member in members), return_exceptions=True
    )
    for result in opened:
        if isinstance(result, BaseException):
            raise result
    return {
        member.intent.key[len(prefix) :]: result
        for member, result in zip(members, opened, strict=True)
        if not isinstance(result, BaseException)
    }
