"""``AsyncBucketClient``: object operations in one bucket (its multipart sessions are
``AsyncMultipartUpload``, in ``_async_multipart``).

Like ``_async_client`` (which holds the client and its account-wide sub-clients), every
method builds a flow from ``_ops_*`` and runs it on the ``AsyncDriver``; no request is built
or parsed here. The async module is the source (``scripts/unasync.py`` writes the sync one
from it): edit the async one, never the copy.

Thread-safety: as the client's (see ``_async_client``); a handle holds only its bucket name.
"""

from __future__ import annotations

import builtins
import datetime
import os
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from service.client import _ops_batch as batch
from service.client import _ops_multipart as multipart
from service.client import _ops_objects as objects
from service.client import _ops_upkeep as upkeep
from service.client._async_events import stream_events
from service.client._async_io import AsyncDriver, Handle
from service.client._async_lock import AsyncObjectLock
from service.client._async_multipart import AsyncMultipartUpload
from service.client._async_stream import AsyncObjectStream
from service.client._documents import UNSET, Unset
from service.client._headers import ObjectHeaders
from service.client._models import (
    Bucket,
    ListPage,
    Object,
    ObjectVersion,
    OptimizedImage,
    PresignedUrl,
    Session,
    VersionPage,
)
from service.client._models_upkeep import Event, LifecycleRule, UploadPage, Webhook
from service.client._ops_batch import BatchItem, PutManyResult
from service.client._parts import MultipartSource, ProgressCallback
from service.client._payload import Data, PathBody, body_from
from service.client._ranges import RangeLike

__all__ = ["AsyncBucketClient"]

T = TypeVar("T")


class AsyncBucketClient(Handle, AsyncObjectLock):
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

    async def put_many(
        self, items: Iterable[BatchItem], *, prefix: str = ""
    ) -> builtins.list[PutManyResult]:
        """Store many objects in one request (a batch upload, docs/batch.md): one
        ``PutManyResult`` per entry, in order, with ``.object`` when stored or ``.error``
        when the server refused that entry alone. ``items``: ``(key, data)`` pairs or
        ``BatchEntry`` objects, data being bytes or a ``pathlib.Path``, sent as one tar
        stream while it is built (memory holds one entry); entries of up to 1 MiB carry
        their SHA-256, verified by the server. ``prefix`` goes before every key. A failure
        of the whole request raises, and then nothing was stored; it is not retried (the
        entries may be an iterator).

        Example: ``await bucket.put_many([("a.txt", b"alpha"), ("b.jpg", Path("b.jpg"))])``
        """
        return await self._run(batch.put_many(self.name, items, prefix=prefix))

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
        part_size: int | None = None,
    ) -> AsyncMultipartUpload:
        """Open a multipart upload session for ``key``; ``part_size``: the size the parts
        will have (the session then recommends it, and the server writes such parts once)."""
        session = await self._run(
            multipart.init(
                self.name, key, content_type=content_type, metadata=metadata, part_size=part_size
            )
        )
        return AsyncMultipartUpload(self._driver, session)

    async def get_multipart_upload(self, upload_id: str) -> AsyncMultipartUpload:
        """A handle on an open session (for example one kept after a failed upload)."""
        return AsyncMultipartUpload(self._driver, await self._run(multipart.status(upload_id)))

    async def list_multipart_uploads_page(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> UploadPage:
        """One page of this bucket's open multipart sessions (by key, then age)."""
        return await self._run(multipart.list_uploads_page(self.name, limit=limit, cursor=cursor))

    async def list_multipart_uploads(
        self, *, page_size: int | None = None
    ) -> AsyncIterator[Session]:
        """Every open multipart session of this bucket, fetched lazily page by page.

        Example: ``stale = [s.upload_id async for s in bucket.list_multipart_uploads()]``
        """
        cursor: str | None = None
        while True:
            page = await self.list_multipart_uploads_page(limit=page_size, cursor=cursor)
            for session in page.uploads:
                yield session
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

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

    async def lifecycle(self) -> builtins.list[LifecycleRule]:
        """The bucket's lifecycle rules (an empty list when it has none)."""
        return await self._run(upkeep.get_lifecycle(self.name))

    async def set_lifecycle(
        self, rules: Sequence[LifecycleRule | Mapping[str, Any]]
    ) -> builtins.list[LifecycleRule]:
        """Replace the bucket's lifecycle rules and return them as stored.

        Example::

            await bucket.set_lifecycle([LifecycleRule("logs", prefix="logs/",
                                                      expire_after_days=30)])
        """
        return await self._run(upkeep.put_lifecycle(self.name, rules))

    async def delete_lifecycle(self) -> None:
        """Remove every lifecycle rule of the bucket."""
        await self._run(upkeep.delete_lifecycle(self.name))

    async def notifications(self) -> builtins.list[Webhook]:
        """The bucket's webhooks, each with its delivery ``status`` (never its secret)."""
        return await self._run(upkeep.get_notifications(self.name))

    async def set_notifications(
        self, webhooks: Sequence[Webhook | Mapping[str, Any]]
    ) -> builtins.list[Webhook]:
        """Replace the bucket's webhooks (each needs a ``secret``) and return them."""
        return await self._run(upkeep.put_notifications(self.name, webhooks))

    async def delete_notifications(self) -> None:
        """Remove every webhook of the bucket."""
        await self._run(upkeep.delete_notifications(self.name))

    async def events(
        self, *, since: int | str | None = None, reconnect: bool = True
    ) -> AsyncIterator[Event]:
        """The bucket's object events as they happen, until the caller stops iterating.

        ``since`` (a sequence) first replays the retained events after it (410 EventsExpired,
        a ``ServiceError``, when they are no longer retained); without it the stream starts
        at the next event. A dropped connection or a restarting server is ridden out by
        reconnecting with the last sequence seen (``reconnect=False`` ends the iteration
        instead). Give the client ``timeout=None`` or one above the server's 15 s heartbeat.

        Example: ``async for event in bucket.events(since=0): print(event.type, event.key)``
        """
        after = None if since is None else str(since)
        async for event in stream_events(self._driver, self.name, after, reconnect):
            yield event
