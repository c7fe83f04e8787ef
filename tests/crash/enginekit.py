"""The real Engine, in-process, on a SimFileSystem: operations, power cuts, recovery, checks.

``SimMachine`` is one simulated computer: a ``SimFileSystem`` (with its manual clock) and the
engine running on it. Its operations call the same domain functions the HTTP handlers call
(``StagingUpload`` + ``objects.store_object`` for a PUT, ``multipart.complete_upload``...),
turn every outcome into the status the HTTP layer would answer, and record the outcome in a
``Ledger`` (``tests.crash.model``). ``power_cut`` drops the engine as a power loss would;
``SimFileSystem.crash_image`` gives the disk that survives; a new machine boots on it and
``check_recovered`` asserts the durability claims of ``docs/durability.md``.

Determinism: the engine's executor is replaced by a single thread, so its jobs (staging
writes, promotes, removals) run in submission order, and the journal has its own single
thread; with operations awaited one at a time, the sequence of file operations is the same
on every run, which is what lets a test crash "at operation k" of an operation.

Thread-safety: a machine is driven from one event loop; the crash-point recorder is
thread-safe (points are hit on executor threads).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import random
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from fsseam import crashpoints
from fsseam.simfs import CrashMode, ManualClock, SimFileSystem, SimulatedCrash
from journal import Journal, JournalOptions
from service import buckets, multipart, objects
from service.api_errors import ApiError, response_headers
from service.config import Config, Durability
from service.engine import Engine
from service.index.opening import BOOT_ID_PATH, INDEX_DIRNAME
from service.index.protocol import IndexUnreadableError
from service.meta import MetaState, ObjectVersion, PartInfo, decode_snapshot, encode_snapshot
from service.objects import PutIntent
from service.storage import StagedPayload, StagingUpload, layout
from tests.crash.model import MARKER, Fate, KeyState, Ledger, UploadState
from tests.crash.simindex import FILENAME as SIM_FILENAME
from tests.crash.simindex import SimIndex, sim_index_factory

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
    }
    values.update(overrides)
    return Config(**values)


# -- crash points -----------------------------------------------------------------------


class CrashPoints:
    """Counts every crash point hit; optionally cuts the power at the Nth hit of one name."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._target: tuple[str, int, SimFileSystem] | None = None

    def arm(self, name: str, nth: int, fs: SimFileSystem) -> None:
        with self._lock:
            self._target = (name, nth, fs)

    def disarm(self) -> None:
        with self._lock:
            self._target = None

    def __call__(self, name: str) -> None:
        with self._lock:
            self.hits[name] += 1
            target = self._target
            fire = target is not None and target[0] == name and self.hits[name] >= target[1]
            if fire:
                self._target = None
        if fire:
            assert target is not None
            target[2].crash()
            raise SimulatedCrash(f"crash point {name}")

    @contextlib.contextmanager
    def installed(self) -> Iterator[CrashPoints]:
        crashpoints.set_hook(self)
        try:
            yield self
        finally:
            crashpoints.set_hook(None)


# -- reproducible names -----------------------------------------------------------------


class SeededTokens:
    """Stands in for the ``secrets`` module where the server draws names (payload ids,
    staging names, upload ids, version suffixes), so that a crash scenario, whose random
    images depend on the order of names, replays identically from its seed."""

    def __init__(self, seed: str) -> None:
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def token_hex(self, nbytes: int) -> str:
        with self._lock:
            return self._random.randbytes(nbytes).hex()


