"""Video endpoints: thumbnails, packaging jobs, shares and share playback (``/api/v1/videos``).

The handlers parse, authorise and render; the work is ``service.media``'s (thumbnails,
``video_jobs``, ``video_shares``, the runner). Media errors become the contract's answers
here (``VideoHandler.write_error``): bad parameters 400 InvalidArgument, an undecodable video
415 UnsupportedMediaType, a picture over the pixel limit 413 EntityTooLarge.

Authorisation: every endpoint names its ``video:*`` action on the bucket of the video, job
or share (owner or admin); a job listing without ``bucket`` keeps only the jobs whose bucket
the caller may read. Playback is public: the share token in the path is the credential, and
it reaches only the outputs of its job. Playback is answered by the object read path
(``service.http.object_reads``): the same headers, conditions and ranges.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from tornado.httputil import HTTPServerRequest

from service.auth import Action, Principal, Resource, is_allowed, validate_expires_in
from service.common.api_errors import ApiError
from service.common.header_fields import validate_custom_metadata
from service.common.timefmt import rfc3339_ms
from service.common.wire import VIDEO_PLAY_PATH
from service.context import AppContext
from service.http.base import ApiHandler, Home, authorize_action
from service.http.object_reads import ReadTarget
from service.http.render import object_json
from service.media.video_errors import (
    UndecodableVideoError,
    VideoError,
    VideoParamsError,
    VideoTooLargeError,
)
from service.media.video_jobs import create_job, delete_job, require_job
from service.media.video_outputs import MASTERS
from service.media.video_params import (
    parse_job_params,
    parse_output_prefix,
    parse_thumbnail_params,
)
from service.media.video_shares import (
    create_share,
    require_share,
    resolve_playback,
    revoke_share,
)
from service.meta import VideoJob, records
from service.ops.buckets import require_bucket

DEFAULT_SHARE_SECONDS = 3600


def as_api_error(error: VideoError) -> ApiError:
    """The contract's answer to a media error."""
    if isinstance(error, UndecodableVideoError):
        return ApiError("UnsupportedMediaType", str(error))
    if isinstance(error, VideoTooLargeError):
        return ApiError("EntityTooLarge", str(error))
    return ApiError("InvalidArgument", str(error))


def job_json(job: VideoJob, progress: float) -> dict[str, Any]:
    """A Job; ``outputs`` names both formats, null for one not (yet) produced."""
    return {
        "job_id": job.job_id,
        "bucket": job.bucket,
        "key": job.key,
        "status": job.status,
        "progress": progress,
        "params": dict(job.params),
        "output_prefix": job.output_prefix,
        "outputs": {kind: job.outputs.get(kind) for kind in MASTERS},
        "error": job.error,
        "attempts": job.attempts,
        "worker": job.worker,
        "created_at": rfc3339_ms(job.created_at),
        "updated_at": rfc3339_ms(job.updated_at),
    }


