"""Running packaging jobs on a media fleet: Celery workers fed through Redis.

The second ``JobRunner`` (``service.media.video_jobs``), chosen once at start when
``SERVICE_MEDIA_QUEUE`` is set (``service.media.runners``); it runs in the one process that
does background work. The journal stays the record of every job; the queue only carries
"run attempt N of job J" (``service.media.fleet_queue``). The life of an attempt:

1. *dispatch*: a job that needs a run (new, its lease lapsed, unfinished at start) gets its
   next attempt number (``attempts + 1``) and a claim token, sent as a task; a send that
   fails (Redis away) is retried every tick, and every unclaimed task is sent again when
   Redis's ``run_id`` shows it restarted (its queue may be gone);
2. *claim* (a worker took the task): journal ``VideoAttemptStarted`` if that attempt is still
   the next one, else 409 (a duplicate, late or stale task: the worker drops it); grant the
   lease and answer a lease token;
3. *heartbeats* renew the lease and report progress; a lease not renewed within
   ``SERVICE_MEDIA_LEASE`` lapses: ``VideoAttemptEnded``, the attempt's sessions aborted, and
   the job dispatched again;
4. *complete*: checked against the journal and the lease, then ``VideoAttemptAccepted`` and
   ``service.media.fleet_publish`` makes the outputs visible and journals ``completed``;
   a completion of an attempt that is no longer running is refused (409) and its sessions
   aborted. *fail* journals the worker's verdict ``failed``.

Each transition is checked again by ``apply`` (``service.meta.video_state``), so a job
completes exactly once whatever the redeliveries. Blocking calls to Redis run on one thread
of their own, never on the event loop.

Thread-safety: event-loop thread only (the broker thread only runs ``FleetQueue`` calls).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from service.auth.job_tokens import JobClaims, issue_job_token
from service.common.api_errors import ApiError
from service.common.timefmt import now_ms
from service.media.fleet_book import Lease, Leases, WorkerBook
from service.media.fleet_publish import abort_sessions, publish
from service.media.fleet_queue import FleetQueue
from service.media.video_outputs import MASTERS, is_output_name
from service.meta import VideoJob, records
from service.meta.video_state import FINISHED
from service.multipart.operations import check_manifest, parse_manifest
from service.multipart.uploads import Uploads

log = logging.getLogger("service.media")

RUN_ID_CHECK_SECONDS = 5.0
"""How often Redis's ``run_id`` is read while tasks wait unclaimed."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What a claim or a heartbeat answers: the lease token and when the lease ends."""

    job: VideoJob
    token: str
    expires_at: float
    lease_seconds: float


def _named_uploads(body: Mapping[str, Any]) -> frozenset[str]:
    """The upload ids a completion names, read leniently (to abort them when refused)."""
    outputs = body.get("outputs")
    if not isinstance(outputs, dict):
        return frozenset()
    return frozenset(
        item["upload_id"]
        for item in outputs.values()
        if isinstance(item, dict) and isinstance(item.get("upload_id"), str)
    )


def _stale(job_id: str, attempt: int) -> ApiError:
    return ApiError(
        "InvalidState", f"attempt {attempt} of job {job_id!r} is not running (its lease ended)"
    )


