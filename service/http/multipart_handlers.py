"""Multipart endpoints: ``/api/v1/multipart/...``.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from typing import Any

from service.auth import Action
from service.auth.policy import authorize_key
from service.common.api_errors import ApiError
from service.common.timefmt import now_ms, rfc3339_ms
from service.common.wire import (
    HEADER_CHECKSUM_SHA256,
    HEADER_VERSION_ID,
    NULL_VERSION_ID,
    QUERY_PART_NUMBER,
)
from service.http.base import ApiHandler, Home
from service.http.bucket_handlers import decode_cursor, encode_cursor, parse_limit
from service.http.job_credentials import job_uploads_held
from service.http.put_request import parse_expected_sha256
from service.http.render import object_json
from service.http.streaming import StreamingBodyHandler
from service.limits.caps import MAX_OPEN_UPLOADS_PER_USER
from service.meta import PartInfo, UploadSession
from service.multipart.in_place import Claim
from service.multipart.operations import (
    abort_upload,
    complete_upload,
    max_parallel_parts,
    open_session,
    parse_part_number,
    part_quota_room,
    start_upload,
    store_part,
)
from service.ops.buckets import require_bucket


def session_json(session: UploadSession) -> dict[str, Any]:
    return {
        "upload_id": session.upload_id,
        "bucket": session.bucket,
        "key": session.key,
        "content_type": session.content_type,
        "custom_metadata": dict(session.custom_metadata),
        "recommended_part_size": session.recommended_part_size,
        "max_parallel_parts": max_parallel_parts(),
        "expires_at": rfc3339_ms(session.expires_at),
        "created_at": rfc3339_ms(session.created_at),
    }


def part_json(part: PartInfo) -> dict[str, Any]:
    return {"part_number": part.part_number, "etag": part.sha256, "size_bytes": part.size}


class MultipartInitHandler(ApiHandler):
    route_name = "/api/v1/multipart/init"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("POST",)

    async def post(self) -> None:
        body = self.json_body()
        bucket, key = body.get("bucket"), body.get("key")
        if isinstance(bucket, str):
            self.authorize(Action.MULTIPART_CREATE, bucket=bucket)
            text_key = key if isinstance(key, str) else ""
            authorize_key(self.principal, Action.MULTIPART_CREATE, bucket, text_key)
        owner = self.principal.user_id
        engine = self.ctx.engine
        now = now_ms()
        if self.principal.grant is not None:
            counted, held, cap = job_uploads_held(engine.state, self.principal, now)
        else:
            counted, cap = owner, MAX_OPEN_UPLOADS_PER_USER
            held = sum(1 for s in engine.state.uploads() if s.owner == owner and s.expires_at > now)
        with self.ctx.reservations.within_cap("open multipart uploads", counted, held, cap):
            session = await start_upload(engine, owner, body)
        self.send_json(201, session_json(session))


class MultipartListHandler(ApiHandler):
    route_name = "/api/v1/multipart"
    SUPPORTED_METHODS = ("GET",)

    def get(self) -> None:
        """Open sessions of a bucket by key, then age: ``limit`` (1..1000) per page, and
        ``next_cursor`` to resume after the page, like the object listing."""
        bucket = self.get_query_argument("bucket", None, strip=False)
        if not bucket:
            raise ApiError("InvalidArgument", "the bucket query parameter is required")
        self.authorize(Action.MULTIPART_LIST, bucket=bucket)
        require_bucket(self.ctx.engine, bucket)
        limit = parse_limit(self.get_query_argument("limit", None, strip=False))
        after = session_marker(self.get_query_argument("cursor", "", strip=False) or None)
        now = now_ms()
        sessions = [
            session
            for session in self.ctx.engine.state.uploads(bucket)
            if session.expires_at > now and (after is None or sort_key(session) > after)
        ]
        page = sessions[:limit]
        next_cursor = (
            encode_cursor(list(sort_key(page[-1]))) if len(sessions) > limit and page else None
        )
        self.send_json(
            200,
            {"uploads": [session_json(session) for session in page], "next_cursor": next_cursor},
        )


def sort_key(session: UploadSession) -> tuple[str, int, str]:
    """Where a session sits in the listing (the state sorts a bucket's sessions so)."""
    return (session.key, session.created_at, session.upload_id)


def session_marker(cursor: str | None) -> tuple[str, int, str] | None:
    """The last session of the previous page, from its cursor (400 if not ours)."""
    if cursor is None:
        return None
    marker = decode_cursor(cursor)
    if (
        not isinstance(marker, list)
        or len(marker) != 3
        or not isinstance(marker[0], str)
        or not isinstance(marker[1], int)
        or not isinstance(marker[2], str)
    ):
        raise ApiError("InvalidArgument", "cursor is not valid")
    return (marker[0], marker[1], marker[2])


class MultipartSessionHandler(ApiHandler):
    route_name = "/api/v1/multipart/{upload_id}"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET", "DELETE")

    def session(self, upload_id: str, action: Action) -> UploadSession:
        session = open_session(self.ctx.engine, upload_id)
        self.authorize(action, bucket=session.bucket)
        return session

    def get(self, upload_id: str) -> None:
        session = self.session(upload_id, Action.MULTIPART_READ)
        parts = sorted(self.ctx.engine.state.upload_parts(upload_id), key=lambda p: p.part_number)
        body = session_json(session)
        body["parts"] = [part_json(part) for part in parts]
        self.send_json(200, body)

    async def delete(self, upload_id: str) -> None:
        session = self.session(upload_id, Action.MULTIPART_ABORT)
        await abort_upload(self.ctx.uploads, session)
        self.set_status(204)
        self.finish()


class MultipartCompleteHandler(ApiHandler):
    route_name = "/api/v1/multipart/{upload_id}/complete"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("POST",)

    async def post(self, upload_id: str) -> None:
        session = open_session(self.ctx.engine, upload_id)
        self.authorize(Action.MULTIPART_COMPLETE, bucket=session.bucket)
        version = await complete_upload(self.ctx.uploads, session, self.json_body())
        self.ctx.performance.record_stored(1, version.size)  # one object stored, as a PUT
        self.set_header("ETag", f'"{version.sha256}"')
        self.set_header(HEADER_VERSION_ID, version.version_id or NULL_VERSION_ID)
        self.send_json(200, object_json(version))


class MultipartPartHandler(StreamingBodyHandler):
    route_name = "/api/v1/multipart/{upload_id}/part"
    ALLOWED_METHODS = ("PUT",)

    upload_session: UploadSession | None = None
    part_number = 0
    expected_sha256: str | None = None
    claim: Claim | None = None
    """Set while the body is written in place, into the upload's file."""

    async def prepare_request(self) -> None:
        await super().prepare_request()
        upload_id = self.path_kwargs["upload_id"]
        session = open_session(self.ctx.engine, upload_id)
        self.authorize(Action.MULTIPART_UPLOAD_PART, bucket=session.bucket)
        authorize_key(self.principal, Action.MULTIPART_UPLOAD_PART, session.bucket, session.key)
        self.part_number = parse_part_number(
            self.get_query_argument(QUERY_PART_NUMBER, None, strip=False)
        )
        self.expected_sha256 = parse_expected_sha256(
            self.request.headers.get(HEADER_CHECKSUM_SHA256)
        )
        engine = self.ctx.engine
        engine.ensure_writable()
        self.upload_session = session
        room = part_quota_room(engine, session)
        direct = self.ctx.uploads.in_place
        self.claim = await direct.claim(session, self.part_number, self.declared_length())
        create = None if self.claim is None else direct.writer(self.claim)
        try:
            await self.begin_body(room, create=create)
        except BaseException:
            self.release_claim()
            raise

    def declared_length(self) -> int | None:
        """The body's Content-Length (Tornado checked it is a number), None if chunked."""
        raw = self.request.headers.get("Content-Length")
        return int(raw) if raw is not None and raw.isdigit() else None

    async def put(self, upload_id: str) -> None:
        if not self.body_pending() or self.upload_session is None:
            return
        try:
            staged, _, _ = await self.finish_body()
            part = await store_part(
                self.ctx.uploads,
                self.upload_session,
                self.part_number,
                staged,
                self.expected_sha256,
            )
        finally:
            self.release_claim()
        self.set_header("ETag", f'"{part.sha256}"')
        self.send_json(200, part_json(part))

    async def discard_upload(self) -> None:
        await super().discard_upload()
        self.release_claim()  # only once nothing more can reach the region

    def on_finish(self) -> None:
        super().on_finish()
        if self.upload is None:
            self.release_claim()

    def release_claim(self) -> None:
        claim, self.claim = self.claim, None
        if claim is not None:
            self.ctx.uploads.in_place.release(claim)
