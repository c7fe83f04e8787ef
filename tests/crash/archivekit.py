"""The continuous archive in the crash matrix: shipping cut at every file operation and
crash point, and what must hold on every recovered disk.

The archive is a directory on the same simulated disk (``DirectoryTarget`` through the
seam), so a power cut takes from it exactly what was not synced. The kinds ship what a few
operations committed (a new object, an overwrite whose old payload the archive still
needs); the checks, on each recovered machine:

- the archive as the crash left it verifies (``archive verify``): whole files only, records
  contiguous, every referenced payload present with its SHA-256;
- it is never ahead of what the recovered journal holds;
- once the recovered machine ships again, it reaches the journal's end without starting
  over (the journal kept the segments and payloads the archive still needed), and verifies.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from fsseam.simfs import SimulatedCrash
from journal import JournalError
from service.archive.shipper import read_state
from service.archive.targets import ArchiveError, DirectoryTarget
from service.archive.verify import verify
from tests.crash.checkkit import Verdict
from tests.crash.enginekit import SimMachine

ARCHIVE_DIR = "/srv/archive"
OVERRIDES = {"archive": ARCHIVE_DIR}

Step = Callable[[SimMachine, dict[str, Any]], Awaitable[None]]


async def ship_now(machine: SimMachine) -> None:
    """One shipping round; a failure is what the background loop logs and retries."""
    archiver = machine.archiver
    assert archiver is not None
    try:
        await archiver.ship_once()
    except SimulatedCrash:
        raise
    except (ArchiveError, JournalError, OSError) as exc:
        machine.log.upkeep["archive_error"] = repr(exc)


def archive_kinds(base_setup: Step, must: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
    """``(setup, operation, config overrides)`` of the archive kinds, by name."""

    async def archived_setup(machine: SimMachine, context: dict[str, Any]) -> None:
        await base_setup(machine, context)
        await ship_now(machine)

    async def ship(machine: SimMachine, context: dict[str, Any]) -> None:
        """Two writes (one releases a payload the archive has not shipped yet), shipped."""
        await machine.put("plain", "shipped", b"shipped body:" * 3)
        await machine.put("plain", "a", b"a-replaced:" * 4)
        await ship_now(machine)

    async def ship_snapshot(machine: SimMachine, context: dict[str, Any]) -> None:
        """A snapshot, then shipping it with the records before it."""
        await machine.put("plain", "before-snap", b"before the snapshot")
        await machine.snapshot()
        await ship_now(machine)

    return {
        "archive_ship": (archived_setup, ship, OVERRIDES),
        "archive_snapshot": (archived_setup, ship_snapshot, OVERRIDES),
    }


async def check_archive(machine: SimMachine, verdict: Verdict) -> None:
    """The archive checks of a freshly recovered machine (module docstring)."""
    archiver = machine.archiver
    if archiver is None:
        return
    target = DirectoryTarget(ARCHIVE_DIR, machine.fs)
    report = await _verify(target)
    verdict.check(report.ok, f"the archive after the crash fails verify: {report.problem}")
    journal = machine.journal.journal
    assert journal is not None
    last = journal.stats().last_sequence
    end = read_state(target).end
    verdict.check(end is None or end <= last, f"archive at {end} is ahead of the journal ({last})")
    await archiver.ship_once()
    verdict.check(not archiver.rebased, "the archive had to start over after the crash")
    verdict.check(
        archiver.archived_sequence == journal.stats().last_sequence,
        f"shipping stopped at {archiver.archived_sequence}, not {last}",
    )
    report = await _verify(target)
    verdict.check(report.ok, f"the archive after shipping again fails verify: {report.problem}")


async def _verify(target: DirectoryTarget) -> Any:
    with tempfile.TemporaryDirectory():
        return await asyncio.get_running_loop().run_in_executor(None, verify, target)
