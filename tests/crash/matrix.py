"""The crash matrix: every operation kind x every file operation index x every way to fail.

A *kind* is a setup (run without faults) and one operation under test. A dry run counts the
file operations the operation performs (``n``) and the crash points it passes. Then, for
every ``k`` in ``0..n``, a fresh machine repeats setup and operation with a fault armed at
the operation's ``k``-th file operation:

- a crash (the power goes; the operation and everything after fails), recovered from each
  image of the disk: all unsynced data lost, all kept, a seeded random subset kept, and each
  file's last unsynced write torn; one image also suffers a second crash during recovery;
- EIO and ENOSPC, once and persistently; then two probe operations, a power cut, and
  recovery from the lost and the kept images.

And once more with the power cut at each crash point the dry run passed (its Nth hit).

Every recovery is one *crash state*: the journal must replay to a gap-free prefix holding
everything durable, every key, bucket and upload must be in a state the ledger allows, every
version and part must serve its exact bytes (or, balanced, an integrity error), and after the
staging TTL and one GC pass the payload files must be exactly the referenced ones.

Thread-safety: none; each scenario runs in its own event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fsseam.simfs import CRASH_MODES, CrashMode, Fault, SimFileSystem, SimulatedCrash
from journal.model import Durability
from tests.crash.archivekit import archive_kinds, check_archive
from tests.crash.auditkit import audit_kinds, check_audit
from tests.crash.batchkit import put_batch
from tests.crash.checkkit import Verdict, check_recovered, check_state
from tests.crash.enginekit import (
    GC_GRACE,
    Result,
    SimMachine,
    crash_config,
    part_of,
)
from tests.crash.mediakit import check_media, media_kinds
from tests.crash.replay_controls import CrashPoints, seeded_names
from tests.crash.upkeepkit import check_upkeep, upkeep_kinds

Step = Callable[[SimMachine, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Kind:
    """One operation under test: its setup and the operation itself."""

    name: str
    setup: Step
    operation: Step
    boots: bool = False
    """The operation is the machine's own start (recovery): it runs on a powered-off machine."""
    overrides: tuple[tuple[str, Any], ...] = ()
    """Settings of this kind's machines that differ from ``crash_config``'s."""


@dataclass
class Tally:
    """What a kind's matrix checked."""

    crash_states: int = 0
    scenarios: int = 0
    operations: int = 0
    hits: Counter[str] = field(default_factory=Counter)
    """Crash points the operation under test passes (in its dry run)."""
    problems: list[str] = field(default_factory=list)

    def add(self, where: str, problems: list[str]) -> None:
        self.crash_states += 1
        self.problems += [f"{where}: {problem}" for problem in problems]


# -- setups and operations ----------------------------------------------------------------

BODY_A = b"a-one:" * 5
PART_ONE = b"part-one:" * 4
PART_TWO = b"part-two:" * 4


async def must(result: Awaitable[Result]) -> Result:
    outcome = await result
    assert outcome.ok, outcome
    return outcome


async def base_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    """Two buckets (one versioned), a few objects, an open upload with two parts."""
    await machine.boot()
    await must(machine.create_bucket("plain"))
    await must(machine.create_bucket("vers", versioned=True))
    await must(machine.put("plain", "a", BODY_A))
    await must(machine.put("plain", "b", b"b-one"))
    await must(machine.put("vers", "a", b"va-one"))
    await must(machine.put("vers", "a", b"va-two"))
    upload = await must(machine.start_upload("plain", "mp"))
    upload_id = upload.value.upload_id
    one = part_of(await must(machine.put_part(upload_id, 1, PART_ONE)))
    two = part_of(await must(machine.put_part(upload_id, 2, PART_TWO)))
    context["upload"] = upload_id
    context["parts"] = [(1, one.sha256), (2, two.sha256)]
    # Most data is covered by a snapshot, and a little is not.
    await must(machine.snapshot())
    await must(machine.put("plain", "late", b"after the snapshot"))


async def restarted_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    """The base, then a clean restart: the upload's parts are stored, its assembly (kept
    by the process that stopped) is gone, so completing it joins the parts."""
    await base_setup(machine, context)
    await machine.shutdown()
    await machine.boot()


