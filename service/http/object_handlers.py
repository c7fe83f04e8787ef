"""Object endpoints: streaming PUT and DELETE (GET and HEAD: ``service.http.object_reads``).

PUT streams the body (Tornado's ``stream_request_body``) into a staging file through the
storage pipeline, 256 KiB at a time, hashing as bytes arrive; memory per upload is bounded
by the pipeline's in-flight window, never by the body. A body that declares a length of at
most ``SMALL_PUT_BYTES`` is kept in memory instead and staged, hashed, sealed and promoted
by one executor job (``objects.store_small_object``): most of a small PUT's cost was hops.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import re
import time
from typing import Any

from fsseam import crashpoints
from service.auth import Action, Principal
from service.common.api_errors import ApiError
from service.common.header_fields import (
    content_type_problem,
    decode_header_value,
    guess_content_type,
    validate_custom_metadata,
)
from service.common.numbers import MAX_DIGITS, require_int
from service.common.wire import (
    HEADER_CHECKSUM_SHA256,
    HEADER_META_PREFIX,
    HEADER_VERSION_ID,
    NULL_VERSION_ID,
    QUERY_VERSION_ID,
)
from service.http.authn import is_presigned, presigned_principal
from service.http.render import object_json
from service.http.streaming import StreamingBodyHandler
from service.ops.objects import (
    SMALL_PUT_BYTES,
    PutIntent,
    delete_object,
    precheck_put,
    store_object,
    store_small_object,
)

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_META_PREFIX = HEADER_META_PREFIX.lower()
MAX_CONTENT_LENGTH = 10**MAX_DIGITS - 1


def parse_custom_metadata(headers: Any) -> dict[str, str]:
    """``X-Meta-<name>: <value>`` headers as checked metadata with lowercase names; values
    may be RFC 2047 encoded words or raw UTF-8 (``service.common.header_fields``)."""
    metadata: dict[str, str] = {}
    for name, value in headers.get_all():
        lowered = name.lower()
        if lowered.startswith(_META_PREFIX) and len(lowered) > len(_META_PREFIX):
            field = lowered[len(_META_PREFIX) :]
            metadata[field] = decode_header_value(value, f"metadata value of {field!r}")
    return validate_custom_metadata(metadata)


def put_content_type(headers: Any, key: str) -> str:
    """The PUT's ``Content-Type`` (checked), or the type guessed from the key's extension."""
    declared = headers.get("Content-Type")
    if not declared:
        return guess_content_type(key)
    problem = content_type_problem(declared)
    if problem:
        raise ApiError("InvalidArgument", problem)
    return str(declared)


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
    ALLOWED_METHODS = ("PUT", "DELETE")  # GET and HEAD: ObjectRead

    intent: PutIntent | None = None

    @classmethod
    def allowed_methods(cls) -> tuple[str, ...]:
        return ("GET", "HEAD", *cls.ALLOWED_METHODS)

    async def prepare_request(self) -> None:
        self.bucket_name = self.path_kwargs["bucket"]
        self.key = self.path_kwargs["key"]
        await super().prepare_request()
        if self.request.method == "PUT":
            await self.prepare_put()

    def presigned(self) -> bool:
        return is_presigned(self.request)

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
            content_length = require_int(length_header, "Content-Length", 0, MAX_CONTENT_LENGTH)
            if content_length > ctx.config.max_object_bytes:
                raise ApiError("EntityTooLarge", "the object is larger than the server accepts")
        if_none_match = headers.get("If-None-Match")
        if if_none_match is not None and if_none_match.strip() != "*":
            raise ApiError("InvalidArgument", "a PUT supports only If-None-Match: *")
        intent = PutIntent(
            bucket=self.bucket_name,
            key=self.key,
            content_type=put_content_type(headers, self.key),
            custom_metadata=parse_custom_metadata(headers),
            if_none_match=if_none_match is not None,
            if_match=parse_if_match(headers.get("If-Match")),
            expected_sha256=parse_expected_sha256(headers.get(HEADER_CHECKSUM_SHA256)),
            content_length=content_length,
        )
        self.authorize(Action.OBJECT_WRITE, bucket=self.bucket_name)
        room = precheck_put(ctx.engine, intent)
        self.intent = intent
        small = (
            content_length is not None
            and content_length <= SMALL_PUT_BYTES
            and "Transfer-Encoding" not in headers
        )
        await self.begin_body(room, buffered=small)

    async def put(self, bucket: str, key: str) -> None:
        if not self.body_pending() or self.intent is None:
            return
        body = self.take_buffered_body()
        if body is None:
            staged, stage_write, flush = await self.finish_body()
            size = staged.size
            version, timings = await store_object(self.ctx.engine, self.intent, staged)
        else:
            size, flush = len(body), 0.0
            stage_write = time.perf_counter() - self.body_started
            version, timings = await store_small_object(self.ctx.engine, self.intent, body)
        total = time.perf_counter() - self.body_started
        self.ctx.performance.record_put(
            size, stage_write, flush, timings.promote, timings.journal_commit, total
        )
        self.ctx.metrics.observe_put_stages(
            stage_write, flush, timings.promote, timings.journal_commit, total
        )
        crashpoints.hit("put.before_response")
        self.set_header("ETag", f'"{version.sha256}"')
        self.set_header(HEADER_CHECKSUM_SHA256, version.sha256)
        self.set_header(HEADER_VERSION_ID, version.version_id or NULL_VERSION_ID)
        self.send_json(200, object_json(version))

    def version_id_argument(self) -> str | None:
        return self.get_query_argument(QUERY_VERSION_ID, None)

    # -- DELETE -----------------------------------------------------------------------

    async def delete(self, bucket: str, key: str) -> None:
        self.raise_deferred_failure()
        self.authorize(Action.OBJECT_DELETE, bucket=self.bucket_name)
        await delete_object(self.ctx.engine, self.bucket_name, self.key, self.version_id_argument())
        self.set_status(204)
        self.finish()
