"""The real Engine, in-process, on a SimFileSystem: operations, power cuts, recovery, checks.

``SimMachine`` is one simulated computer: a ``SimFileSystem`` (with its manual clock) and the
engine running on it. Its operations call the same domain functions the HTTP handlers call
(``StagingUpload`` + ``objects.store_object`` for a PUT, ``multipart.complete_upload``...),
turn every outcome into the status the HTTP layer would answer, and record the outcome in a
``Ledger`` (``tests.crash.model``). ``power_cut`` drops the engine as a power loss would;
``SimFileSystem.crash_image`` gives the disk that survives; a new machine boots on it and
``tests.crash.checkkit`` asserts the durability claims of ``docs/durability.md``.

Determinism: the engine's executor is replaced by a single thread, so its jobs (staging
writes, promotes, removals) run in submission order, and the journal has its own single
thread; with operations awaited one at a time, the sequence of file operations is the same
on every run, which is what lets a test crash "at operation k" of an operation.

Thread-safety: a machine is driven from one event loop; the crash-point recorder is
thread-safe (points are hit on executor threads).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import errno
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from fsseam.simfs import CrashMode, ManualClock, SimFileSystem, SimulatedCrash
from journal.model import Durability
from service.archive.shipper import Archiver
from service.archive.wiring import make_archiver
from service.auth import load_or_create_server_secret
from service.common.api_errors import ServiceError, response_headers, status_of
from service.config import Config
from service.engine.core import Engine, OwnState
from service.engine.journaled import JournalCommitter
from service.index.opening import BOOT_ID_PATH
from service.meta import ObjectVersion, PartInfo
from service.multipart import operations as multipart
from service.multipart.uploads import Uploads
from service.ops import buckets, objects
from service.ops.objects import PutIntent
from service.storage import StagedPayload, StagingUpload
from service.storage.pipeline import BodySink
from tests.crash.model import Fate, Ledger
from tests.crash.simindex import sim_index_factory

DATA_DIR = "/srv/data"
OWNER = "u_crash"
STAGING_TTL = 60.0
GC_GRACE = 30.0


def crash_config(durability: Durability, **overrides: Any) -> Config:
    """Small segments (rolls happen), no background timers, TTLs a test can outwait."""
    values: dict[str, Any] = {
        "data_dir": DATA_DIR,
        "durability": durability,
        "staging_ttl": STAGING_TTL,
        "gc_grace": GC_GRACE,
        "gc_interval": 1e9,
        "snapshot_interval": 1e9,
        "snapshot_every": 10**9,
        "journal_segment_bytes": 512,
        "multipart_ttl": 86400.0,
        "workers": 1,  # one serving process: parts may be written in place
    }
    values.update(overrides)
    return Config(**values)


# -- results ----------------------------------------------------------------------------


@dataclass
class Result:
    """What the HTTP layer would have answered: 200, an error status, or 0 for no answer."""

    status: int
    value: Any = None
    code: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def fate(self) -> str:
        return Fate.of_status(self.status)


def storage_status(exc: OSError) -> Result:
    """The streaming layer's answer to a failed staging write (``AppContext.storage_error``)."""
    if exc.errno == errno.ENOSPC:
        return Result(507, code="InsufficientStorage")
    return Result(500, code="InternalError")


async def answer(call: Awaitable[Any]) -> Result:
    """Await a domain call and map its end the way ``service.http.base`` does."""
    try:
        value = await call
    except ServiceError as error:
        return Result(status_of(error), code=error.code, headers=response_headers(error))
    except SimulatedCrash:
        return Result(0, code="crashed")
    except Exception:  # the HTTP layer answers anything else with 500 InternalError
        return Result(500, code="InternalError")
    return Result(200, value=value)


# -- the machine ------------------------------------------------------------------------


