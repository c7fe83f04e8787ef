"""Object endpoints: streaming PUT and DELETE (GET and HEAD: ``service.http.object_reads``).

PUT streams the body (Tornado's ``stream_request_body``) into a staging file through the
storage pipeline, 256 KiB at a time, hashing as bytes arrive; memory per upload is bounded
by the pipeline's in-flight window, never by the body. A body that declares a length of at
most ``SMALL_PUT_BYTES`` is kept in memory instead and staged, hashed, sealed and promoted
by one executor job (``objects.store_small_object``): most of a small PUT's cost was hops.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import time

from fsseam import crashpoints
from service.auth import Action, Principal
from service.common.wire import QUERY_VERSION_ID
from service.http.authn import is_presigned, presigned_principal
from service.http.put_request import (
    kept_in_memory,
    put_answer,
    read_put_intent,
    record_put_stages,
)
from service.http.request_contract import JSON_TYPE
from service.http.streaming import StreamingBodyHandler
from service.ops.objects import (
    PutIntent,
    delete_object,
    precheck_put,
    store_object,
    store_small_object,
)


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
        intent = read_put_intent(headers, self.bucket_name, self.key, ctx.config.max_object_bytes)
        self.authorize(Action.OBJECT_WRITE, bucket=self.bucket_name)
        room = precheck_put(ctx.engine, intent)
        self.intent = intent
        await self.begin_body(room, buffered=kept_in_memory(intent, headers))

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
        record_put_stages(self.ctx, size, stage_write, flush, timings, total)
        crashpoints.hit("put.before_response")
        headers, body_out = put_answer(version)
        for name, value in headers:
            self.set_header(name, value)
        self.set_status(200)
        self.set_header("Content-Type", JSON_TYPE)
        self.finish(body_out)

    def version_id_argument(self) -> str | None:
        return self.get_query_argument(QUERY_VERSION_ID, None)

    # -- DELETE -----------------------------------------------------------------------

    async def delete(self, bucket: str, key: str) -> None:
        self.raise_deferred_failure()
        self.authorize(Action.OBJECT_DELETE, bucket=self.bucket_name)
        await delete_object(self.ctx.engine, self.bucket_name, self.key, self.version_id_argument())
        self.set_status(204)
        self.finish()
