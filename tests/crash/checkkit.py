"""The checks of a crash-matrix state: a recovered machine's state, bytes, files and
journal against the ledger of acknowledged operations (``tests.crash.model``), and
``check_recovered``, which boots a successor on a crash image and runs them all; the claims
are those of ``docs/durability.md``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fsseam.simfs import SimFileSystem
from journal import Journal, JournalOptions
from service.engine.core import Engine
from service.storage.direct import is_direct_id
from tests.crash.enginekit import GC_GRACE, STAGING_TTL, SimMachine
from tests.crash.indexkit import INDEX_FATES, index_fate, index_problems, journal_truth
from tests.crash.model import MARKER, KeyState, UploadState


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
        bucket_id = engine.state.bucket_id_of(name)
        exists = bucket_id is not None
        verdict.check(
            exists in possible.allowed(firm=firm),
            f"bucket {name}: exists={exists}, allowed {possible.allowed(firm=firm)}",
        )
        if settle:
            possible.settle(exists)
            problem = ledger.identity_problem(name, bucket_id, firm=firm)
            verdict.check(problem is None, problem or "")
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
    held = engine.state.referenced_payloads() - engine.quarantined
    referenced = {p for p in held if not is_direct_id(p)}
    upload_files = set(await engine.run_blocking(engine.store.direct_uploads))
    open_uploads = {session.upload_id for session in engine.state.uploads()}
    verdict.check(
        upload_files <= open_uploads,
        f"files of closed uploads left: {sorted(upload_files - open_uploads)}",
    )
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


async def check_recovered(
    machine: SimMachine,
    image: SimFileSystem,
    *,
    firm: bool,
    files: bool = True,
    first: Callable[[SimMachine, Verdict, bool], Awaitable[None]] | None = None,
) -> list[str]:
    """Boot a successor of ``machine`` on ``image``, check everything (``first`` before
    anything else runs on it), cut its power again; return the problems found."""
    verdict = await check_journal(machine, image, firm=firm)
    truth, last = await journal_truth(image, machine.config)
    INDEX_FATES[index_fate(image, machine.config, last)] += 1
    successor = machine.successor(image)
    await successor.boot()
    try:
        if first is not None:
            await first(successor, verdict, firm)
        verdict.problems += index_problems(successor.running, truth)
        state = check_state(successor, firm=firm)
        verdict.problems += state.problems
        await check_bytes(successor, verdict)
        if files:
            await check_files_after_gc(successor, verdict)
    finally:
        await successor.power_cut()
    return verdict.problems