@contextlib.contextmanager
def seeded_names(seed: str) -> Iterator[None]:
    tokens = SeededTokens(seed)
    modules = (layout, objects, multipart)
    saved = [module.secrets for module in modules]
    for module in modules:
        module.secrets = tokens  # type: ignore[assignment]
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.secrets = original


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
    except ApiError as error:
        return Result(error.status, code=error.code, headers=response_headers(error))
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
        self.read_only_seen = False
        """Set once an answer showed the journal failed: no success may follow."""
        self.success_after_failure: list[str] = []
        self.answers: list[tuple[str, Result]] = []
        """Every operation's answer, in order."""

    # -- lifecycle --------------------------------------------------------------------

    async def boot(self) -> ProbeEngine:
        self.read_only_seen = False  # a new process: the last one's journal fault is history
        engine = ProbeEngine(
            self.config, fs=self.fs, clock=self.clock, index_factory=sim_index_factory(self.fs)
        )
        engine.attempted = self.log.attempted
        engine.executor.shutdown(wait=True)
        engine.executor = ThreadPoolExecutor(1, thread_name_prefix="crash-engine")
        self.engine = engine
        try:
            await engine.start()
            if engine.start_sweep is not None:
                await engine.start_sweep  # the orphans' sweep is part of the recovery here
        except BaseException:
            await self.abandon()
            raise
        journal = engine.journal
        assert journal is not None
        inner = journal.listener
        assert inner is not None
        delivered = self.log.delivered

        def listener(record: Any) -> None:
            delivered[record.sequence] = record.event
            inner(record)

        journal.listener = listener
        return engine

    async def abandon(self) -> None:
        """Drop the engine without letting it write anything more (the power is off)."""
        engine, self.engine = self.engine, None
        if engine is None:
            return
        self.fs.crash()
        with contextlib.suppress(Exception):
            await engine.stop()
        if engine.journal is not None:
            with contextlib.suppress(Exception):
                await engine.journal.close()
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
            await engine.flush_releases()
        with contextlib.suppress(Exception):
            await engine.run_blocking(lambda: None)

    @property
    def running(self) -> ProbeEngine:
        assert self.engine is not None, "the machine is off"
        return self.engine

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
        self.ledger.bucket_created(name, versioned, result.fate)
        return self._note(f"create bucket {name}", result)

    async def delete_bucket(self, name: str) -> Result:
        result = await answer(buckets.delete_bucket(self.running, name, force=True))
        self.ledger.bucket_deleted(name, result.fate)
        await self.settle()
        return self._note(f"delete bucket {name}", result)

    async def _stage(self, data: bytes, chunks: int) -> StagedPayload | Result:
        """Stream ``data`` into a staging file in ``chunks`` writes, as a request body."""
        engine = self.running
        try:
            upload = await StagingUpload.start(engine.store, engine.executor, coalesce_bytes=1)
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

    async def put(self, bucket: str, key: str, data: bytes, *, chunks: int = 3) -> Result:
        result = await self._put(bucket, key, data, chunks)
        self.ledger.put(bucket, key, data, result.fate)
        await self.settle()
        return self._note(f"put {bucket}/{key}", result)

    async def _put(self, bucket: str, key: str, data: bytes, chunks: int) -> Result:
        engine = self.running
        intent = PutIntent(bucket=bucket, key=key, content_length=len(data))
        try:
            objects.precheck_put(engine, intent)
        except ApiError as error:
            return Result(error.status, code=error.code, headers=response_headers(error))
        staged = await self._stage(data, chunks)
        if isinstance(staged, Result):
            return staged
        return await answer(objects.store_object(engine, intent, staged))

    async def delete(self, bucket: str, key: str) -> Result:
        result = await answer(objects.delete_object(self.running, bucket, key, None))
        self.ledger.delete(bucket, key, result.fate)
        await self.settle()
        return self._note(f"delete {bucket}/{key}", result)

    async def start_upload(self, bucket: str, key: str) -> Result:
        result = await answer(
            multipart.start_upload(self.running, OWNER, {"bucket": bucket, "key": key})
        )
        upload_id = result.value.upload_id if result.ok else None
        self.ledger.upload_started(upload_id, bucket, key, result.fate)
        return self._note(f"start upload {bucket}/{key}", result)

    async def put_part(self, upload_id: str, number: int, data: bytes) -> Result:
        result = await self._put_part(upload_id, number, data)
        self.ledger.part_stored(upload_id, number, data, result.fate)
        await self.settle()
        return self._note(f"part {number} of {upload_id}", result)

    async def _put_part(self, upload_id: str, number: int, data: bytes) -> Result:
        engine = self.running
        try:
            session = multipart.open_session(engine, upload_id)
            engine.ensure_writable()
        except ApiError as error:
            return Result(error.status, code=error.code, headers=response_headers(error))
        staged = await self._stage(data, 2)
        if isinstance(staged, Result):
            return staged
        return await answer(multipart.store_part(engine, session, number, staged, None))

    async def complete_upload(self, upload_id: str, parts: list[tuple[int, str]]) -> Result:
        body = {"parts": [{"part_number": n, "etag": digest} for n, digest in parts]}
        result = await self._with_session(
            upload_id, lambda session: multipart.complete_upload(self.running, session, body)
        )
        self.ledger.upload_completed(upload_id, parts, result.fate)
        await self.settle()
        return self._note(f"complete {upload_id}", result)

    async def abort_upload(self, upload_id: str) -> Result:
        result = await self._with_session(
            upload_id, lambda session: multipart.abort_upload(self.running, session)
        )
        self.ledger.upload_aborted(upload_id, result.fate)
        await self.settle()
        return self._note(f"abort {upload_id}", result)

    async def _with_session(self, upload_id: str, call: Callable[[Any], Awaitable[Any]]) -> Result:
        try:
            session = multipart.open_session(self.running, upload_id)
        except ApiError as error:
            return Result(error.status, code=error.code, headers=response_headers(error))
        return await answer(call(session))

    async def snapshot(self) -> Result:
        engine = self.running
        # A snapshot makes the payloads it covers durable, but cannot mend one a power cut
        # already tore (quarantined at the last start): that one stays an integrity error.
        referenced = engine.state.referenced_payloads() - engine.quarantined
        result = await answer(engine.snapshot())
        if result.ok and engine.journal is not None:
            floor = engine.journal.stats().last_snapshot_sequence
            self.log.synced_floor = max(self.log.synced_floor, floor)
            self.ledger.durable_payloads |= referenced
        return result

    async def collect_garbage(self) -> Result:
        result = await answer(self.running.collect_garbage())
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
        except ApiError as error:
            return Result(error.status, code=error.code, headers=response_headers(error))
        assert version.payload_id is not None
        return await answer(
            engine.run_blocking(
                objects.read_window, engine.store, version.payload_id, 0, version.size
            )
        )


