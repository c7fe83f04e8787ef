"""The standby matrix's runner: the standby kinds on a populated primary, a dry run that
counts the standby's file operations and crash points, and the scenarios that cut its power
at each of them and check every image (``tests.crash.standbykit``).

Thread-safety: none; each scenario runs in its own event loop.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fsseam.simfs import CRASH_MODES
from journal.model import Durability
from tests.crash.enginekit import SimMachine, crash_config
from tests.crash.matrix import direct_setup, must
from tests.crash.replay_controls import CrashPoints, seeded_names
from tests.crash.standbykit import StandbyKind, StandbyMachine, check_standby, standby_kinds


async def populated_primary(durability: Durability) -> tuple[SimMachine, dict[str, Any]]:
    """The matrix's base (with a snapshot) and an upload with parts written in place."""
    primary = SimMachine(durability, config=crash_config(durability))
    context: dict[str, Any] = {"points": CrashPoints()}
    await direct_setup(primary, context)
    return primary, context


async def more_writes(primary: SimMachine, context: dict[str, Any]) -> None:
    """A new key, an overwrite and a delete (they release payloads the standby still needs),
    a new version, a part written in place, and a multipart upload completed."""
    await must(primary.put("plain", "new", b"brand-new:" * 6))
    await must(primary.put("plain", "a", b"a-two:" * 7))
    await must(primary.delete("plain", "b"))
    await must(primary.put("vers", "a", b"va-three"))
    await must(primary.put_part(context["direct"], 3, b"part-three", in_place=True))
    await must(primary.complete_upload(context["upload"], context["parts"]))


KINDS = standby_kinds(populated_primary, more_writes)


@dataclass
class Tally:
    crash_states: int = 0
    operations: int = 0
    hits: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


async def _prepare(
    kind: StandbyKind, durability: Durability
) -> tuple[StandbyMachine, dict[str, Any]]:
    context: dict[str, Any] = {"durability": durability}
    standby = await kind.setup(context)
    return standby, context


async def dry_run(kind: StandbyKind, durability: Durability) -> tuple[int, Counter[str]]:
    """The standby's file operations in the operation under test, and its crash points."""
    points = CrashPoints()
    with points.installed(), seeded_names(f"{kind.name}/{durability}"):
        standby, context = await _prepare(kind, durability)
        before, start = Counter(points.hits), standby.fs.operations
        await kind.operation(standby)
        count, hits = standby.fs.operations - start, points.hits - before
        await standby.power_cut()
        await context["primary"].power_cut()
    return count, hits


async def scenario(
    kind: StandbyKind, durability: Durability, tally: Tally, k: int | None, point: Any
) -> None:
    points = CrashPoints()
    rng = random.Random(f"{kind.name}/{durability}/{k}/{point}")
    with points.installed(), seeded_names(f"{kind.name}/{durability}"):
        standby, context = await _prepare(kind, durability)
        if k is not None:
            standby.fs.crash_at(standby.fs.operations + k)
            where = f"{kind.name}/{durability} crash at op {k}"
        else:
            points.arm(point[0], points.hits[point[0]] + point[1], standby.fs)
            where = f"{kind.name}/{durability} crash at {point[0]}#{point[1]}"
        # The power went (the journal's failure may surface as a failed commit): what the
        # standby's disk kept is all that matters now. The dry run raises any other error.
        with contextlib.suppress(Exception):
            await kind.operation(standby)
        await standby.power_cut()
        points.disarm()
        modes = CRASH_MODES if k is not None else ("lose_unsynced", "keep_unsynced")
        for mode in modes:
            seed = rng.randrange(1 << 30)
            problems = await check_standby(standby, standby.image(mode, seed), context["primary"])
            tally.crash_states += 1
            tally.problems += [f"{where} image={mode}/{seed}: {each}" for each in problems]
        await context["primary"].power_cut()


async def run_kind(kind: StandbyKind, durability: Durability) -> Tally:
    tally = Tally()
    tally.operations, tally.hits = await dry_run(kind, durability)
    for k in range(tally.operations + 1):
        await scenario(kind, durability, tally, k, None)
    for name, times in sorted(tally.hits.items()):
        for nth in sorted({1, times}):
            await scenario(kind, durability, tally, None, (name, nth))
    return tally
