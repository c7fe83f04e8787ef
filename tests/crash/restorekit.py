"""Restore in the crash matrix: ``python -m service restore``'s work cut at every file
operation and crash point, on the simulated disk that also holds the archive.

A primary ``SimMachine`` with a directory archive on its own disk commits the matrix's base
history (a snapshot, objects, an upload with parts written in place), more writes after the
snapshot, and ships them. The operation under test restores the archive into a new data dir
of the same disk, to its end or to a record in the middle, with a ``syncfs`` or (as on a
kernel without a trustworthy one) with an fsync per file and directory.

On every image of the disk after the cut (``check_restored``), the new data dir is either

- not declared ready: absent, empty, or holding ``restore-incomplete``; then a server's start
  and a second restore each refuse it with the line that says to delete it, and after that
  deletion a restore completes; or
- complete: it starts, and its state is exactly the journal's after record N (the primary's
  snapshot and records replayed to N), every version and part reading back its bytes.

Thread-safety: none; each scenario runs in its own event loop.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fsseam.fs import FileSystem
from fsseam.simfs import CRASH_MODES, SimFileSystem, SimulatedCrash
from journal import Journal, JournalOptions
from service.archive.restore import restore
from service.archive.targets import ArchiveError, DirectoryTarget
from service.meta import MetaState, decode_snapshot, encode_snapshot
from service.startup import RESTORE_INCOMPLETE, StartupError, claim_data_dir
from tests.crash.archivekit import ARCHIVE_DIR, OVERRIDES, ship_now
from tests.crash.checkkit import Verdict
from tests.crash.enginekit import SimMachine, crash_config
from tests.crash.matrix import direct_setup
from tests.crash.replay_controls import CrashPoints, seeded_names
from tests.crash.standbymatrix import more_writes

RESTORED = "/srv/restored"


@dataclass(frozen=True)
class RestoreKind:
    name: str
    back: int
    """Restore this many records before the archive's end (0: to its end)."""
    syncfs: bool


KINDS = {
    kind.name: kind
    for kind in (
        RestoreKind("restore_end", 0, syncfs=True),
        RestoreKind("restore_point_fsync", 3, syncfs=False),
    )
}

Setup = Callable[[SimMachine, dict[str, Any]], Awaitable[None]]


async def archived_primary(setup: Setup, more: Setup) -> tuple[SimMachine, dict[str, Any]]:
    """A primary whose whole history is in its archive, and its power left on."""
    primary = SimMachine("strict", config=crash_config("strict", **OVERRIDES))
    context: dict[str, Any] = {}
    await setup(primary, context)
    await more(primary, context)
    await ship_now(primary)
    assert primary.archiver is not None
    assert primary.archiver.archived_sequence == primary.journal.last_sequence()
    return primary, context


def run_restore(fs: FileSystem, kind: RestoreKind, end: int) -> None:
    """The operation under test (blocking, as the command-line tool runs it)."""
    if not kind.syncfs:
        fs.open_syncfs = lambda path: None  # type: ignore[method-assign]
    restore(DirectoryTarget(ARCHIVE_DIR, fs), RESTORED, to_sequence=end - kind.back, fs=fs)


async def state_at(image: SimFileSystem, config: Any, sequence: int) -> MetaState:
    """The primary's journal on ``image`` replayed to ``sequence``."""
    copy = image.crash_image("keep_unsynced")
    journal = Journal.open(config.journal_dir, JournalOptions(durability="strict"), copy)
    try:
        snapshot = journal.snapshot
        assert snapshot is None or snapshot.sequence <= sequence, "restore point before snapshot"
        state = decode_snapshot(snapshot.data) if snapshot else MetaState()
        for record in journal.replay():
            if record.sequence <= sequence:
                state.apply(record.event)
        return state
    finally:
        await journal.close()


def remove_tree(fs: FileSystem, path: str) -> None:
    """``rm -rf``, as the refusal tells the user to do."""
    for name in fs.listdir(path):
        child = os.path.join(path, name)
        if fs.stat(child).is_dir:
            remove_tree(fs, child)
        else:
            fs.unlink(child)
    fs.rmdir(path)


