"""Streaming request bodies into staging files: shared by object PUT and multipart parts.

The body arrives through Tornado's ``data_received`` in chunks of at most 256 KiB and goes
straight into a ``StagingUpload`` (hashing and writing on the executor, a bounded number of
chunks in flight), so memory per upload never depends on the body's size. A body that
crosses its quota or size limit is refused as soon as it does: its staging file is discarded
at once, and the error is sent once the rest of the body (up to 1 MiB more) was read and
dropped, because closing a connection with unread bytes resets it and the client would lose
the answer. A client that disconnects or stalls leaves nothing behind.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import tornado.web

from service.common.api_errors import ApiError, ServiceError
from service.common.numbers import bounded_int
from service.http.base import BODYLESS_METHODS, ApiHandler
from service.ops.objects import storage_failure
from service.storage import StagedPayload, StagingUpload
from service.storage.pipeline import BodySink

DRAIN_LIMIT_BYTES = 1024 * 1024
"""A refused request body up to this size is read and dropped before the error is sent."""


@tornado.web.stream_request_body
class StreamingBodyHandler(ApiHandler):
    """A handler whose PUT body is staged to disk while it arrives.

    Subclasses implement ``prepare_request``. When it refuses a request whose small body
    is already on its way (no ``Expect: 100-continue``), the refusal waits until the body
    was read and dropped: answering early and closing a connection with unread bytes makes
    the kernel reset it, and the client would never see the error.

    The same holds for a method the route does not answer. Tornado refuses a method missing
    from ``SUPPORTED_METHODS`` before the body, even an empty one, was read, and then closes
    the connection without saying so; a client that reuses it for its next request finds it
    reset. So every method Tornado knows is "supported" here, a subclass lists what it
    answers in ``ALLOWED_METHODS``, and any other method gets its 405 from Tornado's default
    verb once its body (up to ``DRAIN_LIMIT_BYTES``) was read.
    """

    SUPPORTED_METHODS = tornado.web.RequestHandler.SUPPORTED_METHODS
    ALLOWED_METHODS: tuple[str, ...] = ()
    """The methods this route answers; the rest are 405 (see the class docstring)."""

    @classmethod
    def allowed_methods(cls) -> tuple[str, ...]:
        return cls.ALLOWED_METHODS

    upload: StagingUpload | None = None
    buffered: list[bytes] | None = None
    """The chunks of a small body kept in memory instead of a staging file (see
    ``begin_body``)."""
    received = 0
    room: int | None = None
    """Bytes the body may hold before it crosses the bucket's quota (None: no quota)."""
    failure: ServiceError | None = None
    drained = 0
    """Bytes of a refused body read and dropped so far."""
    body_started = 0.0

    async def prepare(self) -> None:
        if self.request.method not in self.ALLOWED_METHODS:
            self.set_max_body_size(DRAIN_LIMIT_BYTES)  # then Tornado's default verb: 405
            return
        try:
            await self.prepare_request()
        except ServiceError as error:
            if not self.can_drain_body():
                raise
            self.failure = error
            self.set_max_body_size(DRAIN_LIMIT_BYTES)

    async def prepare_request(self) -> None:
        """Authenticate, validate and start the body; raise ApiError to refuse."""
        await super().prepare()

    def can_drain_body(self) -> bool:
        headers = self.request.headers
        if self.request.method in BODYLESS_METHODS:
            # No body to wait for, but Tornado reads the (empty) body only after prepare:
            # refusing now would close the connection. The verb raises the refusal instead.
            return "Content-Length" not in headers and "Transfer-Encoding" not in headers
        if self.request.method not in ("PUT", "POST"):
            return False
        if headers.get("Expect", "").lower() == "100-continue":
            return False
        return bounded_int(headers.get("Content-Length", ""), 0, DRAIN_LIMIT_BYTES) is not None

    def raise_deferred_failure(self) -> None:
        """Send the refusal that ``prepare`` deferred until the body was drained."""
        if self.failure is not None and not self._finished:
            raise self.failure

    async def begin_body(
        self,
        room: int | None,
        *,
        buffered: bool = False,
        create: Callable[[], BodySink] | None = None,
    ) -> None:
        """Accept a body of up to ``room`` bytes (quota) and the server's object limit.

        ``buffered``: the body is small and of a declared length, so it is kept in memory
        and handed whole to one executor job (``take_buffered_body``) instead of being
        streamed into a staging file: a small PUT then costs one hop to a thread, not three.
        ``create``: the sink to stream into instead of a new staging file.
        """
        self.room = room
        await self.acquire_upload_slot()
        self.set_max_body_size(self.ctx.config.max_object_bytes)
        self.body_started = time.perf_counter()
        if buffered:
            self.buffered = []
            return
        engine = self.ctx.engine
        try:
            self.upload = await StagingUpload.start(engine.store, engine.executor, create=create)
        except OSError as exc:
            self.release_upload_slot()
            raise storage_failure(exc) from None

    async def data_received(self, chunk: bytes) -> None:
        if self.failure is not None:
            self.drain(len(chunk))
            return
        upload = self.upload
        if upload is None and self.buffered is None:
            return
        self.received += len(chunk)
        self.bytes_in = self.received
        self.touch_upload()
        try:
            if self.room is not None and self.received > self.room:
                raise ApiError("QuotaExceeded", "the upload would take the bucket past its quota")
            if self.received > self.ctx.config.max_object_bytes:
                raise ApiError("EntityTooLarge", "the body is larger than the server accepts")
            if upload is None:
                assert self.buffered is not None
                self.buffered.append(chunk)
            else:
                await upload.write(chunk)
        except ServiceError as error:
            await self.fail_upload(error)
        except OSError as exc:
            await self.fail_upload(storage_failure(exc))

    async def fail_upload(self, error: ServiceError) -> None:
        """Stop an upload mid-body: discard the staging file now, and answer once the rest
        of the body is read and dropped (``drain``), like a refusal made in ``prepare``."""
        self.failure = error
        await self.discard_upload()

    def drain(self, count: int) -> None:
        """Drop ``count`` bytes of a refused body. Past ``DRAIN_LIMIT_BYTES`` stop waiting:
        answer now and close, since the client may be sending gigabytes."""
        self.drained += count
        failure = self.failure
        if failure is None or self._finished or self.drained <= DRAIN_LIMIT_BYTES:
            return
        # The rest of the body will not be read: say so, so that a client keeping the
        # connection for its next request does not find it reset.
        self.send_api_error(failure, extra_headers=(("Connection", "close"),))

    async def discard_upload(self) -> None:
        self.buffered = None
        upload, self.upload = self.upload, None
        self.release_upload_slot()
        if upload is not None:
            await upload.abort()

    def body_pending(self) -> bool:
        """Whether the body was received whole and awaits ``finish_body``.

        Raises the refusal ``prepare`` deferred, if any.
        """
        self.raise_deferred_failure()
        return not self._finished and (self.upload is not None or self.buffered is not None)

    def take_buffered_body(self) -> bytes | None:
        """The whole body when it was kept in memory (``begin_body(buffered=True)``), else
        None (then ``finish_body``); the upload slot is given back."""
        chunks, self.buffered = self.buffered, None
        if chunks is None:
            return None
        self.release_upload_slot()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def finish_body(self) -> tuple[StagedPayload, float, float]:
        """Flush the staged body: (staged payload, stage-write seconds, flush seconds)."""
        upload = self.upload
        if upload is None:
            raise ApiError("InternalError", "no body was staged")
        flush_started = time.perf_counter()
        try:
            staged = await upload.finish()
        except OSError as exc:
            await self.discard_upload()
            raise storage_failure(exc) from None
        self.upload = None
        self.release_upload_slot()
        return staged, flush_started - self.body_started, time.perf_counter() - flush_started

    def on_connection_close(self) -> None:
        super().on_connection_close()
        self.buffered = None
        if self.upload is not None:
            self.ctx.spawn(self.discard_upload())

    def on_finish(self) -> None:
        self.release_upload_slot()
        super().on_finish()
