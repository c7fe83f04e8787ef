"""``AsyncServiceClient``: the asyncio client and its account-wide sub-clients.

Every method builds a flow from ``_ops_*`` and runs it on the ``AsyncDriver``; no request is
built or parsed here; bucket handles and multipart sessions live in ``_async_bucket``. Of the
two client modules the async one is the source:
``scripts/unasync.py`` writes the sync one from it, so the two flavours differ only in
``await``; edit the async one, never the copy.

Thread-safety: an asyncio client belongs to the event loop that first used it (any number of
its tasks may share it); a synchronous client, its sub-clients and bucket handles may be used
from several threads at once (one connection pool is shared). A stream handle belongs to one
task or thread.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from service.client import _ops_admin as admin
from service.client import _ops_lock as lock
from service.client import _ops_objects as objects
from service.client import _ops_upkeep as upkeep
from service.client import _ops_videos as videos
from service.client._async_bucket import AsyncBucketClient
from service.client._async_io import AsyncDriver, Handle
from service.client._async_multipart import AsyncMultipartUpload
from service.client._base import ClientBase
from service.client._documents import UNSET, Unset
from service.client._models import (
    AccessKey,
    Bucket,
    DefaultRetention,
    Health,
    Job,
    Object,
    Rendition,
    Share,
    Token,
    User,
)
from service.client._models_lock import AuditPage, AuditRecord, AuditVerification
from service.client._models_upkeep import LifecycleRun, ScrubStatus

__all__ = [
    "AsyncAccessKeys",
    "AsyncBucketClient",
    "AsyncBuckets",
    "AsyncMultipartUpload",
    "AsyncServiceClient",
    "AsyncUsers",
    "AsyncVideos",
]


class AsyncServiceClient(ClientBase):
    """An asyncio client for the object storage service.

    Connect with a connection string or keyword options; close it (or use ``async with``) to
    free its connection pool::

        from service.client import AsyncServiceClient

        async with AsyncServiceClient("http://bk_ID:sk_SECRET@127.0.0.1:9000") as client:
            photos = await client.buckets.create("photos")
            bucket = client.bucket("photos")
            await bucket.put("hello.txt", b"hello", content_type="text/plain")
            async with await bucket.get("hello.txt") as obj:
                assert await obj.read() == b"hello"

    Keyword options: ``base_url`` (instead of a connection string), ``access_key`` and
    ``secret_key``, or ``token`` (a bearer token from ``login``); ``timeout`` (seconds for
    each read/write, None for none) and ``connect_timeout``; ``retries`` (for requests that
    are safe to repeat), ``part_retries`` (for multipart parts), ``backoff`` and
    ``max_backoff`` (seconds); ``max_connections`` (pool size, also the useful upper bound
    of parallel parts); ``verify`` (TLS verification, or an ``ssl.SSLContext``).
    """

    buckets: AsyncBuckets
    users: AsyncUsers
    access_keys: AsyncAccessKeys
    videos: AsyncVideos

    def _setup(self) -> None:
        self._driver = AsyncDriver(self._config)
        self.buckets = AsyncBuckets(self._driver)
        self.users = AsyncUsers(self._driver)
        self.access_keys = AsyncAccessKeys(self._driver)
        self.videos = AsyncVideos(self._driver)

    def bucket(self, name: str) -> AsyncBucketClient:
        """A handle on bucket ``name`` for object operations (no request is made)."""
        return AsyncBucketClient(self._driver, name)

    async def health(self) -> Health:
        """``GET /health`` (works without credentials)."""
        return await self._driver.run(admin.health())

    async def system_info(self) -> dict[str, Any]:
        """Version, durability, uptime, counts, journal and disk figures (a dict, because the
        contract lists a minimum set of fields that grows)."""
        return await self._driver.run(admin.system_info())

    async def replication_status(self) -> dict[str, Any]:
        """The replication role, position and lag, the standbys and the archive (admins)."""
        return await self._driver.run(admin.replication_status())

    async def replication_promote(self) -> dict[str, Any]:
        """Make this standby the primary of the next epoch; the status it answers (admins).
        A primary refuses: ``InvalidState``."""
        return await self._driver.run(admin.replication_promote())

    async def system_performance(self) -> dict[str, Any]:
        """Throughput and latency percentiles of PUT and GET over the recent window."""
        return await self._driver.run(admin.system_performance())

    async def metrics(self) -> str:
        """The Prometheus text exposition."""
        return await self._driver.run(admin.metrics())

    async def run_lifecycle(self) -> LifecycleRun:
        """Apply every bucket's lifecycle rules now (admin) and say what the pass did."""
        return await self._driver.run(upkeep.run_lifecycle())

    async def scrub_status(self) -> ScrubStatus:
        """The background scrub's state, progress and the corrupt payloads it found (admin)."""
        return await self._driver.run(upkeep.scrub_status())

    async def start_scrub(self) -> ScrubStatus:
        """Start a scrub pass now (admin); ConflictError (InvalidState) if one is running."""
        return await self._driver.run(upkeep.start_scrub())

    async def audit(
        self,
        *,
        since: int | str = 0,
        limit: int = 100,
        bucket: str | None = None,
        user_id: str | None = None,
    ) -> AuditPage:
        """A page of audit records after ``since`` (admin); ``next_cursor`` continues."""
        return await self._driver.run(lock.audit_page(since, limit, bucket, user_id))

    async def audit_records(
        self, *, since: int | str = 0, bucket: str | None = None, user_id: str | None = None
    ) -> AsyncIterator[AuditRecord]:
        """Every audit record after ``since`` (admin), following the pages."""
        cursor: int | str | None = since
        while cursor is not None:
            page = await self.audit(since=cursor, limit=1000, bucket=bucket, user_id=user_id)
            for record in page.records:
                yield record
            cursor = page.next_cursor

    async def verify_audit(self) -> AuditVerification:
        """Check the audit log's hash chain (admin): ``ok``, or the first bad record."""
        return await self._driver.run(lock.verify_audit())

    async def openapi(self) -> dict[str, Any]:
        """The server's OpenAPI 3.1 document of every route (works without credentials)."""
        return await self._driver.run(upkeep.openapi())

    async def login(self, username: str, password: str) -> Token:
        """Exchange a username and password for a bearer token. The client itself keeps its
        credentials; act as the user with
        ``AsyncServiceClient(base_url=..., token=t.token)``."""
        return await self._driver.run(admin.login(username, password))

    async def close(self) -> None:
        """Close the connection pool."""
        await self._driver.close()

    aclose = close

    async def __aenter__(self) -> AsyncServiceClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncBuckets(Handle):
    """``client.buckets``: create, list, get, update and delete buckets."""

    async def create(
        self,
        name: str,
        *,
        quota_bytes: int | None = None,
        versioning_enabled: bool | None = None,
        tags: Mapping[str, str] | None = None,
        object_lock_enabled: bool | None = None,
        default_retention: DefaultRetention | None = None,
    ) -> Bucket:
        """Create a bucket owned by the caller; ConflictError if the name is taken. With
        ``object_lock_enabled`` (for good: versioning stays on) its versions may be locked,
        and ``default_retention`` locks every new one.

        Example: ``await client.buckets.create("logs", quota_bytes=10**9, tags={"team": "ops"})``
        """
        return await self._run(
            objects.create_bucket(
                name,
                quota_bytes=quota_bytes,
                versioning_enabled=versioning_enabled,
                tags=tags,
                object_lock_enabled=object_lock_enabled,
                default_retention=default_retention,
            )
        )

    async def list(self) -> builtins.list[Bucket]:
        """Every bucket the caller may see (all of them for an admin)."""
        return await self._run(objects.list_buckets())

    async def get(self, name: str) -> Bucket:
        return await self._run(objects.get_bucket(name))

    async def update(
        self,
        name: str,
        *,
        quota_bytes: int | Unset | None = UNSET,
        versioning_enabled: bool | Unset = UNSET,
        tags: Mapping[str, str] | Unset = UNSET,
        default_retention: DefaultRetention | Unset | None = UNSET,
    ) -> Bucket:
        """Change the given fields only; ``quota_bytes=None`` removes the quota,
        ``default_retention=None`` a lock bucket's default retention."""
        return await self._run(
            objects.update_bucket(
                name,
                quota_bytes=quota_bytes,
                versioning_enabled=versioning_enabled,
                tags=tags,
                default_retention=default_retention,
            )
        )

    async def delete(self, name: str, *, force: bool = False) -> None:
        """Delete a bucket; with ``force`` also everything in it (else ConflictError when it
        is not empty)."""
        await self._run(objects.delete_bucket(name, force=force))


