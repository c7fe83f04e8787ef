"""The background scrub: re-read every stored object version, paced, and quarantine rot.

A pass walks the buckets in name order and each bucket's versions through the state's paged
listing (``list_versions`` with a cursor, never a whole bucket in memory), re-reads each
version's payload on the executor a chunk at a time (``service.storage.scrub``) and compares
size and SHA-256 with the record. Between chunks it sleeps as long as needed to stay at
``scrub_rate_mbps`` (10^6 bytes/s), so it never takes the disk from the requests.

A mismatch (or a missing file) quarantines the payload (``PayloadIntegrity.quarantine``: moved
aside durably, never served again; its reads answer 500 InternalError naming the corruption),
is logged, counted and listed in ``GET /api/v1/system/scrub``; ``/health`` says ``degraded``
while any listed object still holds the corrupt payload. Overwriting or deleting the object
clears its entry (the entry is dropped once the version no longer references the payload).

Resumable: progress (the pass's cursor, counts and the corrupt list) is checkpointed to
``<data_dir>/scrub.json`` every ``CHECKPOINT_SECONDS`` and at the end of a pass (temporary
file, fsync, rename). A start finding a pass unfinished continues it where the checkpoint
says. A cursor is ``(bucket, key, position)``, a key's versions walked newest first (the
listing's order). Versions are only ever added at a key's newest end (written after the pass
passed them: the next pass reads them) and a removal only moves older ones down, so a pass
resumed from a cursor may check a version again but never skips one; the crash matrix
checks it (``tests/crash/upkeepkit.py``). Multipart parts not yet completed are not scrubbed.

A new pass starts ``scrub_interval_days`` after the previous one started (the first one an
interval after the data dir first ran with a scrub; checked every ``tick_seconds``), or at
once on ``POST /api/v1/system/scrub``.

Thread-safety: event-loop thread only; file work runs on the engine's executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from fsseam.durable import read_file, replace_file
from service.common.timefmt import rfc3339_seconds
from service.config import Config
from service.engine.core import Engine
from service.meta import ObjectVersion
from service.storage.scrub import ScrubRead

log = logging.getLogger("service.scrub")

CHECKPOINT_NAME = "scrub.json"
CHECKPOINT_SECONDS = 1.0
PAGE = 200
MAX_TICK_SECONDS = 60.0
MAX_CATCH_UP_SECONDS = 1.0


@dataclass(slots=True)
class CorruptEntry:
    bucket: str
    key: str
    version_id: str | None
    payload_id: str
    problem: str
    detected_at: float


@dataclass(slots=True)
class ScrubProgress:
    """The durable part of the scrub: the pass in progress (if any) and what it found."""

    running: bool = False
    created_at: float | None = None
    """When this data dir's scrub was first set up: the first pass is due an interval later."""
    started_at: float | None = None
    finished_at: float | None = None
    objects_checked: int = 0
    bytes_checked: int = 0
    bucket: str | None = None
    after: tuple[str, int] | None = None
    corrupt: list[CorruptEntry] = field(default_factory=list)


