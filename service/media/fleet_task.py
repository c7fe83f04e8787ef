"""One attempt of a packaging job on a fleet worker: the body of the Celery task.

Runs in a worker's pool process (``service.media.worker``), with nothing of the server but
its URL and the task's claim token:

1. claim the attempt (409 or 404: a duplicate, late or stale task, dropped); a server that
   cannot be reached for ``CLAIM_PATIENCE`` seconds sends the task back to the queue for
   another worker (``Reject(requeue=True)``), so a task is never lost;
2. a heartbeat thread renews the lease every third of it, reporting progress and taking the
   renewed lease token; an answer that the attempt is over kills the packager at once;
3. download the source object into a scratch directory of this machine;
4. package it in a child process (``service.media.video_worker``, the embedded runner's
   packager: the same code, the same outputs);
5. send the outputs in bundles: many files in one request, a tar stream, each file kept by
   the server as a multipart session under the job's output prefix, left open (invisible;
   ``service.media.fleet_outputs``); a file too large for a bundle goes up alone as a
   multipart upload, also left open; then report ``complete`` naming them all: the server
   publishes them if it still runs this attempt, else refuses and aborts them;
6. a packaging verdict (undecodable video, say) is reported as ``fail``: the job fails.

The scratch directory goes whatever happens. An attempt that loses its lease keeps nothing.

Thread-safety: one call per task; the heartbeat thread shares only ``AttemptClient``'s token
and the stop and lost flags.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from service.media.fleet_client import AttemptClient, AttemptLost, AttemptRefused
from service.media.video_outputs import content_type_for, store_order

log = logging.getLogger("service.media.worker")

PACKAGER = "service.media.video_worker"
TEST_HOLD_ENV = "SERVICE_MEDIA_TEST_HOLD"
"""Test-only: a directory; after its first upload an attempt writes ``<job_id>.held`` there
and waits (heartbeats going on) for ``<job_id>.go``, so tests can kill, stop or outlive a
worker mid-job at a known point."""
CLAIM_PATIENCE = 600.0
"""Seconds a task waits for the server before going back to the queue."""
PACKAGING_SHARE = 0.9
"""The part of the progress packaging takes; uploading the outputs takes the rest."""
STDERR_TAIL_BYTES = 4096
BUNDLE_BYTES = 64 * 1024 * 1024
"""Bytes of outputs one request carries at most (a retried request sends them again)."""
BUNDLE_FILES = 1000
"""Files one request carries at most (the server takes up to ``MAX_BATCH_MEMBERS``)."""
ALONE_BYTES = 8 * 1024 * 1024
"""A file larger than this goes up alone, as a multipart upload of parts of this size."""


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """What a worker knows: the server, its own name and host, where to keep scratch."""

    server: str
    worker_id: str
    host: str
    scratch_dir: str | None = None


@dataclass
class _Attempt:
    client: AttemptClient
    lease_seconds: float
    progress: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    packager: subprocess.Popen[bytes] | None = None

    def give_up(self) -> None:
        self.lost.set()
        packager = self.packager
        if packager is not None and packager.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                packager.kill()


class RequeueTask(Exception):
    """The server could not be reached: the task goes back to the queue."""


def run_attempt(setup: WorkerSetup, job_id: str, attempt: int, claim_token: str) -> str:
    """Run one task; what became of it (``completed``, ``failed``, ``dropped``, ``lost``)."""
    client = AttemptClient(setup.server, job_id, claim_token, patience=CLAIM_PATIENCE)
    try:
        grant = client.attempt("claim", {"worker": setup.worker_id, "host": setup.host})
    except AttemptLost as exc:
        log.info("job %s attempt %d: not ours to run (%s); dropped", job_id, attempt, exc)
        client.close()
        return "dropped"
    except AttemptRefused as exc:
        client.close()
        raise RequeueTask(str(exc)) from None
    run = _Attempt(client, float(grant["lease_seconds"]))
    client.patience = run.lease_seconds
    beat = threading.Thread(target=_heartbeats, args=(run,), daemon=True, name="heartbeat")
    beat.start()
    scratch = tempfile.mkdtemp(prefix=f"{job_id}-", dir=setup.scratch_dir)
    try:
        return _run(run, grant, scratch)
    except AttemptLost as exc:
        log.warning("job %s attempt %d: the server gave it up (%s)", job_id, attempt, exc)
        return "lost"
    finally:
        run.stop.set()
        beat.join()
        client.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _run(run: _Attempt, grant: dict[str, Any], scratch: str) -> str:
    job = grant["job"]
    client = run.client
    source = os.path.join(scratch, "source")
    out_dir = os.path.join(scratch, "out")
    os.makedirs(os.path.join(out_dir, "hls"))
    os.makedirs(os.path.join(out_dir, "dash"))
    try:
        client.download(job["bucket"], job["key"], source)
    except AttemptRefused as exc:
        return _fail(run, f"the source object could not be read ({exc})")
    result = _package(run, source, out_dir, job["params"], int(grant["max_pixels"]))
    if run.lost.is_set():
        raise AttemptLost("the lease ended while packaging")
    if "error" in result:
        return _fail(run, str(result["error"]))
    os.unlink(source)
    groups = plan_uploads(
        [(name, os.path.getsize(os.path.join(out_dir, name))) for name in _files(out_dir)]
    )
    outputs: dict[str, Any] = {}
    try:
        for done, group in enumerate(groups, start=1):
            if run.lost.is_set():
                raise AttemptLost("the lease ended while uploading")
            if isinstance(group, str):
                outputs[group] = client.upload(
                    job["bucket"],
                    job["output_prefix"] + group,
                    os.path.join(out_dir, group),
                    content_type_for(group),
                )
            else:
                files = [(name, os.path.join(out_dir, name)) for name in group]
                outputs.update(client.upload_bundle(files))
            run.progress = PACKAGING_SHARE + (1 - PACKAGING_SHARE) * done / len(groups) * 0.99
            if done == 1:
                _test_hold(run)
        finished = client.attempt("complete", {"outputs": outputs})
    except AttemptRefused as exc:
        return _fail(run, f"storing the outputs was refused: {exc}")
    log.info("job %s completed (attempt %d)", finished["job_id"], finished["attempts"])
    return "completed"


def plan_uploads(files: list[tuple[str, int]]) -> list[str | list[str]]:
    """How the outputs ``(name, size)`` go up, in store order: a file larger than
    ``ALONE_BYTES`` alone (a name), the others in bundles (lists of names) of at most
    ``BUNDLE_BYTES`` and ``BUNDLE_FILES``.

    >>> plan_uploads([("hls/master.m3u8", 90), ("hls/s_0.ts", 9 << 20), ("hls/s_1.ts", 10)])
    ['hls/s_0.ts', ['hls/s_1.ts', 'hls/master.m3u8']]
    """
    sizes = dict(files)
    alone: list[str | list[str]] = []
    bundles: list[str | list[str]] = []
    bundle: list[str] = []
    held = 0
    for name in store_order(sizes):
        size = sizes[name]
        if size > ALONE_BYTES:
            alone.append(name)
            continue
        if bundle and (held + size > BUNDLE_BYTES or len(bundle) >= BUNDLE_FILES):
            bundles.append(bundle)
            bundle, held = [], 0
        bundle.append(name)
        held += size
    if bundle:
        bundles.append(bundle)
    return alone + bundles


def _test_hold(run: _Attempt) -> None:
    """Wait where ``TEST_HOLD_ENV`` says (test-only; a no-op unless it is set)."""
    where = os.environ.get(TEST_HOLD_ENV)
    if not where:
        return
    job_id = run.client.job_id
    with open(os.path.join(where, f"{job_id}.held"), "w"):
        pass
    while not os.path.exists(os.path.join(where, f"{job_id}.go")):
        time.sleep(0.05)


def _fail(run: _Attempt, error: str) -> str:
    with contextlib.suppress(AttemptLost, AttemptRefused):
        run.client.attempt("fail", {"error": error[:2000]})
    log.info("job %s failed: %s", run.client.job_id, error)
    return "failed"


def _files(out_dir: str) -> list[str]:
    names = []
    for root, _, files in os.walk(out_dir):
        for name in files:
            names.append(os.path.relpath(os.path.join(root, name), out_dir).replace(os.sep, "/"))
    return names


def _heartbeats(run: _Attempt) -> None:
    """Renew the lease every third of it until the attempt stops or the server gives it up."""
    interval = max(0.2, run.lease_seconds / 3)
    while not run.stop.wait(interval):
        try:
            run.client.attempt("heartbeat", {"progress": round(run.progress, 4)})
        except AttemptLost:
            run.give_up()
            return
        except AttemptRefused as exc:
            log.warning("job %s: heartbeat failed: %s", run.client.job_id, exc)


def _package(
    run: _Attempt, source: str, out_dir: str, params: dict[str, Any], max_pixels: int
) -> dict[str, Any]:
    """Run the packager on ``source``; its final message (outputs or error)."""
    spec = {"source": source, "out_dir": out_dir, "params": params, "max_pixels": max_pixels}
    packager = subprocess.Popen(
        [sys.executable, "-m", PACKAGER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    run.packager = packager
    if run.lost.is_set():
        run.give_up()
    assert packager.stdin is not None and packager.stdout is not None
    tail = _Tail(packager.stderr)
    result: dict[str, Any] | None = None
    try:
        packager.stdin.write(json.dumps(spec).encode())
        packager.stdin.close()
        for line in packager.stdout:
            message = json.loads(line)
            if "progress" in message:
                fraction = min(1.0, max(0.0, float(message["progress"])))
                run.progress = round(fraction * PACKAGING_SHARE, 4)
            elif "outputs" in message or "error" in message:
                result = message
    except (OSError, ValueError, TypeError):
        with contextlib.suppress(ProcessLookupError):
            packager.kill()
    code = packager.wait()
    tail.thread.join()
    if result is None:
        if not run.lost.is_set():
            log.error("packager exited with %s: %s", code, tail.text())
        return {"error": f"the packaging worker stopped unexpectedly (exit status {code})"}
    return result


class _Tail:
    """The last few KiB the packager writes to stderr, read on a thread of its own."""

    def __init__(self, stream: Any) -> None:
        self.data = b""
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: Any) -> None:
        while chunk := stream.read(65536):
            self.data = (self.data + chunk)[-STDERR_TAIL_BYTES:]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")
