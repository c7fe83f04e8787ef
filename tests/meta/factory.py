"""Event builders with defaults for the metadata tests: a fresh id and a later time each call."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from service.meta import MetaState, Outcome, records
from service.meta.records import Event


class Factory:
    """Builds events with unique payload ids / version tokens and an advancing clock."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000
        self.serial = 0
        self.payloads_created: list[str] = []

    def at(self) -> int:
        self.now += 1
        return self.now

    def fresh(self, kind: str) -> str:
        self.serial += 1
        return f"{kind}{self.serial:06d}"

    def bucket_id(self) -> str:
        """A fresh bucket identity (``service.meta.identity``'s shape, deterministic)."""
        self.serial += 1
        return f"bkt_{self.serial:024x}"

    def payload(self) -> str:
        payload_id = self.fresh("p")
        self.payloads_created.append(payload_id)
        return payload_id

    @staticmethod
    def sha(data: str) -> str:
        return hashlib.sha256(data.encode()).hexdigest()

    def bucket(
        self,
        name: str = "b",
        *,
        versioning: bool = False,
        quota: int | None = None,
        owner: str = "u1",
        tags: Mapping[str, str] | None = None,
    ) -> Event:
        return records.bucket_created(
            name=name,
            owner=owner,
            quota_bytes=quota,
            versioning_enabled=versioning,
            tags=dict(tags or {}),
            at=self.at(),
            bucket_id=self.bucket_id(),
        )

    def lock_bucket(
        self, name: str = "lk", *, mode: str | None = None, days: float | None = None
    ) -> Event:
        """A bucket created with object lock (and so versioning), with a default retention
        when ``mode`` and ``days`` are given."""
        return records.bucket_created(
            name=name,
            owner="u1",
            quota_bytes=None,
            versioning_enabled=True,
            tags={},
            at=self.at(),
            bucket_id=self.bucket_id(),
            object_lock_enabled=True,
            default_retention_mode=mode,
            default_retention_days=days,
        )

    def retention(
        self,
        key: str,
        version_id: str,
        mode: str | None,
        until: int | None,
        *,
        bucket: str = "lk",
        bypass: bool = False,
        at: int | None = None,
    ) -> Event:
        return records.object_retention_set(
            bucket=bucket,
            key=key,
            version_id=version_id,
            mode=mode,
            retain_until=until,
            bypass=bypass,
            at=self.at() if at is None else at,
        )

    def legal_hold(
        self, key: str, version_id: str, on: bool, *, bucket: str = "lk", at: int | None = None
    ) -> Event:
        return records.object_legal_hold_set(
            bucket=bucket,
            key=key,
            version_id=version_id,
            on=on,
            at=self.at() if at is None else at,
        )

    def update(self, name: str = "b", **changes: Any) -> Event:
        return records.bucket_updated(name=name, changes=changes, at=self.at())

    def drop_bucket(self, name: str = "b", *, force: bool = False) -> Event:
        return records.bucket_deleted(name=name, force=force, at=self.at())

    def put(
        self,
        key: str,
        size: int = 1,
        *,
        bucket: str = "b",
        if_none_match: bool = False,
        if_match: str | None = None,
        metadata: Mapping[str, str] | None = None,
        content_type: str = "application/octet-stream",
    ) -> Event:
        payload_id = self.payload()
        return records.object_stored(
            bucket=bucket,
            key=key,
            payload_id=payload_id,
            size=size,
            content_type=content_type,
            sha256=self.sha(payload_id),
            custom_metadata=dict(metadata or {}),
            version_token=self.fresh("v"),
            if_none_match=if_none_match,
            if_match=if_match,
            at=self.at(),
        )

    def delete(
        self,
        key: str,
        version_id: str | None = None,
        *,
        bucket: str = "b",
        at: int | None = None,
    ) -> Event:
        return records.object_deleted(
            bucket=bucket,
            key=key,
            version_id=version_id,
            version_token=self.fresh("v"),
            at=self.at() if at is None else at,
        )

    def start(self, key: str = "big", *, bucket: str = "b", ttl_ms: int = 86_400_000) -> Event:
        at = self.at()
        return records.upload_started(
            upload_id=self.fresh("up"),
            bucket=bucket,
            key=key,
            owner="u1",
            content_type="video/mp4",
            custom_metadata={"origin": "camera"},
            recommended_part_size=8 << 20,
            at=at,
            expires_at=at + ttl_ms,
        )

    def part(self, upload_id: str, number: int, size: int = 10, *, at: int | None = None) -> Event:
        payload_id = self.payload()
        return records.part_stored(
            upload_id=upload_id,
            part_number=number,
            payload_id=payload_id,
            size=size,
            sha256=self.sha(payload_id),
            at=self.at() if at is None else at,
        )

    def complete(
        self, upload_id: str, numbers: Sequence[int], size: int = 20, *, at: int | None = None
    ) -> Event:
        payload_id = self.payload()
        return records.upload_completed(
            upload_id=upload_id,
            part_numbers=list(numbers),
            payload_id=payload_id,
            size=size,
            sha256=self.sha(payload_id),
            version_token=self.fresh("v"),
            at=self.at() if at is None else at,
        )

    def abort(self, upload_id: str, reason: str = "aborted") -> Event:
        return records.upload_aborted(upload_id=upload_id, reason=reason, at=self.at())

    def job(self, key: str = "clip.mp4", *, bucket: str = "b", prefix: str | None = None) -> Event:
        job_id = self.fresh("job")
        return records.video_job_created(
            job_id=job_id,
            bucket=bucket,
            key=key,
            created_by="u1",
            params={
                "formats": ["hls", "dash"],
                "renditions": [{"height": 360, "video_bitrate_kbps": 800}],
                "segment_seconds": 4.0,
                "hls_segment_type": "mpegts",
            },
            output_prefix=prefix or f"videos/{job_id}/",
            at=self.at(),
        )

    def job_update(
        self,
        job_id: str,
        status: str,
        *,
        progress: float = 0.0,
        outputs: Mapping[str, str] | None = None,
        error: str | None = None,
    ) -> Event:
        return records.video_job_updated(
            job_id=job_id,
            status=status,
            progress=progress,
            outputs=dict(outputs or {}),
            error=error,
            at=self.at(),
        )

    def job_done(self, job_id: str, prefix: str = "videos/") -> list[Event]:
        """The two updates that take a queued job to completed."""
        return [
            self.job_update(job_id, "processing"),
            self.job_update(
                job_id,
                "completed",
                progress=1.0,
                outputs={"hls": f"{prefix}hls/master.m3u8", "dash": f"{prefix}dash/manifest.mpd"},
            ),
        ]

    def fleet_done(self, job_id: str, prefix: str = "videos/") -> list[Event]:
        """A fleet's way to completed: attempt 1 lost with its lease, attempt 2 accepted
        (its uploads published) and finished."""
        return [
            records.video_attempt_started(
                job_id=job_id, attempt=1, worker="w1", host="h1", at=self.at()
            ),
            records.video_attempt_ended(
                job_id=job_id, attempt=1, reason="lease_expired", at=self.at()
            ),
            records.video_attempt_started(
                job_id=job_id, attempt=2, worker="w2", host="h2", at=self.at()
            ),
            records.video_attempt_accepted(
                job_id=job_id, attempt=2, uploads={"hls/master.m3u8": "up-m"}, at=self.at()
            ),
            records.video_attempt_finished(
                job_id=job_id,
                attempt=2,
                status="completed",
                outputs={"hls": f"{prefix}hls/master.m3u8"},
                error=None,
                at=self.at(),
            ),
        ]

    def share(self, job_id: str, *, ttl_ms: int = 3_600_000) -> Event:
        at = self.at()
        return records.video_share_created(
            share_id=self.fresh("sh"), job_id=job_id, created_by="u1", expires_at=at + ttl_ms, at=at
        )


def applied(state: MetaState, event: Event) -> Outcome:
    """Apply an event that must be accepted."""
    outcome = state.apply(event)
    assert outcome.ok, outcome
    return outcome


def keys_of(state: MetaState, bucket: str = "b") -> list[str]:
    """Every listed key (no delimiter), in one page."""
    return [v.key for v in state.list_objects(bucket, limit=10_000).objects]
