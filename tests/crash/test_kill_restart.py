"""Real processes: a server under 8 concurrent clients, SIGKILLed and restarted, over and over.

Each cycle kills the server at a random moment or at a named crash point, restarts it on
the same data dir and checks over HTTP that every acknowledged write, delete and complete
survived byte-exact, that every interrupted operation left its key or session in the old
state or the new one, and (at the end) that the payload files are exactly the stored ones.
``tests.crash.killkit`` has the workload and the checks; its docstring tells the cycle.

The fast test arms every named crash point at least once (the in-process matrix passes the
points; this one kills a real server at each of them), and fails if a reachable point was
never hit. The soak (``make soak``) runs ``SOAK_CYCLES`` (1,000) cycles.

``CRASH_SEED`` replays a run's random choices (the seed is in every problem reported).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.crash.killkit import KillKit
from tests.crash.killplan import UNREACHABLE, coverage_plan, reachable_points, soak_cycle
from tests.crash.points import all_crash_points

FAST_RANDOM_KILLS = 4
FAST_RETRIES = 2
SOAK_CYCLES = int(os.environ.get("SOAK_CYCLES", "1000"))
SOAK_KILL_DELAY = (0.03, 1.0)
"""Longer runs between kills than the fast test's: more state, rolls and snapshots."""


def seed() -> int:
    return int(os.environ.get("CRASH_SEED") or random.SystemRandom().getrandbits(32))


def record(kit: KillKit, record_property: Callable[[str, object], None]) -> None:
    record_property("kill_cycles", kit.tally.cycles)
    record_property("acknowledged_checked", kit.tally.checked)
    record_property("acknowledged_lost", kit.tally.lost)


def assert_clean(kit: KillKit) -> None:
    problems = kit.tally.problems
    assert not problems, f"{len(problems)} problems (seed {kit.seed}):\n" + "\n".join(problems)
    assert kit.tally.lost == 0


@pytest.mark.e2e
@pytest.mark.timeout(1500)  # a hang limit: ~4 min quiet, over 10 min at load 20 on 2 cores
def test_every_kill_and_restart_keeps_every_acknowledged_operation(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    started = time.monotonic()
    kit = KillKit(tmp_path, seed())
    kit.setup()
    try:
        kit.run_all(coverage_plan(kit.rng, random_kills=FAST_RANDOM_KILLS), retries=FAST_RETRIES)
        kit.finish()
    finally:
        kit.proc.kill()
        record(kit, record_property)
    print(f"{kit.report()} in {time.monotonic() - started:.1f} s (seed {kit.seed})")
    assert_clean(kit)
    tally = kit.tally
    assert tally.cycles >= 25
    assert set(tally.armed) == all_crash_points(), "every named point is armed at least once"
    never = sorted(point for point in reachable_points() if tally.hits[point] == 0)
    assert not never, f"armed but never hit: {never} (armed {dict(tally.armed)})"
    for point in UNREACHABLE:
        # Armed after a killed balanced run, whose next start verifies every recent payload:
        # a SIGKILL cannot tear one, so nothing may be quarantined (see UNREACHABLE's reason).
        assert tally.armed[point] >= 1 and tally.hits[point] == 0, point
    assert tally.checked > 0
    assert tally.webhook_events > 0, "the webhook receiver got no event"
    assert tally.victims == {"writer": 1, "worker": 1}, "each serving role killed alone once"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(max(600, SOAK_CYCLES * 10))
def test_soak_kill_and_restart(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """``SOAK_CYCLES`` cycles: first one covering every point, then random ones."""
    started = time.monotonic()
    kit = KillKit(tmp_path, seed(), kill_delay=SOAK_KILL_DELAY)
    kit.setup()
    cycles = coverage_plan(kit.rng, random_kills=FAST_RANDOM_KILLS)[:SOAK_CYCLES]
    cycles += [soak_cycle(kit.rng) for _ in range(SOAK_CYCLES - len(cycles))]
    try:
        for start in range(0, len(cycles), 50):
            kit.run_all(cycles[start : start + 50], first=start + 1)
            print(f"soak: {kit.report()} after {time.monotonic() - started:.0f} s", flush=True)
            if kit.tally.problems:
                break
        kit.finish()
    finally:
        kit.proc.kill()
        record(kit, record_property)
    print(
        f"acknowledged operations checked: {kit.tally.checked}, lost: {kit.tally.lost} "
        f"({kit.tally.cycles} kill/restart cycles, seed {kit.seed}, "
        f"{time.monotonic() - started:.0f} s)"
    )
    assert_clean(kit)
    assert kit.tally.lost == 0
