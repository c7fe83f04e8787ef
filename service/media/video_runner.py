"""Running packaging jobs: a queue, a bounded number at once, each in a worker process.

``start`` (at server start) empties ``<data_dir>/scratch/`` and queues every job the journal
left ``queued`` or ``processing`` (a job that was processing when the server stopped is run
again from the start; its outputs are rewritten under the same keys). ``max_jobs`` workers
take jobs off the queue, oldest first.

One run, on the event loop except for the marked steps:

1. journal ``processing`` (status changes are journaled; finer progress stays in memory);
2. open the source payload through the file-system seam (executor) and hand its descriptor
   to a new worker process (``service.media.video_worker``), which decodes and encodes into a
   fresh scratch directory, reporting progress on its stdout;
3. store every file it made as an object under the job's ``output_prefix`` with the normal
   PUT path (``store_server_made``), segments first and master playlists last;
4. journal ``completed`` with the outputs (or ``failed`` with the reason, and no outputs
   left behind); remove the scratch directory.

``cancel`` kills the worker (or drops the job from the queue) and waits until the run has
stopped; the caller then removes the outputs. A journal fault (the engine turns read-only)
stops a run where it is: the job stays ``processing`` and runs again after the restart.

Thread-safety: event-loop thread only; the blocking steps go to the engine's executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import service
from fsseam.fs import ReadableFile
from service.common.api_errors import ServiceError
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.media.video_errors import VideoParamsError
from service.media.video_jobs import remove_outputs
from service.media.video_outputs import content_type_for, is_output_name, store_order
from service.media.video_params import JobParams
from service.media.video_scratch import ScratchSpace
from service.meta import VideoJob, records
from service.meta.video_state import FINISHED
from service.ops.objects import PutIntent, store_server_made

log = logging.getLogger("service.media")

WORKER_MODULE = "service.media.video_worker"
PACKAGING_SHARE = 0.95
"""The part of a job's progress that packaging takes; storing the outputs takes the rest."""
STDERR_TAIL_BYTES = 4096


class _Stopped(Exception):
    """The run ends here without a verdict: cancelled, or the engine cannot journal."""


@dataclass
class _Run:
    """One job being run: its worker process and whether it was cancelled."""

    job_id: str
    process: asyncio.subprocess.Process | None = None
    cancelled: bool = False
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def cancel(self) -> None:
        self.cancelled = True
        if self.process is not None:
            _kill(self.process)


def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


