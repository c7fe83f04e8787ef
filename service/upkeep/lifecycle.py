"""The lifecycle pass: apply every bucket's rules through ordinary journaled operations.

Each action is the operation a user would make: an expired object is deleted as a DELETE
would (a delete marker under versioning), a noncurrent version is deleted by its version id,
an old multipart session is aborted. So it shows in versions, events and metrics like any
other change, and a crash mid-pass loses nothing: the next pass finds what is still due.

The pass streams: it walks the state's paged listings (``list_objects`` / ``list_versions``
with a cursor, ``PAGE`` entries at a time), never holding a bucket in memory, and sleeps
``lifecycle_pass_pause`` after each page so requests are not starved. Deletes of one page run
together (at most ``CONCURRENCY`` at once) so they share group commits.

Ages: an object's age is that of its current version (its ``updated_at``); a noncurrent
version's age counts from when it stopped being current (the ``created_at`` of the next newer
version); a session's from its creation. A delete marker left as a key's only version is
removed once older than ``noncurrent_expire_after_days`` (S3's expired object delete marker).

A rule is its bucket's, not its name's: the pass notes the bucket's identity
(``service.meta.identity``) before it applies the bucket's rules and stops as soon as the
name belongs to another bucket (deleted and created again meanwhile), and each delete record
carries that identity, so ``apply`` refuses it in another bucket of the name.

Locked versions (retention, legal hold: ``service.meta.lock_policy``) are skipped, and ``apply``
refuses their removal anyway; an expiry under object lock only adds a delete marker, as a
DELETE would. No lost writes: each delete record carries the version the pass judged due and why
(``service.meta.lifecycle_state.judgment``), and ``apply`` refuses it when the key's versions
no longer agree at that point of the journal -- a PUT whose record was queued while the pass
judged the key wins, whatever the interleaving. A refused delete lost a race: skipped, not
counted. An abort likewise names its cutoff and only closes a session created before it.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass

from service.common.api_errors import ServiceError
from service.common.timefmt import now_ms
from service.meta import ObjectVersion, UploadSession, records
from service.meta.lifecycle_state import (
    EXPIRE,
    LONE_MARKER,
    NONCURRENT,
    LifecycleRule,
    days_to_ms,
    is_due,
    judgment,
)
from service.multipart.operations import ensure_not_completing
from service.multipart.uploads import Uploads
from service.ops.buckets import outcome_error
from service.ops.objects import new_version_token

log = logging.getLogger("service.lifecycle")

PAGE = 200
CONCURRENCY = 32
_GONE = frozenset(
    {
        "NoSuchKey",
        "NoSuchVersion",
        "NoSuchBucket",
        "NoSuchUpload",
        "InvalidState",
        "PreconditionFailed",
        "ObjectLocked",
    }
)
"""Outcomes that mean someone else got there first (or locked the version meanwhile): not
counted, not an error."""


@dataclass(slots=True)
class PassCounts:
    """What one pass did (the run endpoint's answer)."""

    expired: int = 0
    noncurrent_removed: int = 0
    uploads_aborted: int = 0

    def add(self, other: PassCounts) -> None:
        self.expired += other.expired
        self.noncurrent_removed += other.noncurrent_removed
        self.uploads_aborted += other.uploads_aborted


class LifecycleRunner:
    """Runs passes one at a time and keeps their totals for the metrics."""

    def __init__(self, uploads: Uploads, pause: float) -> None:
        self._engine = uploads.engine
        self._uploads = uploads
        self._pause = pause
        self._lock = asyncio.Lock()
        self.totals = PassCounts()
        self.passes = 0
        self.last_pass_at: float | None = None
        """Unix time the last pass finished."""
        self.last_pass_seconds = 0.0

    async def run_pass(self) -> PassCounts:
        """Apply every enabled rule of every bucket once; a pass already running is
        waited for first (so a pass asked for always starts after the ask)."""
        async with self._lock:
            started = time.monotonic()
            counts = PassCounts()
            state = self._engine.state
            for bucket in state.lifecycle.buckets():
                bucket_id = state.bucket_id_of(bucket)
                for rule in state.lifecycle.rules(bucket):
                    if state.bucket_id_of(bucket) != bucket_id or bucket_id is None:
                        break  # deleted, perhaps created again: the rules were the old one's
                    if rule.enabled and self._engine.read_only_reason is None:
                        counts.add(await self._apply_rule(bucket, bucket_id, rule, now_ms()))
            self.totals.add(counts)
            self.passes += 1
            self.last_pass_at = time.time()
            self.last_pass_seconds = time.monotonic() - started
            if counts.expired or counts.noncurrent_removed or counts.uploads_aborted:
                log.info(
                    "lifecycle pass: %d expired, %d noncurrent removed, %d uploads aborted",
                    counts.expired,
                    counts.noncurrent_removed,
                    counts.uploads_aborted,
                )
            return counts

    async def _apply_rule(
        self, bucket: str, bucket_id: str, rule: LifecycleRule, now: int
    ) -> PassCounts:
        counts = PassCounts()
        if rule.expire_after_days is not None:
            cutoff = now - days_to_ms(rule.expire_after_days)
            counts.expired = await self._expire(bucket, bucket_id, rule.prefix, cutoff)
        if rule.noncurrent_expire_after_days is not None and self._same(bucket, bucket_id):
            cutoff = now - days_to_ms(rule.noncurrent_expire_after_days)
            counts.noncurrent_removed = await self._noncurrent(
                bucket, bucket_id, rule.prefix, cutoff
            )
        if rule.abort_multipart_after_days is not None and self._same(bucket, bucket_id):
            cutoff = now - days_to_ms(rule.abort_multipart_after_days)
            counts.uploads_aborted = await self._abort_uploads(bucket, rule.prefix, cutoff)
        return counts

    def _same(self, bucket: str, bucket_id: str) -> bool:
        """Whether the name still belongs to the bucket whose rules the pass applies."""
        return self._engine.state.bucket_id_of(bucket) == bucket_id

    async def _expire(self, bucket: str, bucket_id: str, prefix: str, cutoff: int) -> int:
        """Delete every current version under ``prefix`` written before ``cutoff``."""
        state, done, start_after = self._engine.state, 0, None
        while self._same(bucket, bucket_id):
            page = state.list_objects(bucket, prefix=prefix, limit=PAGE, start_after=start_after)
            due = [v for v in page.objects if is_due(EXPIRE, (v,), 0, cutoff)]
            done += await self._all(self._delete(v, None, EXPIRE, cutoff, bucket_id) for v in due)
            if not page.truncated or page.last_item is None:
                break
            start_after = page.last_item
            await asyncio.sleep(self._pause)
        return done

    async def _noncurrent(self, bucket: str, bucket_id: str, prefix: str, cutoff: int) -> int:
        """Delete versions under ``prefix`` noncurrent since before ``cutoff``, and delete
        markers left alone older than it."""
        state, done = self._engine.state, 0
        cursor: tuple[str, int] | None = None
        while self._same(bucket, bucket_id):
            page = state.list_versions(bucket, prefix=prefix, limit=PAGE, start_after=cursor)
            due: list[tuple[ObjectVersion, str]] = []
            now = now_ms()
            for entry in page.versions:
                version = entry.version
                if state.locks.removal_problem(version, now) is not None:
                    continue  # retention or legal hold: the rule waits until it ends
                history = state.object_versions(bucket, version.key)
                position = next((i for i, v in enumerate(history) if v == version), None)
                if position is None:
                    continue
                for kind in (NONCURRENT, LONE_MARKER):
                    if is_due(kind, history, position, cutoff):
                        due.append((version, kind))
                        break
            done += await self._all(
                self._delete(v, v.version_id or "null", kind, cutoff, bucket_id) for v, kind in due
            )
            if not page.truncated or page.last_item is None:
                break
            cursor = page.last_item
            await asyncio.sleep(self._pause)
        return done

    async def _delete(
        self,
        version: ObjectVersion,
        version_id: str | None,
        kind: str,
        cutoff: int,
        bucket_id: str,
    ) -> None:
        """Journal the delete of ``version`` judged due as ``kind``; ``apply`` refuses it
        when the key changed since (PreconditionFailed: a race lost, skipped) or the name
        now belongs to another bucket (NoSuchBucket)."""
        self._engine.ensure_writable()
        outcome = await self._engine.commit(
            records.object_deleted(
                bucket=version.bucket,
                key=version.key,
                version_id=version_id,
                version_token=new_version_token(),
                at=now_ms(),
                judged=judgment(kind, version, cutoff, bucket_id),
            )
        )
        if not outcome.ok:
            raise outcome_error(outcome)

    async def _abort_uploads(self, bucket: str, prefix: str, cutoff: int) -> int:
        """Abort the bucket's sessions under ``prefix`` started before ``cutoff``."""
        engine = self._engine
        due = [
            session
            for session in engine.state.uploads(bucket)
            if session.key.startswith(prefix)
            and session.created_at < cutoff
            and session.upload_id not in self._uploads.completing
        ]
        return await self._all(self._abort(session, cutoff) for session in due)

    async def _abort(self, session: UploadSession, cutoff: int) -> None:
        """Journal the abort of a session judged older than ``cutoff`` (re-checked when
        applied; a session completing now is left alone)."""
        ensure_not_completing(self._uploads, session.upload_id)
        outcome = await self._engine.commit(
            records.upload_aborted(
                upload_id=session.upload_id, reason="expired", at=now_ms(), created_before=cutoff
            )
        )
        if not outcome.ok:
            raise outcome_error(outcome)

    async def _all(self, operations: Iterable[Awaitable[None]]) -> int:
        """Run the operations, ``CONCURRENCY`` at a time; how many succeeded. One that lost
        a race (the thing is gone already) is skipped; any other error ends the pass."""
        pending = list(operations)
        done = 0
        for start in range(0, len(pending), CONCURRENCY):
            results = await asyncio.gather(
                *pending[start : start + CONCURRENCY], return_exceptions=True
            )
            for result in results:
                if isinstance(result, ServiceError) and result.code in _GONE:
                    continue
                if isinstance(result, BaseException):
                    for leftover in pending[start + CONCURRENCY :]:
                        _close(leftover)
                    raise result
                done += 1
        return done


def _close(operation: Awaitable[None]) -> None:
    """Close a coroutine that will not run (no 'never awaited' warning)."""
    close = getattr(operation, "close", None)
    if close is not None:
        close()
