"""``AsyncServiceClient``: the asyncio client, its sub-clients and handles.

Every method builds a flow from ``_ops_*`` and runs it on the ``AsyncDriver``; no request is
built or parsed here. Of the two client modules the async one is the source:
``scripts/unasync.py`` writes the sync one from it, so the two flavours differ only in
``await``; edit the async one, never the copy.

Thread-safety: an asyncio client belongs to the event loop that first used it (any number of
its tasks may share it); a synchronous client, its sub-clients and bucket handles may be used
from several threads at once (one connection pool is shared). A stream handle belongs to one
task or thread.
"""

from __future__ import annotations

import builtins
import datetime
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from service.client import _ops_admin as admin
from service.client import _ops_multipart as multipart
from service.client import _ops_objects as objects
from service.client import _ops_videos as videos
from service.client._async_io import AsyncDriver
from service.client._async_stream import AsyncObjectStream
from service.client._base import ClientBase
from service.client._documents import UNSET, Unset
from service.client._flow import Flow
from service.client._headers import ObjectHeaders
from service.client._models import (
    AccessKey,
    Bucket,
    Health,
    Job,
    ListPage,
    Object,
    ObjectVersion,
    OptimizedImage,
    Part,
    PresignedUrl,
    Rendition,
    Session,
    Share,
    Token,
    User,
    VersionPage,
)
from service.client._parts import MultipartSource, ProgressCallback
from service.client._payload import Data, PathBody, body_from
from service.client._ranges import RangeLike

__all__ = [
    "AsyncAccessKeys",
    "AsyncBucketClient",
    "AsyncBuckets",
    "AsyncMultipartUpload",
    "AsyncServiceClient",
    "AsyncUsers",
    "AsyncVideos",
]

T = TypeVar("T")


class _Part:
    """Base of the sub-clients: they run flows on the client's driver."""

    def __init__(self, driver: AsyncDriver) -> None:
        self._driver = driver

    async def _run(self, flow: Flow[T]) -> T:
        return await self._driver.run(flow)


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

    async def system_performance(self) -> dict[str, Any]:
        """Throughput and latency percentiles of PUT and GET over the recent window."""
        return await self._driver.run(admin.system_performance())

    async def metrics(self) -> str:
        """The Prometheus text exposition."""
        return await self._driver.run(admin.metrics())

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