class Scrubber:
    """Runs scrub passes and answers their figures."""

    def __init__(self, engine: Engine, config: Config) -> None:
        self._engine = engine
        self._rate = max(1.0, config.scrub_rate_mbps * 1_000_000)
        self._interval = config.scrub_interval_days * 86_400
        self._path = os.path.join(config.data_dir, CHECKPOINT_NAME)
        self.progress = ScrubProgress()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._pace_origin: float | None = None
        self._paced_bytes = 0
        self._saved_at = 0.0
        self.bytes_total = 0
        """Bytes re-read since this process started (the metrics counter)."""
        self.objects_total = 0

    @property
    def tick_seconds(self) -> float:
        """How often the background job asks whether a pass is due."""
        return min(MAX_TICK_SECONDS, max(0.5, self._interval / 10))

    async def start(self) -> None:
        """Load the checkpoint; continue a pass a stop or crash interrupted."""
        loaded = await self._engine.run_blocking(self._load)
        if loaded is not None:
            self.progress = loaded
        else:
            self.progress = ScrubProgress(created_at=time.time())
            await self._save()
        if self.progress.running:
            log.info("continuing the interrupted scrub pass in bucket %s", self.progress.bucket)
            self._launch()

    async def stop(self) -> None:
        self._stopped = True  # the background tick may still fire: it starts nothing now
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        with contextlib.suppress(OSError):
            await self._save()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def finished(self) -> None:
        """Wait until the pass running now (if any) ends; its failure is raised."""
        if self._task is not None:
            await self._task

    def start_pass(self) -> bool:
        """Start a pass now; False if one is running (or the server is stopping)."""
        if self.running or self._stopped:
            return False
        self.progress = ScrubProgress(
            running=True,
            created_at=self.progress.created_at,
            started_at=time.time(),
            finished_at=self.progress.finished_at,  # the last complete pass's, until this one ends
            corrupt=self.current_corrupt(),
        )
        self._launch()
        return True

    async def maybe_start(self) -> None:
        """The background job: start a pass when the interval since the last one passed."""
        started = self.progress.started_at or self.progress.created_at or 0.0
        if not self.running and time.time() - started >= self._interval:
            self.start_pass()

    def _launch(self) -> None:
        self._pace_origin = None
        self._saved_at = 0.0  # checkpoint at the first step: a crash must find the pass
        self._task = asyncio.get_running_loop().create_task(self._run())

    # -- the pass ------------------------------------------------------------------------

    async def _run(self) -> None:
        progress = self.progress
        state = self._engine.state
        await self._save()  # a crash from here on finds the pass and continues it
        try:
            for bucket in [b.name for b in state.list_buckets()]:
                if progress.bucket is not None and bucket < progress.bucket:
                    continue
                if bucket != progress.bucket:
                    progress.bucket, progress.after = bucket, None
                await self._scrub_bucket(bucket)
            progress.running = False
            progress.finished_at = time.time()
            progress.bucket = progress.after = None
            log.info(
                "scrub pass done: %d objects, %d bytes, %d corrupt",
                progress.objects_checked,
                progress.bytes_checked,
                len(self.current_corrupt()),
            )
        except Exception:
            log.exception("the scrub pass failed; it continues at the next start or tick")
            raise
        finally:
            with contextlib.suppress(OSError):
                await self._save()

    async def _scrub_bucket(self, bucket: str) -> None:
        progress, state = self.progress, self._engine.state
        while state.get_bucket(bucket) is not None:
            page = state.list_versions(bucket, limit=PAGE, start_after=progress.after)
            for entry in page.versions:
                version = entry.version
                history = state.object_versions(bucket, version.key)
                position = next((i for i, v in enumerate(history) if v == version), None)
                if version.payload_id is not None:
                    await self._check(version)
                if position is not None:
                    progress.after = (version.key, position)
                if time.monotonic() - self._saved_at >= CHECKPOINT_SECONDS:
                    await self._save()
            if page.last_item is not None:
                progress.after = page.last_item
            if not page.truncated:
                return

    async def _check(self, version: ObjectVersion) -> None:
        engine, progress = self._engine, self.progress
        payload_id = version.payload_id
        if payload_id is None or payload_id in engine.quarantined:
            return
        reader = await engine.run_blocking(ScrubRead, engine.store, payload_id)
        try:
            while count := await engine.run_blocking(reader.step):
                progress.bytes_checked += count
                self.bytes_total += count
                await self._pace(count)
        finally:
            reader.close()  # one close(2): too small to send to the executor
        progress.objects_checked += 1
        self.objects_total += 1
        problem = reader.problem(version.size, version.sha256)
        current = state_version(engine, version)
        if problem is None or current is None or current.payload_id != payload_id:
            return  # intact, or overwritten/deleted while it was read
        log.error(
            "scrub: %s/%s (version %s, payload %s) is corrupt: %s; quarantined",
            version.bucket,
            version.key,
            version.version_id,
            payload_id,
            problem,
        )
        await engine.run_blocking(engine.integrity.quarantine, payload_id)
        engine.quarantined.add(payload_id)
        engine.payload_cache.discard([payload_id])
        progress.corrupt.append(
            CorruptEntry(
                version.bucket, version.key, version.version_id, payload_id, problem, time.time()
            )
        )
        await self._save()

    async def _pace(self, count: int) -> None:
        """Sleep as long as the bytes read so far are ahead of the pace. The clock runs over
        the whole pass, so time lost between reads (opening files, listing, checkpoints) is
        made up; but at most ``MAX_CATCH_UP_SECONDS`` of it, so a pass that fell behind
        (a busy disk) never bursts."""
        now = time.monotonic()
        origin = self._pace_origin
        if origin is None or (now - origin) - self._paced_bytes / self._rate > MAX_CATCH_UP_SECONDS:
            origin, self._pace_origin, self._paced_bytes = now, now, 0
        self._paced_bytes += count
        ahead = self._paced_bytes / self._rate - (now - origin)
        if ahead > 0:
            await asyncio.sleep(ahead)

    # -- figures -------------------------------------------------------------------------

    def current_corrupt(self) -> list[CorruptEntry]:
        """Corrupt entries whose version still holds the corrupt payload (an overwrite or
        delete clears an entry)."""
        alive = []
        for entry in self.progress.corrupt:
            version = self._engine.state.head_object(
                entry.bucket, entry.key, entry.version_id or "null"
            )
            if version is not None and version.payload_id == entry.payload_id:
                alive.append(entry)
        self.progress.corrupt = alive
        return alive

    def document(self) -> dict[str, Any]:
        """``GET /api/v1/system/scrub``."""
        progress = self.progress
        return {
            "state": "running" if self.running else "idle",
            "started_at": _time(progress.started_at),
            "finished_at": _time(progress.finished_at),
            "objects_checked": progress.objects_checked,
            "bytes_checked": progress.bytes_checked,
            "rate_bytes_per_second": self._rate,
            "corrupt": [
                {
                    "bucket": entry.bucket,
                    "key": entry.key,
                    "version_id": entry.version_id,
                    "problem": entry.problem,
                    "detected_at": _time(entry.detected_at),
                }
                for entry in self.current_corrupt()
            ],
        }

    # -- checkpoint ----------------------------------------------------------------------

    async def _save(self) -> None:
        self._saved_at = time.monotonic()
        doc = asdict(self.progress)
        data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
        await self._engine.run_blocking(self._write, data)

    def _write(self, data: bytes) -> None:
        replace_file(self._engine.fs, self._path, data)  # whole, or the previous one

    def _load(self) -> ScrubProgress | None:
        data = read_file(self._engine.fs, self._path)
        if data is None:
            return None
        try:
            doc = json.loads(data)
            corrupt = [CorruptEntry(**entry) for entry in doc.pop("corrupt", [])]
            after = doc.pop("after", None)
            return ScrubProgress(**doc, after=tuple(after) if after else None, corrupt=corrupt)
        except (ValueError, TypeError) as exc:
            log.error("scrub checkpoint %s is unreadable (%s); starting afresh", self._path, exc)
            return None


def state_version(engine: Engine, version: ObjectVersion) -> ObjectVersion | None:
    """The state's current record of ``version`` (None once it is gone)."""
    return engine.state.head_object(version.bucket, version.key, version.version_id or "null")


def _time(value: float | None) -> str | None:
    return rfc3339_seconds(value) if value else None
