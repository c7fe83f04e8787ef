"""Which crash points a kill-and-restart cycle arms, and in what order.

A runtime point is armed in a server under load and kills it there; a startup point is armed
at the start after the kill that leaves what that start repairs (a torn log tail, an orphan
payload, a stale staging file). ``coverage_plan`` arms every named point at least once (the
fast test); ``soak_cycle`` draws cycles at random (``make soak``). ``tests.crash.killkit``
runs the cycles.

Thread-safety: pure functions and constants.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.crash.killprocs import VICTIMS
from tests.crash.points import all_crash_points

STARTUP_POINTS: dict[str, str | None] = {
    "engine.after_replay": None,
    "journal.replay.truncate": "journal.append.mid_write",
    "gc.batch": "put.after_rename",
    "staging.sweep": "put.chunk_written",
    "audit.open.truncate": "audit.append.mid_write",
}
"""Points passed while a server starts, each with the runtime point whose kill leaves what
the start then repairs: a torn batch at the log's tail, a promoted payload no record names,
a half-written staging file. Armed at the start after that kill."""
STARTUP_ENV: dict[str, dict[str, str]] = {"staging.sweep": {"SERVICE_STAGING_TTL": "0"}}
"""The staging file the kill left is seconds old; a zero TTL makes the sweep take it."""

UNREACHABLE: dict[str, str] = {
    "storage.quarantined": (
        "quarantine moves a payload whose bytes fail verification after an unclean balanced "
        "run; only a power loss can tear a payload, and a SIGKILL keeps the page cache. Armed "
        "at the start after a killed balanced run (the start verifies every recent payload), "
        "it must not fire and nothing may be quarantined."
    ),
    "audit.prune.after_anchor": (
        "the workload keeps the default audit retention, so that every acknowledged "
        "request's record can be checked; the prune's crash states are the in-process "
        "matrix's (audit_prune). Armed at a start, whose prune finds nothing to remove."
    ),
    "standby.payloads_stored": (
        "a standby's (its copy of a primary's payloads): the primary of this run never "
        "passes it; tests/crash/test_standby_crash.py kills a real standby there."
    ),
    "standby.snapshot_fetched": (
        "a standby's bootstrap: the primary of this run never passes it; "
        "tests/crash/test_standby_crash.py kills a real standby there."
    ),
    "standby.payloads_written": (
        "a standby's batch of payloads written, not yet synced: the primary of this run never "
        "passes it; tests/crash/test_standby_crash.py kills a real standby there."
    ),
    "restore.marked": (
        "the restore command's (python -m service restore), never the server's; "
        "tests/crash/test_restore_matrix.py cuts the restore at each of its points."
    ),
    "restore.written": (
        "the restore command's, never the server's; tests/crash/test_restore_matrix.py."
    ),
    "restore.synced": (
        "the restore command's, never the server's; tests/crash/test_restore_matrix.py."
    ),
}
"""Points a real process cannot reach by a kill, and why; armed anyway, never hit."""

FREQUENT: frozenset[str] = frozenset(
    {
        "put.staging_created",
        "put.chunk_written",
        "put.body_complete",
        "put.after_data_fsync",
        "put.after_rename",
        "put.after_dir_fsync",
        "put.after_group_sync",
        "put.before_response",
        "journal.append.mid_write",
        "journal.append.after_write",
        "journal.append.after_fsync",
        "engine.after_apply",
        "audit.append.mid_write",
        "audit.append.after_write",
        "audit.append.after_fsync",
    }
)
"""Points every PUT passes: armed at a random later hit so the kill lands mid-load."""

STRICT_ONLY: frozenset[str] = frozenset(
    {"journal.append.after_fsync", "put.after_group_sync", "audit.append.after_fsync"}
)
"""Points a balanced server never passes (it does not fsync each batch, nor share a syncfs
between small PUTs)."""


@dataclass(frozen=True)
class Cycle:
    """One kill: what the server is armed with, and what its next start is armed with."""

    arm: str | None = None
    """Runtime crash point (None: SIGKILL from the test after a random delay)."""
    nth: int = 1
    then: str | None = None
    """Startup crash point armed at the start after the kill."""
    durability: str = "strict"
    victim: str | None = None
    """A serving process of a two-process server to SIGKILL first (``tests.crash.killprocs``)."""

    def describe(self) -> str:
        what = f"armed {self.arm}:{self.nth}" if self.arm else "random kill"
        if self.victim:
            what = f"{self.victim} of two processes killed, then {what}"
        if self.then:
            what += f", then start armed {self.then}"
        return what if self.durability == "strict" else f"{what}, {self.durability}"


def reachable_points() -> set[str]:
    return all_crash_points() - UNREACHABLE.keys()


def runtime_points() -> list[str]:
    return sorted(reachable_points() - STARTUP_POINTS.keys())


def cycle_for(point: str, rng: random.Random, *, chain: bool = True) -> Cycle:
    """A cycle that arms ``point`` (a startup point after its prerequisite's kill)."""
    if point in UNREACHABLE:
        return Cycle(durability="balanced", then=point)
    if point in STARTUP_POINTS:
        before = STARTUP_POINTS[point]
        nth = rng.randint(1, 4) if before in FREQUENT else 1
        return Cycle(arm=before, nth=nth, then=point)
    nth = rng.randint(1, 12) if point in FREQUENT else rng.randint(1, 2)
    chained = {before: after for after, before in STARTUP_POINTS.items() if before}
    return Cycle(arm=point, nth=nth, then=chained.get(point) if chain else None)


def coverage_plan(rng: random.Random, *, random_kills: int) -> list[Cycle]:
    """Every crash point armed once (startup points after the kill that prepares them),
    plus ``random_kills`` kills at random moments, one balanced run among them, and the writer
    and a worker of a two-process server each killed alone once; shuffled."""
    cycles = [cycle_for(point, rng) for point in runtime_points()]
    cycles.append(cycle_for("engine.after_replay", rng))
    cycles += [cycle_for(point, rng) for point in UNREACHABLE]
    cycles += [Cycle() for _ in range(random_kills)]
    cycles += [Cycle(victim=victim) for victim in VICTIMS]
    rng.shuffle(cycles)
    return cycles


def soak_cycle(rng: random.Random) -> Cycle:
    """A random cycle: mostly random kills, else any point (rarely balanced durability)."""
    roll = rng.random()
    if roll < 0.1:
        return Cycle(victim=rng.choice(VICTIMS))
    if roll < 0.45:
        then = "engine.after_replay" if rng.random() < 0.1 else None
        return Cycle(then=then, durability="balanced" if rng.random() < 0.1 else "strict")
    point = rng.choice(sorted(all_crash_points()))
    cycle = cycle_for(point, rng, chain=rng.random() < 0.5)
    if rng.random() < 0.1 and cycle.durability == "strict" and point not in STRICT_ONLY:
        cycle = Cycle(cycle.arm, cycle.nth, cycle.then, "balanced")
    return cycle