class AsyncBuckets(_Part):
    """``client.buckets``: create, list, get, update and delete buckets."""

    async def create(
        self,
        name: str,
        *,
        quota_bytes: int | None = None,
        versioning_enabled: bool | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Bucket:
        """Create a bucket owned by the caller; ConflictError if the name is taken.

        Example: ``await client.buckets.create("logs", quota_bytes=10**9, tags={"team": "ops"})``
        """
        return await self._run(
            objects.create_bucket(
                name, quota_bytes=quota_bytes, versioning_enabled=versioning_enabled, tags=tags
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
    ) -> Bucket:
        """Change the given fields only; ``quota_bytes=None`` removes the quota."""
        return await self._run(
            objects.update_bucket(
                name, quota_bytes=quota_bytes, versioning_enabled=versioning_enabled, tags=tags
            )
        )

    async def delete(self, name: str, *, force: bool = False) -> None:
        """Delete a bucket; with ``force`` also everything in it (else ConflictError when it
        is not empty)."""
        await self._run(objects.delete_bucket(name, force=force))


class AsyncUsers(_Part):
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


class AsyncAccessKeys(_Part):
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


class AsyncVideos(_Part):
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


class AsyncMultipartUpload(_Part):
    """A multipart upload session, from ``AsyncBucketClient.create_multipart_upload``.

    Example::

        upload = await bucket.create_multipart_upload("big.bin")
        await upload.upload_part(1, first_chunk)
        await upload.upload_part(2, second_chunk)
        obj = await upload.complete()
    """

    def __init__(self, driver: AsyncDriver, session: Session) -> None:
        super().__init__(driver)
        self.session = session

    @property
    def upload_id(self) -> str:
        return self.session.upload_id

    @property
    def bucket(self) -> str:
        return self.session.bucket

    @property
    def key(self) -> str:
        return self.session.key

    @property
    def recommended_part_size(self) -> int:
        return self.session.recommended_part_size

    @property
    def max_parallel_parts(self) -> int:
        return self.session.max_parallel_parts

    @property
    def expires_at(self) -> datetime.datetime:
        return self.session.expires_at

    async def upload_part(
        self, part_number: int, data: Data, *, checksum: str | None = None
    ) -> Part:
        """Store part ``part_number`` (1 to 10 000); sending a number again replaces it."""
        body = body_from(data)
        return await self._run(
            multipart.upload_part(self.upload_id, part_number, body, checksum=checksum)
        )

    async def status(self) -> Session:
        """The session as the server has it, with its stored ``parts``."""
        return await self._run(multipart.status(self.upload_id))

    async def complete(self, parts: Sequence[Part | tuple[int, str]] | None = None) -> Object:
        """Assemble the object from ``parts`` (default: every stored part, in order)."""
        return await self._run(multipart.complete(self.upload_id, parts))

    async def abort(self) -> None:
        """Discard the session and its parts."""
        await self._run(multipart.abort(self.upload_id))

    def __repr__(self) -> str:
        return f"<AsyncMultipartUpload {self.bucket}/{self.key} {self.upload_id}>"


class AsyncBucketClient(_Part):
    """Object operations in one bucket, from ``client.bucket(name)``.

    Example::

        bucket = client.bucket("photos")
        await bucket.put("cat.jpg", pathlib.Path("cat.jpg"), content_type="image/jpeg")
        async for obj in bucket.list(prefix="ca"):
            print(obj.key, obj.size_bytes)
    """

    def __init__(self, driver: AsyncDriver, name: str) -> None:
        super().__init__(driver)
        self.name = name

    def __repr__(self) -> str:
        return f"<AsyncBucketClient {self.name}>"

    async def info(self) -> Bucket:
        """The bucket's settings and usage."""
        return await self._run(objects.get_bucket(self.name))

    async def update(
        self,
        *,
        quota_bytes: int | Unset | None = UNSET,
        versioning_enabled: bool | Unset = UNSET,
        tags: Mapping[str, str] | Unset = UNSET,
    ) -> Bucket:
        """Change the given settings; ``quota_bytes=None`` removes the quota."""
        return await self._run(
            objects.update_bucket(
                self.name,
                quota_bytes=quota_bytes,
                versioning_enabled=versioning_enabled,
                tags=tags,
            )
        )

    async def delete_bucket(self, *, force: bool = False) -> None:
        """Delete this bucket (with ``force``, its objects too)."""
        await self._run(objects.delete_bucket(self.name, force=force))

    async def put(
        self,
        key: str,
        data: Data,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        checksum: str | None = None,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> Object:
        """Store ``data`` as ``key`` and return its metadata.

        ``data`` is bytes, bytearray, memoryview, str (sent as UTF-8), a ``pathlib.Path``, a
        binary file object or an iterable of bytes; files and iterables are streamed, never
        read into memory. ``metadata`` becomes ``X-Meta-*`` headers; ``checksum`` (hex
        SHA-256) makes the server refuse a damaged body (bytes get one automatically).
        ``if_none_match="*"`` stores only if the key is new, ``if_match=etag`` only if it is
        unchanged (else PreconditionFailedError).

        Example: ``await bucket.put("notes/a.txt", "hello", content_type="text/plain")``
        """
        return await self._run(
            objects.put_object(
                self.name,
                key,
                body_from(data),
                content_type=content_type,
                metadata=metadata,
                checksum=checksum,
                if_match=if_match,
                if_none_match=if_none_match,
            )
        )

    async def put_file(
        self,
        key: str,
        path: str | os.PathLike[str],
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        checksum: str | None = None,
    ) -> Object:
        """Stream the file at ``path`` (a ``str`` is a path here) with a Content-Length."""
        return await self._run(
            objects.put_object(
                self.name,
                key,
                PathBody(os.fspath(path)),
                content_type=content_type,
                metadata=metadata,
                checksum=checksum,
            )
        )

    async def get(
        self,
        key: str,
        *,
        version_id: str | None = None,
        if_match: str | None = None,
        if_none_match: str | None = None,
        if_modified_since: datetime.datetime | None = None,
    ) -> AsyncObjectStream:
        """Open ``key`` for reading; the body streams through the returned handle.

        NotFoundError if it does not exist; NotModifiedError when ``if_none_match`` (an
        etag) or ``if_modified_since`` says the caller's copy is current.

        Example::

            async with await bucket.get("notes/a.txt") as obj:
                text = await obj.text()
        """
        reply = await self._run(
            objects.get_object(
                self.name,
                key,
                version_id=version_id,
                if_match=if_match,
                if_none_match=if_none_match,
                if_modified_since=if_modified_since,
            )
        )
        return AsyncObjectStream(self.name, key, reply)

    async def get_range(
        self, key: str, range: RangeLike, *, version_id: str | None = None
    ) -> AsyncObjectStream:
        """Open a byte window of ``key``: ``ByteRange(start, end)`` / ``ByteRange(suffix=n)``,
        a tuple ``(start, end)`` with an inclusive end, or ``"bytes=a-b"``. The status is 206
        (or 200 when the window covers the whole object); InvalidRangeError when it cannot be
        satisfied.

        Example: ``window = await bucket.get_range("log.txt", (0, 99))`` streams the first 100
        bytes.
        """
        reply = await self._run(
            objects.get_object(self.name, key, byte_range=range, version_id=version_id)
        )
        return AsyncObjectStream(self.name, key, reply)

    async def head(self, key: str, *, version_id: str | None = None) -> ObjectHeaders:
        """The object's headers (size, type, etag, SHA-256, metadata) without its body."""
        return await self._run(objects.head_object(self.name, key, version_id=version_id))

    async def exists(self, key: str) -> bool:
        """Whether ``key`` exists (a HEAD; other errors are raised)."""
        return await self._run(objects.object_exists(self.name, key))

    async def delete(self, key: str, *, version_id: str | None = None) -> bool:
        """Delete ``key`` (or one version of it); False if there was nothing to delete."""
        return await self._run(objects.delete_object(self.name, key, version_id=version_id))

    async def list_page(
        self,
        *,
        prefix: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        delimiter: str | None = None,
    ) -> ListPage:
        """One page of keys in order; pass ``next_cursor`` back as ``cursor`` for the next."""
        return await self._run(
            objects.list_objects(
                self.name, prefix=prefix, delimiter=delimiter, limit=limit, cursor=cursor
            )
        )

    async def list_pages(
        self,
        *,
        prefix: str | None = None,
        delimiter: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[ListPage]:
        """Every page, fetched lazily (use it to see ``common_prefixes``)."""
        cursor: str | None = None
        while True:
            page = await self.list_page(
                prefix=prefix, limit=page_size, cursor=cursor, delimiter=delimiter
            )
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def list(
        self,
        *,
        prefix: str | None = None,
        delimiter: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Object]:
        """Every object, in key order, one page fetched at a time as iteration goes.

        Example: ``async for o in bucket.list(prefix="logs/"): total += o.size_bytes``
        """
        async for page in self.list_pages(prefix=prefix, delimiter=delimiter, page_size=page_size):
            for item in page.objects:
                yield item

    async def list_versions_page(
        self, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> VersionPage:
        """One page of the version listing."""
        return await self._run(
            objects.list_versions(self.name, prefix=prefix, limit=limit, cursor=cursor)
        )

    async def list_versions(
        self, *, prefix: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[ObjectVersion]:
        """Every version (delete markers included), fetched lazily page by page."""
        cursor: str | None = None
        while True:
            page = await self.list_versions_page(prefix=prefix, limit=page_size, cursor=cursor)
            for version in page.versions:
                yield version
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def presign(
        self,
        key: str,
        method: str = "GET",
        expires_in: int = 3600,
        *,
        content_type: str | None = None,
    ) -> PresignedUrl:
        """A URL that performs ``method`` (GET, PUT or HEAD) on ``key`` without credentials
        for ``expires_in`` seconds (1 to 604800). For PUT, ``content_type`` is signed too.

        Example: ``presigned = await bucket.presign_get("report.pdf", expires_in=600)``
        """
        return await self._run(
            objects.presign(
                self.name, key, method=method, expires_in=expires_in, content_type=content_type
            )
        )

    async def presign_get(self, key: str, expires_in: int = 3600) -> PresignedUrl:
        return await self.presign(key, "GET", expires_in)

    async def presign_put(
        self, key: str, expires_in: int = 3600, *, content_type: str | None = None
    ) -> PresignedUrl:
        return await self.presign(key, "PUT", expires_in, content_type=content_type)

    async def presign_head(self, key: str, expires_in: int = 3600) -> PresignedUrl:
        return await self.presign(key, "HEAD", expires_in)

    async def optimize(
        self,
        key: str,
        *,
        width: int | None = None,
        height: int | None = None,
        fit: str | None = None,
        format: str | None = None,
        quality: int | None = None,
        target_key: str | None = None,
    ) -> OptimizedImage:
        """Transform the image ``key`` and store the result (as ``target_key`` if given).

        Example: ``await bucket.optimize("cat.jpg", width=320, format="webp", quality=80)``
        """
        return await self._run(
            objects.optimize(
                self.name,
                key,
                width=width,
                height=height,
                fit=fit,
                format=format,
                quality=quality,
                target_key=target_key,
            )
        )

    async def image(
        self,
        key: str,
        *,
        width: int | None = None,
        height: int | None = None,
        fit: str | None = None,
        format: str | None = None,
        quality: int | None = None,
        enlarge: bool | None = None,
    ) -> AsyncObjectStream:
        """A transformed rendition of the image ``key``, streamed (nothing is stored).
        ``fit`` is cover, contain, fill or inside (default); never upscales unless
        ``enlarge``.

        Example: ``thumb = await bucket.image("cat.jpg", width=64, format="png")``
        """
        reply = await self._run(
            objects.image(
                self.name,
                key,
                width=width,
                height=height,
                fit=fit,
                format=format,
                quality=quality,
                enlarge=enlarge,
            )
        )
        return AsyncObjectStream(self.name, key, reply)

    async def create_multipart_upload(
        self,
        key: str,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> AsyncMultipartUpload:
        """Open a multipart upload session for ``key``."""
        session = await self._run(
            multipart.init(self.name, key, content_type=content_type, metadata=metadata)
        )
        return AsyncMultipartUpload(self._driver, session)

    async def get_multipart_upload(self, upload_id: str) -> AsyncMultipartUpload:
        """A handle on an open session (for example one kept after a failed upload)."""
        return AsyncMultipartUpload(self._driver, await self._run(multipart.status(upload_id)))

    async def list_multipart_uploads(self) -> builtins.list[Session]:
        """The open multipart sessions of this bucket."""
        return await self._run(multipart.list_uploads(self.name))

    async def upload_multipart(
        self,
        key: str,
        source: MultipartSource,
        *,
        part_size: int | None = None,
        max_parallel: int | None = None,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        upload_id: str | None = None,
        progress: ProgressCallback | None = None,
        keep_on_error: bool = False,
    ) -> Object:
        """Upload a large ``source`` in parts, in parallel, and return the stored object.

        ``source`` is a path (``str`` or ``PathLike``), bytes, a binary file object or an
        iterable of bytes. Parts are ``part_size`` bytes (default: the server's
        recommendation) and at most ``max_parallel`` (default: the server's
        ``max_parallel_parts``) are in flight as tasks; a file is read part by part
        from disk by offset, a stream one part per slot, so memory stays bounded. Each part
        is retried with back-off on connection errors and 5xx. ``progress(done, total)`` is
        called after each part (``total`` is None for streams), from worker threads.

        On an unrecoverable error the session is aborted, unless ``keep_on_error``: then the
        error's ``upload_id`` names it, and passing ``upload_id=`` resumes it later, skipping
        the parts the server already holds with the same SHA-256 (use the same
        ``part_size``). With ``upload_id``, ``content_type`` and ``metadata`` come from the
        session.

        Example::

            obj = await bucket.upload_multipart("backup.tar", "/var/backups/backup.tar",
                                          progress=lambda done, total: print(done, total))
        """
        return await self._run(
            multipart.upload_multipart(
                self.name,
                key,
                source,
                part_size=part_size,
                max_parallel=max_parallel,
                content_type=content_type,
                metadata=metadata,
                upload_id=upload_id,
                progress=progress,
                keep_on_error=keep_on_error,
                part_retries=self._driver.config.retry.part_retries,
            )
        )