# -- observing and checking -------------------------------------------------------------


def observe_key(engine: Engine, bucket: str, key: str) -> KeyState:
    return tuple(
        MARKER if version.is_delete_marker else version.sha256
        for version in engine.state.object_versions(bucket, key)
    )


def observe_upload(engine: Engine, upload_id: str) -> UploadState:
    if engine.state.get_upload(upload_id) is None:
        return None
    return frozenset(
        (part.part_number, part.sha256) for part in engine.state.upload_parts(upload_id)
    )


INTEGRITY_CODES = frozenset({"InternalError"})
"""Codes a read of a quarantined payload may answer (balanced mode after an unclean start)."""


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            self.problems.append(message)


def check_state(machine: SimMachine, *, firm: bool, settle: bool = True) -> Verdict:
    """Every key, bucket and upload is in an allowed state; nothing unknown exists."""
    engine = machine.running
    ledger = machine.ledger
    verdict = Verdict()
    for name, possible in ledger.buckets.items():
        exists = engine.state.get_bucket(name) is not None
        verdict.check(
            exists in possible.allowed(firm=firm),
            f"bucket {name}: exists={exists}, allowed {possible.allowed(firm=firm)}",
        )
        if settle:
            possible.settle(exists)
    for bucket in engine.state.list_buckets():
        verdict.check(bucket.name in ledger.buckets, f"unknown bucket {bucket.name}")
        for entry in engine.state.list_versions(bucket.name, limit=10_000).versions:
            version = entry.version
            verdict.check(
                (bucket.name, version.key) in ledger.keys,
                f"unknown key {bucket.name}/{version.key}",
            )
    for (bucket_name, key), possible in ledger.keys.items():
        observed = observe_key(engine, bucket_name, key)
        verdict.check(
            observed in possible.allowed(firm=firm),
            f"key {bucket_name}/{key}: {_short(observed)} not in "
            f"{[_short(s) for s in possible.allowed(firm=firm)]}",
        )
        if settle:
            possible.settle(observed)
    known_open = 0
    for upload_id, upload in ledger.uploads.items():
        observed_upload = observe_upload(engine, upload_id)
        known_open += observed_upload is not None
        verdict.check(
            observed_upload in upload.allowed(firm=firm),
            f"upload {upload_id}: {observed_upload} not in {upload.allowed(firm=firm)}",
        )
        if settle:
            upload.settle(observed_upload)
    stray = len(engine.state.uploads()) - known_open
    verdict.check(stray <= ledger.unknown_uploads, f"{stray} open uploads nobody started knowingly")
    return verdict