def _required_string(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise VideoParamsError(f"{name} is required and must be a non-empty string")
    return value


class VideoHandler(ApiHandler):
    """Base of the video handlers: media errors in the contract's shape."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc_info = kwargs.get("exc_info")
        if exc_info and isinstance(exc_info[1], VideoError):
            self.send_api_error(as_api_error(exc_info[1]))
            return
        super().write_error(status_code, **kwargs)

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, VideoError):
            return
        super().log_exception(typ, value, tb)

    def send_job(self, status: int, job: VideoJob) -> None:
        self.send_json(status, job_json(job, self.ctx.video_jobs.progress(job)))

    def public_base(self) -> str:
        """Where absolute URLs point: ``SERVICE_PUBLIC_URL``, else this request's origin."""
        base = self.ctx.config.public_url or f"{self.request.protocol}://{self.request.host}"
        return base.rstrip("/")


class ThumbnailHandler(VideoHandler):
    route_name = "/api/v1/videos/thumbnails"
    SUPPORTED_METHODS = ("POST",)

    async def post(self) -> None:
        body = self.json_body()
        params = parse_thumbnail_params(body)
        metadata = validate_custom_metadata(body.get("custom_metadata") or {})
        self.authorize(Action.VIDEO_THUMBNAIL, bucket=params.bucket)
        version = await self.ctx.video_thumbnails.make(params, metadata)
        self.set_header("ETag", f'"{version.sha256}"')
        self.set_header("X-Version-Id", version.version_id or "null")
        self.send_json(201, object_json(version))


class JobsHandler(VideoHandler):
    route_name = "/api/v1/videos/jobs"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET", "POST")

    async def post(self) -> None:
        body = self.json_body()
        bucket, key = _required_string(body, "bucket"), _required_string(body, "key")
        params = parse_job_params(body)
        prefix = parse_output_prefix(body.get("output_prefix"))
        self.authorize(Action.VIDEO_JOB_CREATE, bucket=bucket)
        job = await create_job(
            self.ctx.engine,
            self.ctx.video_jobs,
            bucket=bucket,
            key=key,
            params=params,
            output_prefix=prefix,
            created_by=self.principal.user_id,
        )
        self.send_job(202, job)

    def get(self) -> None:
        bucket = self.get_query_argument("bucket", None, strip=False) or None
        status = self.get_query_argument("status", None, strip=False) or None
        if status is not None and status not in records.JOB_STATUSES:
            raise ApiError(
                "InvalidArgument", f"status must be one of {', '.join(records.JOB_STATUSES)}"
            )
        state = self.ctx.engine.state
        if bucket is not None:
            self.authorize(Action.VIDEO_JOB_LIST, bucket=bucket)
            require_bucket(self.ctx.engine, bucket)
        jobs = [job for job in state.media.jobs(bucket, status) if self.may_read(job)]
        progress = self.ctx.video_jobs.progress
        self.send_json(200, {"jobs": [job_json(job, progress(job)) for job in jobs]})

    def may_read(self, job: VideoJob) -> bool:
        record = self.ctx.engine.state.get_bucket(job.bucket)
        return record is not None and is_allowed(
            self.principal, Action.VIDEO_JOB_READ, Resource.bucket(record.owner)
        )


class JobHandler(VideoHandler):
    route_name = "/api/v1/videos/jobs/{job_id}"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET", "DELETE")

    def get(self, job_id: str) -> None:
        job = require_job(self.ctx.engine, job_id)
        self.authorize(Action.VIDEO_JOB_READ, bucket=job.bucket)
        self.send_job(200, job)

    async def delete(self, job_id: str) -> None:
        job = require_job(self.ctx.engine, job_id)
        self.authorize(Action.VIDEO_JOB_CANCEL, bucket=job.bucket)
        await delete_job(self.ctx.engine, self.ctx.video_jobs, job)
        self.set_status(204)
        self.finish()


class SharesHandler(VideoHandler):
    route_name = "/api/v1/videos/shares"
    SUPPORTED_METHODS = ("POST",)

    async def post(self) -> None:
        body = self.json_body()
        job_id = _required_string(body, "job_id")
        expires_in = body.get("expires_in")
        expires_in = DEFAULT_SHARE_SECONDS if expires_in is None else expires_in
        problem = validate_expires_in(expires_in)
        if problem:
            raise ApiError("InvalidArgument", problem)
        job = require_job(self.ctx.engine, job_id)
        self.authorize(Action.VIDEO_SHARE_CREATE, bucket=job.bucket)
        share, token = await create_share(
            self.ctx.engine,
            self.ctx.server_secret,
            job,
            expires_in=int(expires_in),
            created_by=self.principal.user_id,
            access_key_id=(
                self.principal.credential_id if self.principal.via == "access_key" else None
            ),
            now=time.time(),
        )
        base = f"{self.public_base()}{VIDEO_PLAY_PATH}/{token}/"
        urls = {
            f"{kind}_url": None
            if job.outputs.get(kind) is None
            else base + quote(job.outputs[kind][len(job.output_prefix) :], safe="/")
            for kind in MASTERS
        }
        self.send_json(
            201,
            {
                "share_id": share.share_id,
                "token": token,
                "expires_at": rfc3339_ms(share.expires_at),
                **urls,
                "job_id": job.job_id,
            },
        )


class ShareHandler(VideoHandler):
    route_name = "/api/v1/videos/shares/{share_id}"
    SUPPORTED_METHODS = ("DELETE",)

    async def delete(self, share_id: str) -> None:
        share = require_share(self.ctx.engine, share_id)
        self.authorize(Action.VIDEO_SHARE_DELETE, bucket=share.bucket)
        await revoke_share(self.ctx.engine, share)
        self.set_status(204)
        self.finish()


PLAY_ROUTE = "/api/v1/videos/play/{token}/{path}"


def resolve_playback_read(
    ctx: AppContext, request: HTTPServerRequest, path: Mapping[str, str]
) -> ReadTarget:
    """``GET``/``HEAD /api/v1/videos/play/{token}/{path}``: one output of a shared job.

    Public: the token is the credential. The output is served exactly as an object GET
    serves it (``ObjectRead``: ranges, conditions, headers); its route allows every origin
    (CORS), so a browser player on another origin can fetch playlists and segments.
    """
    engine = ctx.engine
    share, _job, version = resolve_playback(
        engine, ctx.server_secret, path["token"], path["path"], time.time()
    )
    creator = engine.state.get_user(share.created_by)
    principal = Principal(
        user_id=share.created_by,
        username=creator.username if creator is not None else "",
        role="user",
        credential_id=share.share_id,
        via="share",
    )
    authorize_action(engine.state, principal, Action.VIDEO_SHARE_PLAY)
    return ReadTarget(version, share.share_id, principal=principal)


class PlayOtherMethodsHandler(ApiHandler):
    """Methods other than GET and HEAD on the playback route (those two are answered by
    ``ObjectRead`` with ``resolve_playback_read``): 405 MethodNotAllowed."""

    route_name = PLAY_ROUTE
    SUPPORTED_METHODS = ("GET", "HEAD")
    public = True