async def direct_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    """The base, and an upload whose parts 1 and 2 were written in place (stride: a part)."""
    await base_setup(machine, context)
    upload = await must(machine.start_upload("plain", "md", part_size=len(PART_ONE)))
    upload_id = upload.value.upload_id
    one = part_of(await must(machine.put_part(upload_id, 1, PART_ONE, in_place=True)))
    two = part_of(await must(machine.put_part(upload_id, 2, PART_TWO, in_place=True)))
    context["direct"] = upload_id
    context["direct_parts"] = [(1, one.sha256), (2, two.sha256)]


async def direct_resent_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    """``direct_setup``, then part 2 sent again: it takes a file of its own (the stored
    one is never overwritten in place), to be copied into place at ``complete``."""
    await direct_setup(machine, context)
    again = b"part-2-bis:" * 3 + b"xxx"
    two = part_of(await must(machine.put_part(context["direct"], 2, again, in_place=True)))
    context["direct_parts"][1] = (2, two.sha256)


async def direct_restarted_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    """``direct_setup``, then a clean restart: the hash state is gone, the file is not."""
    await direct_setup(machine, context)
    await machine.shutdown()
    await machine.boot()


async def upload_part_direct(machine: SimMachine, context: dict[str, Any]) -> None:
    """A short last part, written in place at its offset."""
    await machine.put_part(context["direct"], 3, b"part-three", in_place=True)