def _short(state: KeyState) -> tuple[str, ...]:
    return tuple(item[:8] for item in state)


async def check_bytes(machine: SimMachine, verdict: Verdict) -> None:
    """Every version and part serves exactly its bytes, or (balanced) an integrity error."""
    engine = machine.running
    strict = machine.durability == "strict"
    bodies = machine.ledger.bodies
    durable = machine.ledger.durable_payloads
    for bucket in engine.state.list_buckets():
        for entry in engine.state.list_versions(bucket.name, limit=10_000).versions:
            version = entry.version
            if version.is_delete_marker:
                continue
            result = await machine.get(bucket.name, version.key, version.version_id or "null")
            where = f"{bucket.name}/{version.key}@{version.version_id}"
            if result.ok:
                verdict.check(
                    result.value == bodies.get(version.sha256),
                    f"{where} served wrong bytes ({len(result.value)} bytes)",
                )
            else:
                excused = not strict and version.payload_id not in durable
                verdict.check(
                    excused and result.code in INTEGRITY_CODES,
                    f"{where} unreadable: {result.status} {result.code}",
                )
    for session in engine.state.uploads():
        for part in engine.state.upload_parts(session.upload_id):
            good = await engine.run_blocking(
                engine.store.verify, part.payload_id, part.size, part.sha256
            )
            excused = not strict and part.payload_id not in durable
            verdict.check(
                good or (excused and part.payload_id in engine.quarantined),
                f"part {part.part_number} of {session.upload_id} is damaged",
            )


async def check_files_after_gc(machine: SimMachine, verdict: Verdict) -> None:
    """After the staging TTL and one GC pass: payload files == referenced, staging empty."""
    engine = machine.running
    machine.clock.advance(max(STAGING_TTL, GC_GRACE) + 1)
    result = await machine.collect_garbage()
    verdict.check(result.ok, f"GC failed: {result.status} {result.code}")
    on_disk = set(await engine.run_blocking(lambda: list(engine.store.list_payload_ids())))
    referenced = engine.state.referenced_payloads() - engine.quarantined
    verdict.check(
        on_disk == referenced,
        f"payload files {sorted(on_disk - referenced)} unreferenced, "
        f"{sorted(referenced - on_disk)} missing",
    )
    staging = machine.fs.listdir(engine.store.layout.staging_dir)
    verdict.check(staging == [], f"staging files left: {staging}")