class ProbeEngine(Engine):
    """The real engine, noting every event handed to ``commit`` (the journal check needs
    to know which events may appear in the log)."""

    attempted: list[dict[str, Any]]

    async def commit(self, event: dict[str, Any]) -> Any:
        self.attempted.append(event)
        return await super().commit(event)


@dataclass
class JournalLog:
    """What the journal was given and what it delivered, across restarts."""

    attempted: list[dict[str, Any]] = field(default_factory=list)
    delivered: dict[int, dict[str, Any]] = field(default_factory=dict)
    synced_floor: int = 0
    """Highest sequence a completed snapshot proves durable in either mode."""
    upkeep: dict[str, Any] = field(default_factory=dict)
    """What the upkeep checks need across restarts (``tests.crash.upkeepkit``): the events
    live engines derived, webhook deliveries and cursor floors."""


class SimMachine:
    """A simulated computer running the engine; see the module docstring."""

    def __init__(
        self,
        durability: Durability,
        *,
        fs: SimFileSystem | None = None,
        clock: ManualClock | None = None,
        ledger: Ledger | None = None,
        log: JournalLog | None = None,
        config: Config | None = None,
    ) -> None:
        self.durability = durability
        self.clock = clock if clock is not None else ManualClock()
        if fs is None:
            fs = SimFileSystem(clock=self.clock)
            fs.write_bytes(BOOT_ID_PATH, b"boot-0")  # the simulated kernel's boot id
        self.fs = fs
        self.ledger = ledger if ledger is not None else Ledger()
        self.log = log if log is not None else JournalLog()
        self.config = config if config is not None else crash_config(durability)
        self.engine: ProbeEngine | None = None
        self._journal: JournalCommitter | None = None
        self._uploads: Uploads | None = None
        self.archiver: Archiver | None = None
        """The running engine's archive shipper, with ``archive`` set (driven step by step)."""
        self.read_only_seen = False
        """Set once an answer showed the journal failed: no success may follow."""
        self.success_after_failure: list[str] = []
        self.answers: list[tuple[str, Result]] = []
        """Every operation's answer, in order."""

    # -- lifecycle --------------------------------------------------------------------

    async def boot(self) -> ProbeEngine:
        self.read_only_seen = False  # a new process: the last one's journal fault is history
        own = OwnState()
        committer = JournalCommitter(own, sim_index_factory(self.fs))
        engine = ProbeEngine(self.config, committer, own, fs=self.fs, clock=self.clock)
        engine.attempted = self.log.attempted
        engine.executor.shutdown(wait=True)
        engine.executor = ThreadPoolExecutor(1, thread_name_prefix="crash-engine")
        self.engine, self._journal = engine, committer
        self._uploads = Uploads(engine, shared=False, keeps_files=True)
        self.archiver = (
            make_archiver(engine, committer, self.config.archive) if self.config.archive else None
        )
        try:
            if self.config.archive:
                # As the server does before its background work: the archive ships it.
                load_or_create_server_secret(self.fs, self.config.data_dir)
            await engine.start()
            if self.archiver is not None:
                await self.archiver.begin()  # its holds settle: the orphans' sweep may run
            if committer.start_sweep is not None:
                await committer.start_sweep  # the orphans' sweep is part of the recovery here
        except BaseException:
            await self.abandon()
            raise
        journal = committer.journal
        assert journal is not None
        inner = journal.listener
        assert inner is not None
        delivered = self.log.delivered

        def listener(record: Any) -> None:
            delivered[record.sequence] = record.event
            inner(record)

        journal.listener = listener
        events = self.log.upkeep.setdefault("events", {})
        engine.events.listeners.append(lambda item: events.__setitem__(item.sequence, item.body))
        return engine

    async def abandon(self) -> None:
        """Drop the engine without letting it write anything more (the power is off)."""
        engine, self.engine = self.engine, None
        committer, self._journal = self._journal, None
        if engine is None or committer is None:
            return
        self.fs.crash()
        with contextlib.suppress(Exception):
            await engine.stop()
        if committer.journal is not None:
            with contextlib.suppress(Exception):
                await committer.journal.close()
        engine.executor.shutdown(wait=True)

    async def power_cut(self) -> None:
        await self.abandon()

    async def shutdown(self) -> None:
        """A clean stop (SIGTERM)."""
        engine, self.engine = self.engine, None
        assert engine is not None
        await engine.stop()

    async def settle(self) -> None:
        """Wait for background removals the last operation started."""
        engine = self.running
        with contextlib.suppress(Exception):
            await self.journal.flush_releases()
        with contextlib.suppress(Exception):
            await engine.run_blocking(lambda: None)

    @property
    def running(self) -> ProbeEngine:
        assert self.engine is not None, "the machine is off"
        return self.engine

    @property
    def journal(self) -> JournalCommitter:
        """The running engine's committer (its journal, snapshots, GC)."""
        assert self._journal is not None, "the machine is off"
        return self._journal

    @property
    def uploads(self) -> Uploads:
        """The running engine's multipart uploads."""
        assert self._uploads is not None, "the machine is off"
        return self._uploads

    def image(self, mode: CrashMode, seed: int = 0) -> SimFileSystem:
        """What the disk holds after the crash. ``keep_unsynced`` is what a process kill
        leaves (the page cache survives; same boot: the index is resumed); after
        ``lose_unsynced`` the machine boots anew (the index, left open, is rebuilt); the
        other modes keep the boot id, a power loss the start does not notice, so that only
        the index's own marks (sequence, CRC, layout) stand between a lost, stale, torn or
        ahead index and the state (``tests/crash/simindex.py``)."""
        image = self.fs.crash_image(mode, seed)
        if mode == "lose_unsynced":
            image.write_bytes(BOOT_ID_PATH, b"boot-%d" % random.Random(seed).randrange(1, 1 << 30))
        return image

    def successor(self, fs: SimFileSystem) -> SimMachine:
        """A machine to boot on ``fs`` (a crash image) with copies of this one's ledger and
        log, so several images of one crash can each be recovered and settled."""
        return SimMachine(
            self.durability,
            fs=fs,
            clock=ManualClock(self.clock.now),
            ledger=copy.deepcopy(self.ledger),
            log=copy.deepcopy(self.log),
            config=self.config,
        )

    # -- bookkeeping of answers -------------------------------------------------------

    def _note(self, what: str, result: Result) -> Result:
        self.answers.append((what, result))
        if self.read_only_seen and result.ok:
            self.success_after_failure.append(what)
        engine = self.engine
        if engine is not None and engine.read_only_reason is not None:
            self.read_only_seen = True
        return result

    # -- operations -------------------------------------------------------------------

    async def create_bucket(self, name: str, *, versioned: bool = False) -> Result:
        result = await answer(
            buckets.create_bucket(
                self.running, OWNER, {"name": name, "versioning_enabled": versioned}
            )
        )
        bucket_id = result.value.bucket_id if result.ok else None
        self.ledger.bucket_created(name, versioned, result.fate, bucket_id)
        return self._note(f"create bucket {name}", result)

    async def delete_bucket(self, name: str) -> Result:
        result = await answer(buckets.delete_bucket(self.running, name, force=True))
        self.ledger.bucket_deleted(name, result.fate)
        await self.settle()
        return self._note(f"delete bucket {name}", result)

    async def _stage(
        self, data: bytes, chunks: int, create: Callable[[], BodySink] | None = None
    ) -> StagedPayload | Result:
        """Stream ``data`` into a staging file (or ``create``'s sink) in ``chunks`` writes,
        as a request body."""
        engine = self.running
        try:
            upload = await StagingUpload.start(
                engine.store, engine.executor, coalesce_bytes=1, create=create
            )
        except OSError as exc:
            return storage_status(exc)
        except SimulatedCrash:
            return Result(0, code="crashed")
        step = max(1, -(-len(data) // chunks))
        try:
            for start in range(0, len(data), step):
                await upload.write(data[start : start + step])
            return await upload.finish()
        except OSError as exc:
            with contextlib.suppress(Exception):
                await upload.abort()
            return storage_status(exc)
        except SimulatedCrash:
            return Result(0, code="crashed")

    async def put(
        self, bucket: str, key: str, data: bytes, *, chunks: int = 3, small: bool = False
    ) -> Result:
        """PUT ``data``: streamed in ``chunks`` writes, or (``small``) whole, the way the
        HTTP layer stores a body of at most ``SMALL_PUT_BYTES`` (in strict mode through
        the shared file-system sync)."""
        if small:
            result = await self._put_small(bucket, key, data)
        else:
            result = await self._put(bucket, key, data, chunks)
        self.ledger.put(bucket, key, data, result.fate)
        await self.settle()
        return self._note(f"put {bucket}/{key}", result)

    async def put_together(self, puts: list[tuple[str, str, bytes]]) -> list[Result]:
        """Small PUTs in flight at once (they share file-system syncs in strict mode); each
        answer is noted as it comes, so a 200 noted after a failure came after it."""

        async def one(bucket: str, key: str, data: bytes) -> Result:
            result = await self._put_small(bucket, key, data)
            self.ledger.put(bucket, key, data, result.fate)
            return self._note(f"put {bucket}/{key}", result)

        results = await asyncio.gather(*(one(*put) for put in puts))
        await self.settle()
        return list(results)

    async def _put_small(self, bucket: str, key: str, data: bytes) -> Result:
        engine = self.running
        intent = PutIntent(bucket=bucket, key=key, content_length=len(data))
        try:
            objects.precheck_put(engine, intent)
        except ServiceError as error:
            return Result(status_of(error), code=error.code, headers=response_headers(error))
        return await answer(objects.store_small_object(engine, intent, data))

    async def _put(self, bucket: str, key: str, data: bytes, chunks: int) -> Result:
        engine = self.running
        intent = PutIntent(bucket=bucket, key=key, content_length=len(data))
        try:
            objects.precheck_put(engine, intent)
        except ServiceError as error:
            return Result(status_of(error), code=error.code, headers=response_headers(error))
        staged = await self._stage(data, chunks)
        if isinstance(staged, Result):
            return staged
        return await answer(objects.store_object(engine, intent, staged))

    async def delete(self, bucket: str, key: str) -> Result:
        result = await answer(objects.delete_object(self.running, bucket, key, None))
        self.ledger.delete(bucket, key, result.fate)
        await self.settle()
        return self._note(f"delete {bucket}/{key}", result)

    async def start_upload(self, bucket: str, key: str, *, part_size: int | None = None) -> Result:
        """``part_size``: the session's recommended part size (the stride of parts written
        in place), instead of the server's 8 MiB."""
        default = multipart.DEFAULT_PART_SIZE
        multipart.DEFAULT_PART_SIZE = part_size or default
        try:
            result = await answer(
                multipart.start_upload(self.running, OWNER, {"bucket": bucket, "key": key})
            )
        finally:
            multipart.DEFAULT_PART_SIZE = default
        upload_id = result.value.upload_id if result.ok else None
        self.ledger.upload_started(upload_id, bucket, key, result.fate)
        return self._note(f"start upload {bucket}/{key}", result)

    async def put_part(
        self, upload_id: str, number: int, data: bytes, *, in_place: bool = False
    ) -> Result:
        """Store a part as a request would; ``in_place``: as one of declared length (written
        into its upload's file when it may be), else as a chunked one (its own file)."""
        result = await self._put_part(upload_id, number, data, in_place)
        self.ledger.part_stored(upload_id, number, data, result.fate)
        await self.settle()
        return self._note(f"part {number} of {upload_id}", result)

    async def _put_part(self, upload_id: str, number: int, data: bytes, in_place: bool) -> Result:
        engine = self.running
        try:
            session = multipart.open_session(engine, upload_id)
            engine.ensure_writable()
        except ServiceError as error:
            return Result(status_of(error), code=error.code, headers=response_headers(error))
        parts = self.uploads.in_place
        claim = await parts.claim(session, number, len(data)) if in_place else None
        try:
            staged = await self._stage(data, 2, None if claim is None else parts.writer(claim))
            if isinstance(staged, Result):
                return staged
            return await answer(multipart.store_part(self.uploads, session, number, staged, None))
        finally:
            if claim is not None:
                parts.release(claim)

    async def complete_upload(self, upload_id: str, parts: list[tuple[int, str]]) -> Result:
        body = {"parts": [{"part_number": n, "etag": digest} for n, digest in parts]}
        result = await self._with_session(
            upload_id, lambda session: multipart.complete_upload(self.uploads, session, body)
        )
        self.ledger.upload_completed(upload_id, parts, result.fate)
        await self.settle()
        return self._note(f"complete {upload_id}", result)

    async def abort_upload(self, upload_id: str) -> Result:
        result = await self._with_session(
            upload_id, lambda session: multipart.abort_upload(self.uploads, session)
        )
        self.ledger.upload_aborted(upload_id, result.fate)
        await self.settle()
        return self._note(f"abort {upload_id}", result)

    async def _with_session(self, upload_id: str, call: Callable[[Any], Awaitable[Any]]) -> Result:
        try:
            session = multipart.open_session(self.running, upload_id)
        except ServiceError as error:
            return Result(status_of(error), code=error.code, headers=response_headers(error))
        return await answer(call(session))

    async def snapshot(self) -> Result:
        engine = self.running
        # A snapshot makes the payloads it covers durable, but cannot mend one a power cut
        # already tore (quarantined at the last start): that one stays an integrity error.
        referenced = engine.state.referenced_payloads() - engine.quarantined
        result = await answer(self.journal.snapshot())
        journal = self.journal.journal
        if result.ok and journal is not None:
            floor = journal.stats().last_snapshot_sequence
            self.log.synced_floor = max(self.log.synced_floor, floor)
            self.ledger.durable_payloads |= referenced
        return result

    async def collect_garbage(self) -> Result:
        result = await answer(self.journal.collect_garbage())
        await self.settle()
        return result

    async def sweep_staging(self) -> Result:
        engine = self.running
        return await answer(engine.run_blocking(engine.store.sweep_staging, STAGING_TTL))

    async def leave_orphans(self, count: int) -> None:
        """Promote payloads no record will name (a PUT whose handler died after promote),
        and leave a stale staging file (a body whose connection died)."""
        engine = self.running
        for index in range(count):
            staged = await self._stage(b"orphan %d" % index, 1)
            assert isinstance(staged, StagedPayload)
            await engine.run_blocking(engine.store.promote, staged, engine.store.new_payload_id())
        upload = await StagingUpload.start(engine.store, engine.executor)
        await upload.write(b"abandoned body")

    async def get(self, bucket: str, key: str, version_id: str | None = None) -> Result:
        """A GET as the handler serves it: resolve, then read the payload's bytes."""
        engine = self.running
        try:
            version = objects.resolve_version(engine, bucket, key, version_id)
        except ServiceError as error:
            return Result(status_of(error), code=error.code, headers=response_headers(error))
        assert version.payload_id is not None
        return await answer(
            engine.run_blocking(
                objects.read_window, engine.store, version.payload_id, 0, version.size
            )
        )


# -- observing and checking -------------------------------------------------------------


def part_of(result: Result) -> PartInfo:
    assert isinstance(result.value, PartInfo), result
    return result.value


def version_of(result: Result) -> ObjectVersion:
    assert isinstance(result.value, ObjectVersion), result
    return result.value