class AsyncUsers(Handle):
    """``client.users``: user accounts (admin only, except reading oneself)."""

    async def list(self) -> builtins.list[User]:
        return await self._run(admin.list_users())

    async def create(self, username: str, password: str, *, role: str | None = None) -> User:
        """Create a user; ``role`` is ``user`` (default) or ``admin``."""
        return await self._run(admin.create_user(username, password, role))

    async def get(self, user_id: str) -> User:
        return await self._run(admin.get_user(user_id))

    async def update(
        self,
        user_id: str,
        *,
        password: str | Unset = UNSET,
        status: str | Unset = UNSET,
        role: str | Unset = UNSET,
    ) -> User:
        """Change the given fields; ``status="disabled"`` locks the user and their keys out."""
        return await self._run(
            admin.update_user(user_id, password=password, status=status, role=role)
        )

    async def delete(self, user_id: str) -> None:
        await self._run(admin.delete_user(user_id))


class AsyncAccessKeys(Handle):
    """``client.access_keys``: create, list, revoke and delete access keys."""

    async def list(self) -> builtins.list[AccessKey]:
        """The caller's keys (every key for an admin), without secrets."""
        return await self._run(admin.list_access_keys())

    async def create(self, *, user_id: str | None = None, name: str | None = None) -> AccessKey:
        """A new key for the caller (or, for an admin, ``user_id``). Its ``secret_key`` is
        shown only here: store it now."""
        return await self._run(admin.create_access_key(user_id, name))

    async def update(self, access_key_id: str, *, status: str) -> AccessKey:
        """Set ``status`` to ``active`` or ``revoked``."""
        return await self._run(admin.update_access_key(access_key_id, status))

    async def revoke(self, access_key_id: str) -> AccessKey:
        """Revoke a key: it gets 401 from now on, and its presigned URLs stop working."""
        return await self.update(access_key_id, status="revoked")

    async def delete(self, access_key_id: str) -> None:
        await self._run(admin.delete_access_key(access_key_id))