async def check_journal(machine: SimMachine, image: SimFileSystem, *, firm: bool) -> Verdict:
    """The log on ``image`` replays to a gap-free prefix holding everything durable.

    Reads a copy of the image (opening cuts a torn tail), so ``image`` is left for the
    engine to recover exactly as it would.
    """
    verdict = Verdict()
    copy = image.crash_image("keep_unsynced")
    journal = Journal.open(
        machine.config.journal_dir, JournalOptions(durability=machine.durability), copy
    )
    try:
        base = journal.snapshot.sequence if journal.snapshot is not None else 0
        records = list(journal.replay())
    finally:
        await journal.close()
    sequences = [record.sequence for record in records]
    verdict.check(
        sequences == list(range(base + 1, base + 1 + len(records))),
        f"sequences after snapshot {base} are not gap-free: {sequences[:5]}...",
    )
    last = base + len(records)
    log = machine.log
    for record in records:
        sent = log.delivered.get(record.sequence)
        if sent is not None:
            verdict.check(sent == record.event, f"record {record.sequence} was altered")
        else:
            verdict.check(
                record.event in log.attempted,
                f"record {record.sequence} is no event anyone sent: {record.event}",
            )
    floor = max(log.delivered, default=0) if firm else log.synced_floor
    verdict.check(last >= floor, f"log ends at {last}, but {floor} was durable")
    # What a recovery dropped is gone for good: later sequences are new records.
    for sequence in [s for s in log.delivered if s > last]:
        del log.delivered[sequence]
    return verdict


INDEX_FATES: Counter[str] = Counter()
"""How the simulated index came back in the crash images checked: lost, torn, stale,
current or ahead (of the journal)."""


async def journal_truth(image: SimFileSystem, config: Config) -> tuple[MetaState, int]:
    """The state the journal on ``image`` alone describes, and its last sequence (read on a
    copy: opening cuts a torn tail)."""
    copy = image.crash_image("keep_unsynced")
    journal = Journal.open(config.journal_dir, JournalOptions(durability=config.durability), copy)
    try:
        state = decode_snapshot(journal.snapshot.data) if journal.snapshot else MetaState()
        for record in journal.replay():
            state.apply(record.event)
        return state, journal.stats().last_sequence
    finally:
        await journal.close()


def index_fate(image: SimFileSystem, config: Config, last: int) -> str:
    """What the crash left of the simulated index, against the journal's last sequence."""
    directory = os.path.join(config.data_dir, INDEX_DIRNAME)
    if not image.exists(os.path.join(directory, SIM_FILENAME)):
        return "lost"
    try:
        applied = SimIndex(image.crash_image("keep_unsynced"), directory).applied()[0]
    except IndexUnreadableError:
        return "torn"
    return "ahead" if applied > last else "stale" if applied < last else "current"


def check_index(engine: Engine, truth: MetaState, verdict: Verdict) -> None:
    """The state the engine started with (from its index, resumed or rebuilt) is the
    journal's: the same records, usage and payload references."""
    verdict.check(
        encode_snapshot(engine.state) == encode_snapshot(truth),
        "the state after the restart is not the replayed journal's",
    )
    for bucket in truth.list_buckets():
        verdict.check(
            engine.state.bucket_usage(bucket.name) == truth.bucket_usage(bucket.name),
            f"bucket {bucket.name}: usage {engine.state.bucket_usage(bucket.name)} "
            f"is not the journal's {truth.bucket_usage(bucket.name)}",
        )
    verdict.check(
        engine.state.referenced_payloads() == truth.referenced_payloads(),
        "the payload references are not the journal's",
    )


async def check_recovered(
    machine: SimMachine, image: SimFileSystem, *, firm: bool, files: bool = True
) -> list[str]:
    """Boot a successor of ``machine`` on ``image``, check everything, cut its power again;
    return the problems found."""
    verdict = await check_journal(machine, image, firm=firm)
    truth, last = await journal_truth(image, machine.config)
    INDEX_FATES[index_fate(image, machine.config, last)] += 1
    successor = machine.successor(image)
    await successor.boot()
    try:
        check_index(successor.running, truth, verdict)
        state = check_state(successor, firm=firm)
        verdict.problems += state.problems
        await check_bytes(successor, verdict)
        if files:
            await check_files_after_gc(successor, verdict)
    finally:
        await successor.power_cut()
    return verdict.problems


def part_of(result: Result) -> PartInfo:
    assert isinstance(result.value, PartInfo), result
    return result.value


def version_of(result: Result) -> ObjectVersion:
    assert isinstance(result.value, ObjectVersion), result
    return result.value
