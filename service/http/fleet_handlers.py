"""The media fleet's routes: a worker's attempt (claim, heartbeat, complete, fail) and the
admins' list of workers (``/api/v1/videos/...``).

A fleet worker holds no credential of the server: each of its calls here carries the job
token of its task (``Authorization: Bearer vjt....``, ``service.auth.job_tokens``). A claim
takes the task's claim token; the others the lease token the claim (or the last heartbeat)
answered. The token must name the job of the path; whether its attempt may still act is
the runner's (``service.media.fleet_runner``) decision against the journal and the lease:
409 InvalidState once the attempt is not running (the worker stops), 404 NoSuchJob for a job
deleted meanwhile. Without a fleet (``SERVICE_MEDIA_QUEUE`` unset) these routes answer 409.
Every route here is the writer's (``service.procs.forward``): the leases live there.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from service.auth import (
    AccessDeniedError,
    Action,
    SignatureExpiredError,
    SignatureInvalidError,
    TokenError,
    UnauthorizedError,
    parse_bearer_authorization,
)
from service.auth.job_tokens import JobClaims, Use, verify_job_token
from service.auth.policy import JobGrant
from service.common.api_errors import ApiError
from service.common.timefmt import now_ms, rfc3339_ms
from service.http.base import ApiHandler, Home
from service.http.batch_handlers import BatchHandler
from service.http.body_pipe import in_own_thread
from service.http.job_credentials import job_uploads_held
from service.http.streaming import StreamingBodyHandler
from service.http.videos import job_json
from service.media.fleet_book import MAX_ERROR_CHARS, MAX_NAME_CHARS
from service.media.fleet_outputs import open_output_uploads
from service.media.fleet_runner import FleetJobRunner, Grant
from service.ops.batch import BatchLimits, Staged, stage_batch


def worker_json(record: Any) -> dict[str, Any]:
    return {
        "id": record.worker_id,
        "host": record.host,
        "running": len(record.running),
        "completed": record.completed,
        "failed": record.failed,
        "last_seen": rfc3339_ms(record.last_seen_ms),
    }


def _text(body: dict[str, Any], name: str, limit: int) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value or len(value) > limit or not value.isprintable():
        raise ApiError("InvalidArgument", f"{name} must be printable text of 1..{limit} chars")
    return value


class AttemptHandler(ApiHandler):
    """Base of the attempt routes: the fleet runner and the job token of the request."""

    home = Home.JOURNAL  # the fleet runner and its leases live in the journal's process
    SUPPORTED_METHODS = ("POST",)
    use: Use = "lease"
    job_claims: JobClaims

    async def prepare(self) -> None:
        """Authenticate by the job token alone (no user is behind it), against the path's
        job."""
        self.job_claims = self.claims(self.path_kwargs["job_id"])

    def runner(self) -> FleetJobRunner:
        runner = self.ctx.video_jobs
        if not isinstance(runner, FleetJobRunner):
            raise ApiError("InvalidState", "this server runs no media fleet (SERVICE_MEDIA_QUEUE)")
        return runner

    def claims(self, job_id: str) -> JobClaims:
        header = self.request.headers.get("Authorization") or ""
        token = parse_bearer_authorization(header)
        if token is None:
            raise UnauthorizedError("a job token is required")
        # A lease token past its expiry may still renew a lease the server holds (after a
        # restart of the server, say): the runner's lease, not the token, decides.
        claims = verify_job_token(self.ctx.server_secret, token, time.time(), expired_ok=True)
        if claims is TokenError.EXPIRED:
            raise SignatureExpiredError()
        if isinstance(claims, TokenError) or claims.use != self.use or claims.job_id != job_id:
            raise SignatureInvalidError("not a job token for this job and call")
        self.credential_id = f"{claims.job_id}#{claims.attempt}"
        return claims

    def send_grant(self, grant: Grant, extra: dict[str, Any] | None = None) -> None:
        self.send_json(
            200,
            {
                "attempt": grant.job.attempts,
                "token": grant.token,
                "lease_seconds": grant.lease_seconds,
                "lease_expires_at": rfc3339_ms(int(grant.expires_at * 1000)),
                **(extra or {}),
            },
        )


class ClaimHandler(AttemptHandler):
    route_name = "/api/v1/videos/jobs/{job_id}/claim"
    use = "claim"

    async def post(self, job_id: str) -> None:
        runner = self.runner()
        claims = self.job_claims
        body = self.json_body()
        worker = _text(body, "worker", MAX_NAME_CHARS)
        host = _text(body, "host", MAX_NAME_CHARS)
        grant = await runner.claim(claims, worker, host)
        job = grant.job
        source = self.ctx.engine.state.head_object(job.bucket, job.key)
        self.send_grant(
            grant,
            {
                "job": job_json(job, 0.0),
                "source": {
                    "bucket": job.bucket,
                    "key": job.key,
                    "size_bytes": None if source is None else source.size,
                },
                "max_pixels": runner.max_pixels,
            },
        )


class HeartbeatHandler(AttemptHandler):
    route_name = "/api/v1/videos/jobs/{job_id}/heartbeat"

    def post(self, job_id: str) -> None:
        runner = self.runner()
        claims = self.job_claims
        body = self.json_body()
        progress = body.get("progress")
        if progress is not None and (
            isinstance(progress, bool)
            or not isinstance(progress, int | float)
            or not 0 <= progress <= 1
        ):
            raise ApiError("InvalidArgument", "progress must be a number from 0 to 1")
        self.send_grant(runner.heartbeat(claims, None if progress is None else float(progress)))


class CompleteHandler(AttemptHandler):
    route_name = "/api/v1/videos/jobs/{job_id}/complete"

    async def post(self, job_id: str) -> None:
        runner = self.runner()
        claims = self.job_claims
        job = await runner.complete(claims, self.json_body())
        self.send_json(200, job_json(job, runner.progress(job)))


class FailHandler(AttemptHandler):
    route_name = "/api/v1/videos/jobs/{job_id}/fail"

    async def post(self, job_id: str) -> None:
        runner = self.runner()
        claims = self.job_claims
        error = _text(self.json_body(), "error", MAX_ERROR_CHARS)
        job = await runner.fail(claims, error)
        self.send_json(200, job_json(job, runner.progress(job)))


class OutputsHandler(BatchHandler):
    """``POST /api/v1/videos/jobs/{job_id}/outputs``: an attempt's output files as one tar
    stream, each kept as an open multipart upload under the output prefix
    (``service.media.fleet_outputs``); answers ``{"outputs": {name: {"upload_id",
    "parts"}}}`` for the completion. The lease token, read as on the object routes (any
    serving process; ``service.http.job_credentials``), is the only credential taken. The
    body is read as a batch upload's is, hence the base class."""

    route_name = "/api/v1/videos/jobs/{job_id}/outputs"
    staging: asyncio.Future[list[Staged]] | None = None
    grant: JobGrant

    async def prepare_request(self) -> None:
        await StreamingBodyHandler.prepare_request(self)  # the job principal, or 401/403
        principal = self.principal
        job_id = self.path_kwargs["job_id"]
        if (
            principal.via != "job"
            or principal.grant is None
            or principal.credential_id.partition("#")[0] != job_id
        ):
            raise AccessDeniedError("an attempt's outputs take that job's lease token")
        self.grant = principal.grant
        self.check_tar_headers()
        engine = self.ctx.engine
        engine.ensure_writable()
        pipe = await self.open_pipe()
        limits = BatchLimits(max_member_bytes=self.ctx.config.max_object_bytes)
        self.staging = asyncio.ensure_future(
            stage_batch(
                engine,
                self.grant.bucket,
                self.grant.prefix,
                pipe,
                limits,
                run=lambda stage: in_own_thread(pipe, stage),
            )
        )
        self.staging.add_done_callback(_seen)

    def _still_running(self) -> bool:
        job_id, _, attempt = self.principal.credential_id.partition("#")
        job = self.ctx.engine.state.media.job(job_id)
        return job is not None and job.active and str(job.attempts) == attempt

    async def post(self, job_id: str) -> None:
        self.raise_deferred_failure()
        if self.pipe is None or self.staging is None or self._finished:
            return
        self.pipe.end()
        self.release_upload_slot()  # the body is in: what is left is the server's own work
        _, held, cap = job_uploads_held(self.ctx.engine.state, self.principal, now_ms())
        outputs = await open_output_uploads(
            self.ctx.engine,
            owner=self.principal.user_id,
            room=cap - held,
            bucket=self.grant.bucket,
            prefix=self.grant.prefix,
            entries=await self.staging,
            still_running=self._still_running,
        )
        self.send_json(200, {"outputs": outputs})


def _seen(job: asyncio.Future[Any]) -> None:
    """Mark a staging's failure as seen when nobody awaits it (the worker went away)."""
    if not job.cancelled():
        job.exception()


class WorkersHandler(ApiHandler):
    route_name = "/api/v1/videos/workers"
    home = Home.JOURNAL  # the worker records are the fleet runner's memory
    SUPPORTED_METHODS = ("GET",)

    def get(self) -> None:
        self.authorize(Action.VIDEO_WORKER_LIST)
        runner = self.ctx.video_jobs
        records = runner.workers.records() if isinstance(runner, FleetJobRunner) else []
        self.send_json(200, {"workers": [worker_json(record) for record in records]})