async def check_restored(
    image: SimFileSystem, kind: RestoreKind, truth: MetaState, end: int
) -> list[str]:
    """The checks of one image (module docstring)."""
    verdict = Verdict()
    marker = os.path.join(RESTORED, RESTORE_INCOMPLETE)
    empty = not image.exists(RESTORED) or not image.listdir(RESTORED)
    if image.exists(marker):
        try:
            restore(DirectoryTarget(ARCHIVE_DIR, image), RESTORED, fs=image)
            verdict.problems.append("a second restore wrote into an unfinished one")
        except ArchiveError as exc:
            verdict.check("delete the directory" in str(exc), f"the refusal says: {exc}")
        try:
            claim_data_dir(image, RESTORED).release()
            verdict.problems.append("a server started on an unfinished restore")
        except StartupError as exc:
            verdict.check(RESTORE_INCOMPLETE in str(exc), f"the start's refusal says: {exc}")
        remove_tree(image, RESTORED)
        empty = True
    if empty:
        run_restore(image, kind, end)
    await _check_complete(image, truth, verdict)
    return verdict.problems


async def _check_complete(image: SimFileSystem, truth: MetaState, verdict: Verdict) -> None:
    machine = SimMachine("strict", fs=image, config=crash_config("strict", data_dir=RESTORED))
    try:
        await machine.boot()
    except Exception as exc:  # a restored data dir that cannot start is the finding
        verdict.problems.append(f"the restored data dir does not start: {exc!r}")
        return
    try:
        engine = machine.running
        verdict.check(
            encode_snapshot(engine.state) == encode_snapshot(truth),
            "the restored state is not the journal's at the restore point",
        )
        verdict.check(not engine.quarantined, f"quarantined: {engine.quarantined}")
        for bucket in engine.state.list_buckets():
            for entry in engine.state.list_versions(bucket.name, limit=10_000).versions:
                version = entry.version
                if version.is_delete_marker or version.payload_id is None:
                    continue
                good = await engine.run_blocking(
                    engine.store.verify, version.payload_id, version.size, version.sha256
                )
                verdict.check(good, f"{bucket.name}/{version.key} does not read back")
        for session in engine.state.uploads():
            for part in engine.state.upload_parts(session.upload_id):
                good = await engine.run_blocking(
                    engine.store.verify, part.payload_id, part.size, part.sha256
                )
                verdict.check(good, f"part {part.part_number} of {session.upload_id} is damaged")
    finally:
        await machine.power_cut()


# -- running ----------------------------------------------------------------------------


async def dry_run(kind: RestoreKind) -> tuple[int, Counter[str]]:
    """The restore's file operations and the crash points it passes."""
    points = CrashPoints()
    with points.installed(), seeded_names(kind.name):
        primary, _ = await archived_primary(direct_setup, more_writes)
        before, start = Counter(points.hits), primary.fs.operations
        run_restore(primary.fs, kind, primary.journal.last_sequence())
        count, hits = primary.fs.operations - start, points.hits - before
        await primary.power_cut()
    return count, hits


async def scenario(kind: RestoreKind, k: int | None, point: tuple[str, int] | None) -> list[str]:
    points = CrashPoints()
    rng = random.Random(f"{kind.name}/{k}/{point}")
    problems = []
    with points.installed(), seeded_names(kind.name):
        primary, _ = await archived_primary(direct_setup, more_writes)
        end = primary.journal.last_sequence()
        truth = await state_at(primary.fs, primary.config, end - kind.back)
        fs: SimFileSystem = primary.fs
        if k is not None:
            fs.crash_at(fs.operations + k)
            where = f"{kind.name} crash at op {k}"
        else:
            assert point is not None
            points.arm(point[0], points.hits[point[0]] + point[1], fs)
            where = f"{kind.name} crash at {point[0]}"
        with contextlib.suppress(SimulatedCrash):  # the power went mid-restore
            run_restore(fs, kind, end)
        await primary.power_cut()
        points.disarm()
        for mode in CRASH_MODES:
            seed = rng.randrange(1 << 30)
            found = await check_restored(fs.crash_image(mode, seed), kind, truth, end)
            problems += [f"{where} image={mode}/{seed}: {each}" for each in found]
    return problems


async def run_kind(kind: RestoreKind) -> tuple[int, Counter[str], list[str]]:
    operations, hits = await dry_run(kind)
    problems = []
    for k in range(operations + 1):
        problems += await scenario(kind, k, None)
    for name in sorted(hits):
        problems += await scenario(kind, None, (name, 1))
    return operations, hits, problems
