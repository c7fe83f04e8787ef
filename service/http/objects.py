"""Object endpoints: streaming PUT, GET/HEAD with ranges and conditions, DELETE.

PUT streams the body (Tornado's ``stream_request_body``) into a staging file through the
storage pipeline, 256 KiB at a time, hashing as bytes arrive; memory per upload is bounded
by the pipeline's in-flight window, never by the body. GET sends small bodies from one
executor read and large ones with ``sendfile``.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import re
import time
from typing import Any

from tornado.iostream import StreamClosedError

from journal import crashpoints
from service.auth import Action, Principal
from service.errors import ApiError
from service.http.authn import is_presigned, presigned_principal
from service.http.conditions import (
    ByteWindow,
    RangeResult,
    Verdict,
    evaluate_read_conditions,
    if_range_allows,
    parse_range,
)
from service.http.render import object_json
from service.http.sendfile import send_file_body
from service.http.streaming import StreamingBodyHandler
from service.meta import ObjectVersion
from service.objects import (
    DEFAULT_CONTENT_TYPE,
    PutIntent,
    delete_object,
    precheck_put,
    quota_room,
    read_small_window,
    resolve_version,
    store_object,
)
from service.timefmt import http_date

SMALL_BODY_BYTES = 256 * 1024
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_META_PREFIX = "x-meta-"


def parse_custom_metadata(headers: Any) -> dict[str, str]:
    """``X-Meta-<name>: <value>`` headers as a dict with lowercase names."""
    metadata: dict[str, str] = {}
    for name, value in headers.get_all():
        lowered = name.lower()
        if lowered.startswith(_META_PREFIX) and len(lowered) > len(_META_PREFIX):
            metadata[lowered[len(_META_PREFIX) :]] = value
    return metadata


def parse_if_match(value: str | None) -> str | None:
    """The hex etag of an ``If-Match: "<etag>"`` header (None when absent)."""
    if value is None:
        return None
    tag = value.strip()
    if tag.startswith('"') and tag.endswith('"') and len(tag) >= 2:
        return tag[1:-1]
    raise ApiError("InvalidArgument", 'If-Match must be a quoted ETag: "<hex>"')


def parse_expected_sha256(value: str | None) -> str | None:
    if value is None:
        return None
    digest = value.strip().lower()
    if not _SHA256_HEX.match(digest):
        raise ApiError("InvalidArgument", "X-Checksum-Sha256 must be 64 hex characters")
    return digest


class ObjectHandler(StreamingBodyHandler):
    """``/api/v1/buckets/{bucket}/objects/{key}``."""

    route_name = "/api/v1/buckets/{bucket}/objects/{key}"
    SUPPORTED_METHODS = ("GET", "HEAD", "PUT", "DELETE")

    intent: PutIntent | None = None

    async def prepare_request(self) -> None:
        self.bucket_name = self.path_kwargs["bucket"]
        self.key = self.path_kwargs["key"]
        await super().prepare_request()
        if self.request.method == "PUT":
            await self.prepare_put()

    def authenticate(self) -> Principal:
        """A presigned URL stands in for credentials on exactly its method and object."""
        if is_presigned(self.request):
            return presigned_principal(
                self.ctx.engine.state,
                self.ctx.server_secret,
                self.request,
                self.bucket_name,
                self.key,
            )
        return super().authenticate()

    # -- PUT --------------------------------------------------------------------------

    async def prepare_put(self) -> None:
        ctx = self.ctx
        headers = self.request.headers
        length_header = headers.get("Content-Length")
        content_length = None
        if length_header is not None:
            if not length_header.isdigit():
                raise ApiError("InvalidArgument", "Content-Length must be a number")
            content_length = int(length_header)
            if content_length > ctx.config.max_object_bytes:
                raise ApiError("EntityTooLarge", "the object is larger than the server accepts")
        if_none_match = headers.get("If-None-Match")
        if if_none_match is not None and if_none_match.strip() != "*":
            raise ApiError("InvalidArgument", "a PUT supports only If-None-Match: *")
        intent = PutIntent(
            bucket=self.bucket_name,
            key=self.key,
            content_type=headers.get("Content-Type") or DEFAULT_CONTENT_TYPE,
            custom_metadata=parse_custom_metadata(headers),
            if_none_match=if_none_match is not None,
            if_match=parse_if_match(headers.get("If-Match")),
            expected_sha256=parse_expected_sha256(headers.get("X-Checksum-Sha256")),
            content_length=content_length,
        )
        self.authorize(Action.OBJECT_WRITE, bucket=self.bucket_name)
        precheck_put(ctx.engine, intent)
        self.intent = intent
        await self.begin_body(quota_room(ctx.engine, self.bucket_name, self.key))

    async def put(self, bucket: str, key: str) -> None:
        if not self.body_pending() or self.intent is None:
            return
        staged, stage_write, flush = await self.finish_body()
        version, timings = await store_object(self.ctx.engine, self.intent, staged)
        total = time.perf_counter() - self.body_started
        self.ctx.performance.record_put(
            staged.size, stage_write, flush, timings.promote, timings.journal_commit, total
        )
        self.ctx.metrics.observe_put_stages(
            stage_write, flush, timings.promote, timings.journal_commit, total
        )
        crashpoints.hit("put.before_response")
        self.set_header("ETag", f'"{version.sha256}"')
        self.set_header("X-Checksum-Sha256", version.sha256)
        self.set_header("X-Version-Id", version.version_id or "null")
        self.send_json(200, object_json(version))

    # -- GET / HEAD -------------------------------------------------------------------

    def version_id_argument(self) -> str | None:
        return self.get_query_argument("version_id", None)

    async def get(self, bucket: str, key: str) -> None:
        await self.read_object(send_body=True)

    async def head(self, bucket: str, key: str) -> None:
        await self.read_object(send_body=False)

    async def read_object(self, *, send_body: bool) -> None:
        started = time.perf_counter()
        self.raise_deferred_failure()
        self.authorize(Action.OBJECT_READ, bucket=self.bucket_name)
        version = resolve_version(
            self.ctx.engine, self.bucket_name, self.key, self.version_id_argument()
        )
        await self.serve_version(version, send_body=send_body, started=started)

    async def serve_version(
        self, version: ObjectVersion, *, send_body: bool, started: float
    ) -> None:
        """Answer a GET/HEAD of ``version``: headers, conditions, range, body. Shared with
        video share playback (``service.http.videos``), which finds the version its own way."""
        modified = version.updated_at // 1000
        self.set_object_headers(version)
        headers = {name: value for name, value in self.request.headers.get_all()}
        verdict = evaluate_read_conditions(headers, version.sha256, modified)
        if verdict is Verdict.PRECONDITION_FAILED:
            raise ApiError("PreconditionFailed", "a precondition of the request failed")
        if verdict is Verdict.NOT_MODIFIED:
            self.set_status(304)
            self.clear_header("Content-Length")
            self.finish()
            return
        window: ByteWindow | RangeResult = RangeResult.WHOLE
        range_header = self.request.headers.get("Range")
        if range_header is not None and if_range_allows(
            self.request.headers.get("If-Range"), version.sha256, modified
        ):
            window = parse_range(range_header, version.size)
        if window is RangeResult.UNSATISFIABLE:
            raise ApiError(
                "InvalidRange",
                "the range is not satisfiable",
                headers={"Content-Range": f"bytes */{version.size}"},
            )
        if isinstance(window, ByteWindow):
            self.set_status(206)
            self.set_header("Content-Range", window.content_range(version.size))
        else:
            window = ByteWindow(0, version.size)
        self.set_header("Content-Length", str(window.length))
        if not send_body or window.length == 0:
            self.finish()
            return
        await self.send_window(version, window, started)

    def set_object_headers(self, version: ObjectVersion) -> None:
        self.set_header("Content-Type", version.content_type)
        self.set_header("ETag", f'"{version.sha256}"')
        self.set_header("X-Checksum-Sha256", version.sha256)
        self.set_header("Last-Modified", http_date(version.updated_at))
        self.set_header("Accept-Ranges", "bytes")
        self.set_header("X-Version-Id", version.version_id or "null")
        self.clear_header("Cache-Control")
        for name, value in version.custom_metadata.items():
            self.set_header(f"X-Meta-{name}", value)

    async def send_window(self, version: ObjectVersion, window: ByteWindow, started: float) -> None:
        engine = self.ctx.engine
        assert version.payload_id is not None
        if window.length <= SMALL_BODY_BYTES:
            data = await read_small_window(
                engine, version.payload_id, version.size, window.start, window.length
            )
            first_byte = time.perf_counter() - started
            self.finish(data)
        else:
            payload = await engine.run_blocking(engine.store.open_payload, version.payload_id)
            try:
                first_byte = time.perf_counter() - started
                fd = payload.fileno()
                if fd is None:
                    raise ApiError("InternalError", "payload has no descriptor")
                await send_file_body(
                    self,
                    fd,
                    window.start,
                    window.length,
                    executor=engine.executor,
                    idle_timeout=self.ctx.config.idle_timeout,
                )
            except StreamClosedError:
                return
            finally:
                await engine.run_blocking(payload.close)
            self.finish()
        self.bytes_out = window.length
        total = time.perf_counter() - started
        self.ctx.performance.record_get(window.length, first_byte, total)
        self.ctx.metrics.observe_get_stages(first_byte, total)

    # -- DELETE -----------------------------------------------------------------------

    async def delete(self, bucket: str, key: str) -> None:
        self.raise_deferred_failure()
        self.authorize(Action.OBJECT_DELETE, bucket=self.bucket_name)
        await delete_object(self.ctx.engine, self.bucket_name, self.key, self.version_id_argument())
        self.set_status(204)
        self.finish()