class AsyncVideos(Handle):
    """``client.videos``: thumbnails, HLS/DASH packaging jobs and playback shares."""

    async def thumbnail(
        self,
        bucket: str,
        key: str,
        *,
        at_seconds: float | None = None,
        width: int | None = None,
        format: str | None = None,
        quality: int | None = None,
        target_key: str | None = None,
    ) -> Object:
        """Store a still frame of the video ``key`` and return the new object."""
        return await self._run(
            videos.thumbnail(
                bucket,
                key,
                at_seconds=at_seconds,
                width=width,
                format=format,
                quality=quality,
                target_key=target_key,
            )
        )

    async def create_job(
        self,
        bucket: str,
        key: str,
        *,
        formats: Sequence[str] = ("hls", "dash"),
        renditions: Sequence[Rendition | Mapping[str, Any]] | None = None,
        segment_seconds: float | None = None,
        hls_segment_type: str | None = None,
        output_prefix: str | None = None,
    ) -> Job:
        """Queue a packaging job; poll it with ``get_job`` or ``wait_for_job``."""
        return await self._run(
            videos.create_job(
                bucket,
                key,
                formats=formats,
                renditions=renditions,
                segment_seconds=segment_seconds,
                hls_segment_type=hls_segment_type,
                output_prefix=output_prefix,
            )
        )

    async def get_job(self, job_id: str) -> Job:
        return await self._run(videos.get_job(job_id))

    async def list_jobs(self, *, bucket: str | None = None, status: str | None = None) -> list[Job]:
        return await self._run(videos.list_jobs(bucket, status))

    async def cancel_job(self, job_id: str) -> None:
        """Cancel a job and remove its outputs."""
        await self._run(videos.cancel_job(job_id))

    async def wait_for_job(
        self, job_id: str, *, poll_interval: float = 0.5, timeout: float | None = 600.0
    ) -> Job:
        """Poll until the job completed or failed and return it (check ``status``)."""
        return await self._run(
            videos.wait_for_job(job_id, poll_interval=poll_interval, timeout=timeout)
        )

    async def create_share(self, job_id: str, *, expires_in: int | None = None) -> Share:
        """Playback URLs for a completed job that work without credentials."""
        return await self._run(videos.create_share(job_id, expires_in))

    async def revoke_share(self, share_id: str) -> None:
        await self._run(videos.revoke_share(share_id))
