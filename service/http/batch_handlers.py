"""``POST /api/v1/buckets/{bucket}/batch``: a tar stream stored as one object per file.

An endpoint added beyond the contract (docs/batch.md). The request is checked as a PUT's
is before its body (credentials, ``object:write`` on the bucket, the bucket, a writable
server, the body's size), then the body streams through a ``BodyPipe`` to a reader thread
that stages the members (``service.ops.batch``); the commits and the answer follow once the
body ended. The answer is 200 with one outcome per member, in stream order: the Object, or
``{"key", "error": {"code", "message", "status"}}`` for a member refused by its own checks
(as S3's multi-object delete reports each key). A body that is not a well-formed tar
stores nothing and is 400 InvalidArgument.

Thread-safety: event-loop thread only (the reader thread sees only the pipe).
"""

from __future__ import annotations

import asyncio
from typing import Any

from service.auth import Action
from service.common.api_errors import ApiError, status_of
from service.common.names import key_problem
from service.common.numbers import MAX_DIGITS, require_int
from service.http.body_pipe import BodyPipe, in_own_thread
from service.http.render import object_json
from service.http.streaming import StreamingBodyHandler
from service.ops.batch import BatchLimits, MemberFailure, MemberStored, Outcome, store_batch
from service.ops.buckets import require_bucket

ROUTE = "/api/v1/buckets/{bucket}/batch"
TAR_TYPES = frozenset({"application/x-tar", "application/tar"})
MAX_CONTENT_LENGTH = 10**MAX_DIGITS - 1


def batch_prefix(values: list[bytes] | None) -> str:
    """The ``prefix`` query argument (its last value, percent-decoded bytes), checked as
    the start of a key (empty is fine). Read raw: Tornado's ``get_query_argument`` would
    turn control characters into spaces and strip whitespace, storing keys the client did
    not name.

    >>> batch_prefix([b" a/"]), batch_prefix(None)
    (' a/', '')
    """
    raw = values[-1] if values else b""
    try:
        value = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError("InvalidKey", "prefix: key must be valid UTF-8") from None
    if value and (problem := key_problem(value)):
        raise ApiError("InvalidKey", f"prefix: {problem}")
    return value


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    """One member's entry in the answer."""
    if isinstance(outcome, MemberFailure):
        error = outcome.error
        return {
            "key": outcome.key,
            "error": {"code": error.code, "message": error.message, "status": status_of(error)},
        }
    return object_json(outcome.version)


class BatchHandler(StreamingBodyHandler):
    """``/api/v1/buckets/{bucket}/batch`` (POST)."""

    route_name = ROUTE
    ALLOWED_METHODS = ("POST",)

    pipe: BodyPipe | None = None
    job: asyncio.Future[list[Outcome]] | None = None

    async def prepare_request(self) -> None:
        self.bucket_name = self.path_kwargs["bucket"]
        await super().prepare_request()
        ctx = self.ctx
        self.check_tar_headers()
        prefix = batch_prefix(self.request.query_arguments.get("prefix"))
        self.authorize(Action.OBJECT_WRITE, bucket=self.bucket_name)
        ctx.engine.ensure_writable()
        require_bucket(ctx.engine, self.bucket_name)
        pipe = await self.open_pipe()
        limits = BatchLimits(max_member_bytes=ctx.config.max_object_bytes)
        self.job = asyncio.ensure_future(
            store_batch(
                ctx.engine,
                self.bucket_name,
                prefix,
                pipe,
                limits,
                run=lambda stage: in_own_thread(pipe, stage),
            )
        )
        self.job.add_done_callback(_retrieve)

    def check_tar_headers(self) -> None:
        """The body's declared type (a tar stream) and length (within the object limit)."""
        headers = self.request.headers
        declared = headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if declared and declared not in TAR_TYPES:
            raise ApiError("InvalidArgument", "the body must be a tar stream (application/x-tar)")
        length_header = headers.get("Content-Length")
        if length_header is not None:
            length = require_int(length_header, "Content-Length", 0, MAX_CONTENT_LENGTH)
            if length > self.ctx.config.max_object_bytes:
                raise ApiError("EntityTooLarge", "the batch is larger than the server accepts")

    async def open_pipe(self) -> BodyPipe:
        """Take an upload slot (waiting for one as ``acquire_upload_slot`` does) and open
        the pipe the body is read from (once every check passed)."""
        await self.acquire_upload_slot()
        self.set_max_body_size(self.ctx.config.max_object_bytes)
        pipe = self.pipe = BodyPipe(asyncio.get_running_loop())
        return pipe

    def can_drain_body(self) -> bool:
        """A refusal before the body waits for it also when it is chunked (as batches from
        the client are): a small batch is read and dropped, so the client gets the answer
        instead of a reset; past ``DRAIN_LIMIT_BYTES`` the answer goes out and the
        connection closes (``drain``)."""
        chunked = "chunked" in self.request.headers.get("Transfer-Encoding", "").lower()
        expects = self.request.headers.get("Expect", "").lower() == "100-continue"
        return (chunked and not expects) or super().can_drain_body()

    async def data_received(self, chunk: bytes) -> None:
        if self.failure is not None:
            self.drain(len(chunk))
            return
        if self.pipe is None:
            return
        self.received += len(chunk)
        self.bytes_in = self.received
        self.touch_upload()
        await self.pipe.feed(chunk)

    async def post(self, bucket: str) -> None:
        self.raise_deferred_failure()
        if self.pipe is None or self.job is None or self._finished:
            return
        self.pipe.end()
        self.release_upload_slot()  # the body is in: what is left is the server's own work
        outcomes = await self.job
        stored = [outcome.version for outcome in outcomes if isinstance(outcome, MemberStored)]
        if stored:  # each member is a PUT in the figures (docs/batch.md)
            self.ctx.performance.record_stored(len(stored), sum(each.size for each in stored))
        self.send_json(
            200,
            {
                "results": [outcome_json(outcome) for outcome in outcomes],
                "stored": len(stored),
                "failed": len(outcomes) - len(stored),
            },
        )

    def on_connection_close(self) -> None:
        if self.pipe is not None:
            self.pipe.abort()
        super().on_connection_close()


def _retrieve(job: asyncio.Future[list[Outcome]]) -> None:
    """Mark a job's failure as seen when nobody awaits it (the client went away)."""
    if not job.cancelled():
        job.exception()