class FleetJobRunner:
    """Sends the journal's jobs to the fleet and keeps their attempts; see the docstring."""

    def __init__(
        self,
        uploads: Uploads,
        *,
        queue_url: str,
        lease_seconds: float,
        server_secret: bytes,
        max_pixels: int,
    ) -> None:
        self._engine = uploads.engine
        self._uploads = uploads
        """The multipart uploads the attempts' outputs are (aborted, published)."""
        self._secret = server_secret
        self.max_pixels = max_pixels
        self.leases = Leases(lease_seconds)
        self.workers = WorkerBook()
        self._queue_url = queue_url
        self._queue: FleetQueue | None = None
        """Made at ``start`` (in the one process that sends; Celery is imported then)."""
        self._broker = ThreadPoolExecutor(1, thread_name_prefix="media-queue")
        self._pending: dict[str, int] = {}
        """Jobs waiting for a worker: the attempt their task is for."""
        self._unsent: set[str] = set()
        self._run_id: str | None = None
        self._run_id_checked = 0.0
        self._publishing: dict[str, asyncio.Task[VideoJob | None]] = {}
        self._wake = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._redis_down = False

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Take over the journal's unfinished jobs: resume publishing, lease the running
        attempts afresh (their workers renew them if alive), dispatch the rest."""
        self._queue = FleetQueue(self._queue_url)
        now = time.monotonic()
        for job in self._engine.state.media.jobs():
            if job.status in FINISHED:
                continue
            if job.publishing is not None:
                self._publish(job)
            elif job.active and job.worker is not None:
                self.leases.grant(job.job_id, job.attempts, job.worker, now)
                self.workers.started(job.worker, None, job.job_id, job.updated_at)
            else:
                self.submit(job.job_id)
        self._ticker = asyncio.create_task(self._tick_forever())

    async def stop(self) -> None:
        """Stop dispatching; running attempts go on on their workers and are taken over
        by the next start (their leases are in the journal)."""
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
        for task in self._publishing.values():
            task.cancel()
        await asyncio.gather(*self._publishing.values(), return_exceptions=True)
        if self._queue is not None:
            with contextlib.suppress(Exception):
                await self._broker_call(self._queue.close)
        self._broker.shutdown(wait=False, cancel_futures=True)

    # -- the JobRunner protocol -------------------------------------------------------

    def submit(self, job_id: str) -> None:
        """Dispatch the job's next attempt (a no-op for one already waiting or running)."""
        job = self._engine.state.media.job(job_id)
        if job is None or job.status in FINISHED or job.active or job.publishing is not None:
            return
        self._pending[job_id] = job.attempts + 1
        self._unsent.add(job_id)
        self._wake.set()

    def progress(self, job: VideoJob) -> float:
        """The latest heartbeat's figure while an attempt runs, else the journaled one."""
        lease = self.leases.get(job.job_id)
        if job.active and lease is not None and lease.attempt == job.attempts:
            return lease.progress
        return job.progress

    async def cancel(self, job_id: str) -> None:
        """Stop the job: forget its task, end its running attempt, wait for a publishing one,
        abort its sessions (the caller then removes its outputs)."""
        self._pending.pop(job_id, None)
        self._unsent.discard(job_id)
        publishing = self._publishing.get(job_id)
        if publishing is not None:
            await asyncio.gather(publishing, return_exceptions=True)
        job = self._engine.state.media.job(job_id)
        if job is None:
            return
        if job.active:
            await self._end_attempt(job, "cancelled")
        await abort_sessions(self._uploads, job)

    # -- the attempt API (service.http.fleet_handlers) ----------------------------------

    async def claim(self, claims: JobClaims, worker: str, host: str) -> Grant:
        """Start the attempt a claim token names, if it is still the job's next one."""
        job = self._require(claims.job_id)
        if (
            job.status in FINISHED
            or job.active
            or job.publishing is not None
            or claims.attempt != job.attempts + 1
        ):
            raise _stale(job.job_id, claims.attempt)
        outcome = await self._engine.commit(
            records.video_attempt_started(
                job_id=job.job_id, attempt=claims.attempt, worker=worker, host=host, at=now_ms()
            )
        )
        if not outcome.ok or not isinstance(outcome.value, VideoJob):
            raise _stale(job.job_id, claims.attempt)
        if self._pending.get(job.job_id) == claims.attempt:
            del self._pending[job.job_id]
            self._unsent.discard(job.job_id)
        lease = self.leases.grant(job.job_id, claims.attempt, worker, time.monotonic())
        self.workers.started(worker, host, job.job_id, now_ms())
        log.info("video job %s: attempt %d claimed by %s", job.job_id, claims.attempt, worker)
        return self._grant(outcome.value, lease)

    def heartbeat(self, claims: JobClaims, progress: float | None) -> Grant:
        """Renew a running attempt's lease; 409 once it lapsed or the job moved on."""
        job, lease = self._running(claims)
        self.leases.renew(lease, time.monotonic(), progress)
        self.workers.seen(lease.worker, None, now_ms())
        return self._grant(job, lease)

    async def complete(self, claims: JobClaims, body: Mapping[str, Any]) -> VideoJob:
        """Accept a running attempt's outputs (multipart sessions under the prefix), publish
        them and answer the completed job; a lost attempt's are aborted (409)."""
        job = self._require(claims.job_id)
        if job.publishing is not None and job.attempts == claims.attempt:
            return await self._finished(job)  # a retry of an accepted completion
        if job.status == "completed" and job.attempts == claims.attempt:
            return job
        try:
            job, lease = self._running(claims)
        except ApiError:
            await abort_sessions(self._uploads, job, only=_named_uploads(body))
            raise
        uploads = self._parse_outputs(job, body)
        self.leases.drop(job.job_id)
        outcome = await self._engine.commit(
            records.video_attempt_accepted(
                job_id=job.job_id, attempt=claims.attempt, uploads=uploads, at=now_ms()
            )
        )
        if not outcome.ok or not isinstance(outcome.value, VideoJob):
            await abort_sessions(self._uploads, job, only=frozenset(uploads.values()))
            raise _stale(job.job_id, claims.attempt)
        self.workers.seen(lease.worker, None, now_ms())
        return await self._finished(outcome.value)

    async def fail(self, claims: JobClaims, error: str) -> VideoJob:
        """The worker's verdict on a running attempt: the job failed (``error`` says why)."""
        job, lease = self._running(claims)
        self.leases.drop(job.job_id)
        outcome = await self._engine.commit(
            records.video_attempt_finished(
                job_id=job.job_id,
                attempt=claims.attempt,
                status="failed",
                outputs={},
                error=error,
                at=now_ms(),
            )
        )
        if not outcome.ok or not isinstance(outcome.value, VideoJob):
            raise _stale(job.job_id, claims.attempt)
        self.workers.ended(lease.worker, job.job_id, "failed")
        await abort_sessions(self._uploads, outcome.value)
        log.info("video job %s failed on %s: %s", job.job_id, lease.worker, error)
        return outcome.value

    # -- inside -----------------------------------------------------------------------

    def _require(self, job_id: str) -> VideoJob:
        job = self._engine.state.media.job(job_id)
        if job is None:
            raise ApiError("NoSuchJob", f"no video job {job_id!r}")
        return job

    def _running(self, claims: JobClaims) -> tuple[VideoJob, Lease]:
        job = self._require(claims.job_id)
        lease = self.leases.live(job.job_id, claims.attempt, time.monotonic())
        if lease is None or not job.active or job.attempts != claims.attempt:
            raise _stale(job.job_id, claims.attempt)
        return job, lease

    def _grant(self, job: VideoJob, lease: Lease) -> Grant:
        expires_at = time.time() + (lease.deadline - time.monotonic())
        token = issue_job_token(self._secret, job.job_id, lease.attempt, "lease", expires_at)
        return Grant(job, token, expires_at, self.leases.seconds)

    def _parse_outputs(self, job: VideoJob, body: Mapping[str, Any]) -> dict[str, str]:
        """``{"outputs": {name: {"upload_id", "parts"}}}`` checked against the stored
        sessions: output names, under this job's prefix, every master among them."""
        outputs = body.get("outputs")
        if not isinstance(outputs, dict) or not outputs:
            raise ApiError("InvalidArgument", "outputs must be a non-empty object")
        uploads: dict[str, str] = {}
        for name, item in outputs.items():
            upload_id = item.get("upload_id") if isinstance(item, dict) else None
            if not is_output_name(name) or not isinstance(upload_id, str):
                raise ApiError("InvalidArgument", f"output {name!r} is not an output upload")
            uploads[name] = upload_id
        for name, upload_id in uploads.items():
            session = self._engine.state.get_upload(upload_id)
            if (
                session is None
                or session.bucket != job.bucket
                or session.key != job.output_prefix + name
            ):
                raise ApiError("InvalidArgument", f"output {name!r}: no such upload of this job")
            stored = {p.part_number: p for p in self._engine.state.upload_parts(upload_id)}
            check_manifest(stored, parse_manifest(outputs[name]))
            if len(stored) != len(outputs[name]["parts"]):
                raise ApiError("InvalidArgument", f"output {name!r}: parts left out")
        masters = [name for name in MASTERS.values() if name in uploads]
        if not masters:
            raise ApiError("InvalidArgument", "outputs hold no master playlist or manifest")
        return uploads

    def _publish(self, job: VideoJob) -> asyncio.Task[VideoJob | None]:
        task = self._publishing.get(job.job_id)
        if task is None:
            task = asyncio.create_task(publish(self._uploads, job))
            self._publishing[job.job_id] = task
            task.add_done_callback(lambda _: self._publishing.pop(job.job_id, None))
        return task

    async def _finished(self, job: VideoJob) -> VideoJob:
        """Wait for the job's publishing; the job as it ended."""
        done = await self._publish(job)
        if done is None:
            raise ApiError("ServiceUnavailable", "the job could not be finished; retry later")
        if job.worker is not None:
            self.workers.ended(job.worker, job.job_id, done.status)
        log.info(
            "video job %s %s (attempt %d on %s)",
            done.job_id,
            done.status,
            done.attempts,
            done.worker,
        )
        return done

    async def _end_attempt(self, job: VideoJob, reason: str) -> bool:
        lease = self.leases.drop(job.job_id)
        outcome = await self._engine.commit(
            records.video_attempt_ended(
                job_id=job.job_id, attempt=job.attempts, reason=reason, at=now_ms()
            )
        )
        worker = lease.worker if lease is not None else job.worker
        if worker is not None:
            self.workers.ended(worker, job.job_id, "failed" if reason == "lease_expired" else None)
        return outcome.ok

    # -- the tick ---------------------------------------------------------------------

    async def _tick_forever(self) -> None:
        interval = min(1.0, self.leases.seconds / 4)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)
            self._wake.clear()
            try:
                await self._tick()
            except Exception:
                log.exception("media fleet: the dispatch tick failed (retried)")

    async def _tick(self) -> None:
        engine = self._engine
        if engine.read_only_reason is not None:
            return
        for job_id, lease in self.leases.lapsed(time.monotonic()):
            job = engine.state.media.job(job_id)
            if job is None or not job.active or job.attempts != lease.attempt:
                self.leases.drop(job_id)
                continue
            if await self._end_attempt(job, "lease_expired"):
                self.workers.lease_expiries += 1
                log.warning(
                    "video job %s: attempt %d lost its lease on %s; sending it again",
                    job_id,
                    lease.attempt,
                    lease.worker,
                )
                ended = engine.state.media.job(job_id)
                if ended is not None:
                    await abort_sessions(self._uploads, ended)
                self.submit(job_id)
        await self._check_redis()
        await self._send_unsent()

    async def _broker_call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._broker, fn, *args)

    @property
    def queue(self) -> FleetQueue:
        assert self._queue is not None, "the runner has not started"
        return self._queue

    async def _check_redis(self) -> None:
        """Send every unclaimed task again if Redis restarted since they were sent."""
        if not self._pending or time.monotonic() - self._run_id_checked < RUN_ID_CHECK_SECONDS:
            return
        self._run_id_checked = time.monotonic()
        try:
            run_id = await self._broker_call(self.queue.run_id)
        except Exception:
            return  # unreachable: the sends will tell, and the next check will see
        if self._run_id is not None and run_id != self._run_id:
            log.warning(
                "media fleet: Redis restarted; sending %d waiting jobs again", len(self._pending)
            )
            self._unsent.update(self._pending)
        self._run_id = run_id

    async def _send_unsent(self) -> None:
        for job_id in sorted(self._unsent, key=self._age):
            attempt = self._pending.get(job_id)
            if attempt is None:
                self._unsent.discard(job_id)
                continue
            token = issue_job_token(self._secret, job_id, attempt, "claim")
            try:
                await self._broker_call(self.queue.send, job_id, attempt, token)
            except Exception as exc:
                if not self._redis_down:
                    log.error("media fleet: cannot send jobs to the queue (retrying): %s", exc)
                self._redis_down = True
                return
            if self._redis_down:
                log.info("media fleet: the queue takes jobs again")
            self._redis_down = False
            self._unsent.discard(job_id)
            if self._run_id is None:
                with contextlib.suppress(Exception):
                    self._run_id = await self._broker_call(self.queue.run_id)

    def _age(self, job_id: str) -> tuple[int, str]:
        job = self._engine.state.media.job(job_id)
        return (job.created_at if job is not None else 0, job_id)

    # -- reads ------------------------------------------------------------------------

    def queued(self) -> int:
        """Jobs waiting for a worker."""
        return len(self._pending)

    def running(self) -> int:
        """Attempts holding a lease now."""
        return len(self.leases)