def _worker_environment() -> dict[str, str]:
    """The server's environment, with the directory ``service`` is imported from on the
    worker's path (the server may run from a checkout rather than an installed package)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(service.__file__))  # the child keeps our cwd
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


async def _read_tail(stream: asyncio.StreamReader) -> bytes:
    """Everything the worker writes to stderr, keeping only the last few KiB."""
    tail = b""
    while chunk := await stream.read(65536):
        tail = (tail + chunk)[-STDERR_TAIL_BYTES:]
    return tail


class VideoJobRunner:
    """Runs the journal's packaging jobs; see the module docstring."""

    def __init__(self, engine: Engine, *, max_jobs: int, max_pixels: int) -> None:
        self._engine = engine
        self._max_jobs = max(1, max_jobs)
        self._max_pixels = max_pixels
        self._scratch = ScratchSpace(engine.fs, engine.config.data_dir)
        self._queue: asyncio.Queue[str] | None = None
        self._waiting: set[str] = set()
        self._running: dict[str, _Run] = {}
        self._progress: dict[str, float] = {}
        self._workers: list[asyncio.Task[None]] = []

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Empty the scratch space, queue the unfinished jobs and start the workers."""
        removed = await self._engine.run_blocking(self._scratch.clean)
        if removed:
            log.info("removed %d stale video scratch directories", removed)
        self._queue = asyncio.Queue()
        for job in self._engine.state.media.jobs():
            if job.status not in FINISHED:
                self.submit(job.job_id)
        self._workers = [asyncio.create_task(self._work()) for _ in range(self._max_jobs)]

    async def stop(self) -> None:
        """Kill the workers' processes and stop; unfinished jobs run again at the next start."""
        for run in self._running.values():
            run.cancel()
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    # -- requests ---------------------------------------------------------------------

    def submit(self, job_id: str) -> None:
        """Queue a job (a no-op before ``start``, which queues every unfinished job)."""
        if self._queue is not None and job_id not in self._waiting:
            self._waiting.add(job_id)
            self._queue.put_nowait(job_id)

    def progress(self, job: VideoJob) -> float:
        """The job's progress: the live figure while it runs, else the journaled one."""
        if job.status == "processing":
            return self._progress.get(job.job_id, job.progress)
        return job.progress

    async def cancel(self, job_id: str) -> None:
        """Stop the job: dequeue it, or kill its worker and wait until its run is over."""
        self._waiting.discard(job_id)
        run = self._running.get(job_id)
        if run is not None:
            run.cancel()
            await run.finished.wait()

    # -- running ----------------------------------------------------------------------

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            job_id = await self._queue.get()
            if job_id not in self._waiting:
                continue  # cancelled while it waited
            self._waiting.discard(job_id)
            job = self._engine.state.media.job(job_id)
            if job is None or job.status in FINISHED:
                continue
            run = _Run(job_id)
            self._running[job_id] = run
            try:
                await self._run(job, run)
            except _Stopped:
                pass
            except Exception:
                log.exception("video job %s: unexpected failure", job_id)
                await self._verdict(run, "failed", error="the job failed (internal error)")
            finally:
                run.cancel()  # a worker still alive (the run itself was cancelled) dies here
                self._running.pop(job_id, None)
                self._progress.pop(job_id, None)
                run.finished.set()

    def _check(self, run: _Run) -> None:
        """Stop the run if it was cancelled or its job is gone (deleted, bucket deleted)."""
        if run.cancelled or self._engine.state.media.job(run.job_id) is None:
            raise _Stopped()

    async def _commit(self, run: _Run, event: dict[str, Any]) -> None:
        self._check(run)
        try:
            outcome = await self._engine.commit(event)
        except ServiceError as error:
            log.error("video job %s: cannot journal its progress: %s", run.job_id, error.message)
            raise _Stopped() from None
        if not outcome.ok:
            raise _Stopped()  # deleted or finished meanwhile

    async def _verdict(
        self,
        run: _Run,
        status: str,
        *,
        outputs: dict[str, str] | None = None,
        error: str | None = None,
    ) -> None:
        progress = 1.0 if status == "completed" else self._progress.get(run.job_id, 0.0)
        event = records.video_job_updated(
            job_id=run.job_id,
            status=status,
            progress=progress,
            outputs=outputs or {},
            error=error,
            at=now_ms(),
        )
        with contextlib.suppress(_Stopped):
            await self._commit(run, event)
        if status == "failed":
            log.info("video job %s failed: %s", run.job_id, error)

    async def _run(self, job: VideoJob, run: _Run) -> None:
        engine = self._engine
        if job.status == "queued":
            await self._commit(
                run,
                records.video_job_updated(
                    job_id=job.job_id,
                    status="processing",
                    progress=0.0,
                    outputs={},
                    error=None,
                    at=now_ms(),
                ),
            )
        self._progress[job.job_id] = 0.0
        version = engine.state.head_object(job.bucket, job.key)
        if (
            version is None
            or version.payload_id is None
            or version.payload_id in engine.quarantined
        ):
            await self._verdict(run, "failed", error=f"the source object {job.key!r} is gone")
            return
        try:
            params = JobParams.from_document(job.params)
            source = await engine.run_blocking(engine.store.open_payload, version.payload_id)
        except VideoParamsError as exc:
            await self._verdict(run, "failed", error=f"the job's parameters are invalid: {exc}")
            return
        except OSError as exc:
            log.error("video job %s: opening the source failed: %r", job.job_id, exc)
            await self._verdict(run, "failed", error="the source object could not be read")
            return
        out_dir = await engine.run_blocking(self._scratch.prepare, job.job_id)
        try:
            try:
                result = await self._package(run, source, out_dir, params)
            finally:
                await engine.run_blocking(source.close)
            self._check(run)
            if isinstance(result, str):
                await self._verdict(run, "failed", error=result)
                return
            error = await self._store_outputs(job, run, out_dir)
            if error is not None:
                await self._verdict(run, "failed", error=error)
                return
            outputs = {kind: job.output_prefix + name for kind, name in result.items()}
            await self._verdict(run, "completed", outputs=outputs)
        finally:
            await engine.run_blocking(self._scratch.remove, out_dir)

    async def _package(
        self, run: _Run, source: ReadableFile, out_dir: str, params: JobParams
    ) -> dict[str, str] | str:
        """Run the worker process; its outputs, or the reason the job failed."""
        descriptor = source.fileno()
        if descriptor is None:
            return "the source cannot be handed to a worker process"
        spec = {
            "source": f"/dev/fd/{descriptor}",
            "out_dir": out_dir,
            "params": params.to_document(),
            "max_pixels": self._max_pixels,
        }
        self._check(run)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            WORKER_MODULE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(descriptor,),
            env=_worker_environment(),
        )
        run.process = process
        if run.cancelled:
            _kill(process)  # cancelled while the process started
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        stderr = asyncio.create_task(_read_tail(process.stderr))
        result: dict[str, str] | str | None = None
        try:
            process.stdin.write(json.dumps(spec).encode())
            await process.stdin.drain()
            process.stdin.close()
            async for line in process.stdout:
                message = json.loads(line)
                if "progress" in message:
                    fraction = min(1.0, max(0.0, float(message["progress"])))
                    self._progress[run.job_id] = round(fraction * PACKAGING_SHARE, 4)
                elif "outputs" in message:
                    result = {str(k): str(v) for k, v in message["outputs"].items()}
                elif "error" in message:
                    result = str(message["error"])
        except (ConnectionError, ValueError, TypeError, AttributeError):
            # A worker that died mid-message or wrote garbage: judged by its exit below.
            _kill(process)
            result = None
        finally:
            code = await process.wait()
            tail = await stderr
        self._check(run)
        if result is None:
            log.error(
                "video job %s: worker exited with %s: %s",
                run.job_id,
                code,
                tail.decode("utf-8", "replace"),
            )
            return f"the packaging worker stopped unexpectedly (exit status {code})"
        return result

    async def _store_outputs(self, job: VideoJob, run: _Run, out_dir: str) -> str | None:
        """Store every file of ``out_dir`` under the job's prefix; the failure, if any."""
        engine = self._engine
        names = store_order(await engine.run_blocking(self._scratch.files, out_dir))
        strays = [name for name in names if not is_output_name(name)]
        if strays:
            # Only output names are served and removed; anything else would be orphaned.
            log.error("video job %s: unexpected files from the packager: %s", job.job_id, strays)
            return "the packager produced unexpected files (internal error)"
        for done, name in enumerate(names, start=1):
            self._check(run)
            intent = PutIntent(
                bucket=job.bucket, key=job.output_prefix + name, content_type=content_type_for(name)
            )
            try:
                await store_server_made(engine, intent, os.path.join(out_dir, name))
            except ServiceError as error:
                if engine.read_only_reason is not None:
                    raise _Stopped() from None
                await remove_outputs(engine, job)
                return f"storing the outputs failed: {error.message}"
            share = PACKAGING_SHARE + (1 - PACKAGING_SHARE) * done / len(names)
            self._progress[job.job_id] = round(min(share, 0.999), 4)
        return None