async def upload_complete_direct(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.complete_upload(context["direct"], context["direct_parts"])


async def upload_abort_direct(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.abort_upload(context["direct"])


async def doomed_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    await base_setup(machine, context)
    await must(machine.create_bucket("doomed"))
    await must(machine.put("doomed", "x", b"doomed-x"))
    await must(machine.put("doomed", "y", b"doomed-y"))
    upload = await must(machine.start_upload("doomed", "z"))
    await must(machine.put_part(upload.value.upload_id, 1, b"doomed-part"))


async def orphan_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    await base_setup(machine, context)
    await machine.leave_orphans(3)
    machine.clock.advance(3600)


async def put_new(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.put("plain", "new", b"brand-new:" * 6)


async def put_small(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.put("plain", "new", b"small-new:" * 6, small=True)


async def put_small_group(machine: SimMachine, context: dict[str, Any]) -> None:
    """Three small PUTs at once, one an overwrite: in strict mode they share syncs."""
    await machine.put_together(
        [
            ("plain", "new", b"small-new:" * 6),
            ("plain", "a", b"small-a:" * 5),
            ("plain", "other", b"small-other:" * 4),
        ]
    )


async def batch_upload(machine: SimMachine, context: dict[str, Any]) -> None:
    """A batch: a new key, an overwrite, a member refused alone (a wrong SHA-256), a new
    version of a versioned key's neighbour, and one member over 256 KiB (streamed)."""
    await put_batch(
        machine,
        "plain",
        [
            ("new", b"batch-new:" * 6, {}),
            ("a", b"batch-a:" * 5, {}),
            ("refused", b"damaged", {"SERVICE.sha256": "0" * 64}),
            ("large", bytes(range(256)) * 1030, {}),
        ],
    )


async def no_syncfs_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    """The base, with no shared file-system sync offered (as on a kernel without a
    trustworthy ``syncfs``): a strict batch then fsyncs each file and its directory."""
    await base_setup(machine, context)
    machine.running.payload_sync = None


async def overwrite(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.put("plain", "a", b"a-two:" * 7)


async def delete(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.delete("plain", "b")


async def versioned_put(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.put("vers", "a", b"va-three")


async def versioned_delete(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.delete("vers", "a")


async def bucket_create(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.create_bucket("fresh")


async def bucket_delete(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.delete_bucket("doomed")


async def upload_start(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.start_upload("plain", "mp2")


async def upload_part(machine: SimMachine, context: dict[str, Any]) -> None:
    """Replace part 2: a new part payload in, the old one released."""
    await machine.put_part(context["upload"], 2, b"part-two-again:" * 3)


async def upload_complete(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.complete_upload(context["upload"], context["parts"])


async def upload_abort(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.abort_upload(context["upload"])


async def snapshot(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.snapshot()


async def collect_garbage(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.collect_garbage()


async def sweep_staging(machine: SimMachine, context: dict[str, Any]) -> None:
    await machine.sweep_staging()


async def interrupted_setup(machine: SimMachine, context: dict[str, Any]) -> None:
    """A machine that lost power mid-PUT with orphans, stale staging and a torn log tail
    behind it; the operation under test is the next boot."""
    await orphan_setup(machine, context)
    await machine.snapshot()
    await must(machine.put("plain", "c", b"c-one"))
    points: CrashPoints = context["points"]
    points.arm("journal.append.mid_write", points.hits["journal.append.mid_write"] + 1, machine.fs)
    await machine.put("plain", "d", b"d-one:" * 40)
    points.disarm()
    await machine.power_cut()
    machine.fs = machine.fs.crash_image("torn_tail", seed=7)
    machine.clock.advance(3600)


async def recovery(machine: SimMachine, context: dict[str, Any]) -> None:
    # A start that fails would exit the process; the next start tries again.
    with contextlib.suppress(Exception):
        await machine.boot()


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("put", base_setup, put_new),
        Kind("put_small", base_setup, put_small),
        Kind("put_small_group", base_setup, put_small_group),
        Kind("batch", base_setup, batch_upload),
        Kind("batch_fsync", no_syncfs_setup, batch_upload),
        Kind("overwrite", base_setup, overwrite),
        Kind("delete", base_setup, delete),
        Kind("versioned_put", base_setup, versioned_put),
        Kind("versioned_delete", base_setup, versioned_delete),
        Kind("bucket_create", base_setup, bucket_create),
        Kind("bucket_delete", doomed_setup, bucket_delete),
        Kind("upload_start", base_setup, upload_start),
        Kind("upload_part", base_setup, upload_part),
        Kind("upload_complete", base_setup, upload_complete),
        Kind("upload_complete_joined", restarted_setup, upload_complete),
        Kind("upload_abort", base_setup, upload_abort),
        Kind("upload_part_direct", direct_setup, upload_part_direct),
        Kind("upload_complete_direct", direct_setup, upload_complete_direct),
        Kind("upload_complete_direct_copied", direct_resent_setup, upload_complete_direct),
        Kind("upload_complete_direct_restarted", direct_restarted_setup, upload_complete_direct),
        Kind("upload_abort_direct", direct_setup, upload_abort_direct),
        Kind("snapshot", base_setup, snapshot),
        Kind("gc", orphan_setup, collect_garbage),
        Kind("staging_sweep", orphan_setup, sweep_staging),
        Kind("recovery", interrupted_setup, recovery, boots=True),
        *(
            Kind(name, setup, operation, overrides=tuple(overrides.items()))
            for name, (setup, operation, overrides) in upkeep_kinds(base_setup, must).items()
        ),
        *(
            Kind(name, setup, operation, overrides=tuple(overrides.items()))
            for name, (setup, operation, overrides) in archive_kinds(base_setup, must).items()
        ),
        *(
            Kind(name, setup, operation, overrides=tuple(overrides.items()))
            for name, (setup, operation, overrides) in audit_kinds(base_setup, must).items()
        ),
        *(
            Kind(name, setup, operation, overrides=tuple(overrides.items()))
            for name, (setup, operation, overrides) in media_kinds(base_setup, must).items()
        ),
    )
}


# -- running ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How thoroughly to test one kind."""

    durability: Durability
    crash_modes: tuple[CrashMode, ...] = CRASH_MODES
    random_seeds: int = 1
    """Random-subset images per crash (each with its own seed)."""
    errno_modes: tuple[CrashMode, ...] = ("lose_unsynced", "keep_unsynced")
    errno_faults: int = 4
    """Of the four faults (EIO and ENOSPC, once and persistent), how many to inject at each
    index; fewer than four rotate, so each fault still meets every ``4 / n``-th index."""
    second_crash: bool = True
    every_k: int = 1
    """Test every k-th file operation index (1: all of them), from ``first_index``."""
    first_index: int = 0
    """Where a sparse run starts (below ``every_k``): chosen at random per run and printed,
    so that successive runs cover every index between them."""


FAULTS = ((errno.EIO, False), (errno.ENOSPC, True), (errno.EIO, True), (errno.ENOSPC, False))


async def _prepare(
    kind: Kind, plan: Plan, points: CrashPoints
) -> tuple[SimMachine, dict[str, Any]]:
    config = crash_config(plan.durability, **dict(kind.overrides))
    machine = SimMachine(plan.durability, config=config)
    context: dict[str, Any] = {"points": points}
    await kind.setup(machine, context)
    return machine, context


async def _operate(kind: Kind, machine: SimMachine, context: dict[str, Any]) -> None:
    # The power went; what the disk kept is all that matters now.
    with contextlib.suppress(SimulatedCrash):
        await kind.operation(machine, context)


async def _probe(machine: SimMachine) -> None:
    """Two more mutations after a fault, to show that a failed journal stays failed, and a
    GC pass past the grace period, which must not delete what a failed record may name."""
    if machine.engine is not None:
        await machine.put("plain", "probe", b"probe-body")
        await machine.delete("plain", "a")
        machine.clock.advance(GC_GRACE + 1)
        await machine.collect_garbage()


def _firm(plan: Plan, mode: CrashMode, faulted: bool) -> bool:
    """Must acknowledged operations survive this image? Strict: always. Balanced: only if
    the image kept every write and no failed fsync dropped unsynced pages meanwhile."""
    return plan.durability == "strict" or (mode == "keep_unsynced" and not faulted)


async def _recover_all(
    machine: SimMachine,
    plan: Plan,
    tally: Tally,
    where: str,
    modes: tuple[CrashMode, ...],
    rng: random.Random,
    second_crash: bool,
    faulted: bool = False,
) -> None:
    """Recover from each image of ``machine``'s powered-off disk and check each."""
    images: list[tuple[CrashMode, int]] = []
    for mode in modes:
        seeds = plan.random_seeds if mode == "random_subset" else 1
        images += [(mode, rng.randrange(1 << 30)) for _ in range(seeds)]
    doubled = rng.randrange(len(images)) if second_crash else -1
    for index, (mode, seed) in enumerate(images):
        image = machine.image(mode, seed)
        firm = _firm(plan, mode, faulted)
        source = machine
        label = f"{where} image={mode}/{seed}"
        if index == doubled:
            source, image = await _crash_during_recovery(machine, image, mode, rng)
            label += " +crash during recovery"
        try:
            problems = await check_recovered(source, image, firm=firm, first=_upkeep)
        except Exception as exc:  # a recovery that cannot start is a finding too
            problems = [f"recovery raised {exc!r}"]
        tally.add(label, problems)


async def _upkeep(machine: SimMachine, verdict: Verdict, firm: bool) -> None:
    await check_upkeep(machine, verdict, firm=firm)
    await check_archive(machine, verdict)
    await check_audit(machine, verdict, firm=firm)
    check_media(machine, verdict, firm=firm)


async def _crash_during_recovery(
    machine: SimMachine, image: SimFileSystem, mode: CrashMode, rng: random.Random
) -> tuple[SimMachine, SimFileSystem]:
    first = machine.successor(image)
    image.crash_at(image.operations + rng.randrange(60))
    with contextlib.suppress(SimulatedCrash):
        await first.boot()
    await first.power_cut()
    return first, image.crash_image(mode, rng.randrange(1 << 30))


@dataclass(frozen=True)
class DryRun:
    """What the operation under test does when nothing fails."""

    operations: int
    syncs: tuple[int, ...]
    """Indices (from the operation's start) of its fsyncs and directory fsyncs."""
    hits: Counter[str]


async def dry_run(kind: Kind, plan: Plan) -> DryRun:
    """Count the operation's file operations, find its syncs and the crash points it passes."""
    points = CrashPoints()
    with points.installed(), seeded_names(f"{kind.name}/{plan.durability}"):
        machine, context = await _prepare(kind, plan, points)
        before_hits = Counter(points.hits)
        start = machine.fs.operations
        machine.fs.trace = []
        await _operate(kind, machine, context)
        trace = machine.fs.trace
        count = machine.fs.operations - start
        hits = points.hits - before_hits
        if machine.engine is not None:
            await machine.power_cut()
    syncs = tuple(index - start for index, name, _ in trace if name in SYNCS)
    return DryRun(count, syncs, hits)


SYNCS = frozenset({"fsync", "fsync_dir"})


async def crash_scenario(
    kind: Kind, plan: Plan, tally: Tally, *, k: int | None, point: tuple[str, int] | None
) -> None:
    points = CrashPoints()
    rng = random.Random(f"{kind.name}/{plan.durability}/{k}/{point}")
    with points.installed(), seeded_names(f"{kind.name}/{plan.durability}"):
        machine, context = await _prepare(kind, plan, points)
        if k is not None:
            machine.fs.crash_at(machine.fs.operations + k)
            where = f"{kind.name}/{plan.durability} crash at op {k}"
        else:
            assert point is not None
            points.arm(point[0], points.hits[point[0]] + point[1], machine.fs)
            where = f"{kind.name}/{plan.durability} crash at {point[0]}#{point[1]}"
        await _operate(kind, machine, context)
        await machine.power_cut()
        points.disarm()
        modes = plan.crash_modes if k is not None else ("lose_unsynced", "keep_unsynced")
        await _recover_all(machine, plan, tally, where, modes, rng, plan.second_crash)
    tally.scenarios += 1


async def errno_scenario(
    kind: Kind,
    plan: Plan,
    tally: Tally,
    *,
    k: int,
    code: int,
    persistent: bool = False,
    performed: bool = False,
) -> None:
    """Fail the operation's k-th file operation with ``code`` (once, persistently, or, for
    a sync, after it took effect), probe, check the live engine, then recover."""
    points = CrashPoints()
    rng = random.Random(f"{kind.name}/{plan.durability}/{k}/{code}/{persistent}/{performed}")
    name = errno.errorcode[code] + ("*" if persistent else "") + ("+" if performed else "")
    where = f"{kind.name}/{plan.durability} {name} at op {k}"
    with points.installed(), seeded_names(f"{kind.name}/{plan.durability}"):
        machine, context = await _prepare(kind, plan, points)
        kind_of = "eio" if code == errno.EIO else "enospc"
        machine.fs.inject(
            Fault(
                machine.fs.operations + k,
                kind_of,
                persistent=persistent,
                operations=SYNCS if performed else None,
                performed=performed,
            )
        )
        first_answer = len(machine.answers)
        await _operate(kind, machine, context)
        await _probe(machine)
        answers = [result for _, result in machine.answers[first_answer:]]
        problems = []
        if machine.engine is not None:
            problems += check_state(machine, firm=True, settle=False).problems
        problems += [
            f"success after a journal failure: {op}" for op in machine.success_after_failure
        ]
        for result in answers:
            if result.status == 503 and "Retry-After" not in result.headers:
                problems.append("a 503 without Retry-After")
            if code == errno.ENOSPC and result.status >= 500 and result.status not in (503, 507):
                problems.append(f"ENOSPC answered {result.status} {result.code}")
        tally.add(f"{where} live", problems)
        await machine.power_cut()
        await _recover_all(machine, plan, tally, where, plan.errno_modes, rng, False, True)
    tally.scenarios += 1


async def run_kind(kind: Kind, plan: Plan) -> Tally:
    tally = Tally()
    dry = await dry_run(kind, plan)
    tally.operations = dry.operations
    for k in range(plan.first_index, dry.operations + 1, plan.every_k):
        await crash_scenario(kind, plan, tally, k=k, point=None)
        for index in range(plan.errno_faults):
            code, persistent = FAULTS[(k * plan.errno_faults + index) % len(FAULTS)]
            await errno_scenario(kind, plan, tally, k=k, code=code, persistent=persistent)
    for k in dry.syncs:
        await errno_scenario(kind, plan, tally, k=k, code=errno.EIO, performed=True)
    for name, times in sorted(dry.hits.items()):
        for nth in sorted({1, times}):
            await crash_scenario(kind, plan, tally, k=None, point=(name, nth))
    tally.hits.update(dry.hits)
    return tally


def run_kind_sync(kind: Kind, plan: Plan) -> Tally:
    return asyncio.run(run_kind(kind, plan))
