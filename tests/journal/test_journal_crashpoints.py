"""Crash points: the registry, and a simulated power loss at every journal crash point.

At each named point the hook cuts the power of a ``SimFileSystem``; the disk image that
survives (by each crash mode) must reopen without error to an unaltered prefix of what was
appended that holds every record the journal had promised durable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

import pytest

from fsseam import crashpoints
from fsseam.crashpoints import JOURNAL_CRASH_POINTS
from fsseam.simfs import CRASH_MODES, CrashMode, SimFileSystem, SimulatedCrash
from journal import Journal, JournalError, JournalOptions
from journal.segment import segment_name
from tests.journal.journal_testkit import (
    History,
    Step,
    check_prefix,
    drive,
    reopen,
)

DIRECTORY = "/var/journal"
PLAN: list[Step] = [
    ("append", 1),
    ("append", 3),
    ("snapshot", 0),
    ("append", 4),
    ("append", 2),
    ("snapshot", 0),
    ("append", 5),
    ("append", 1),
]


@pytest.fixture
def hook() -> Iterator[Callable[[Callable[[str], None] | None], None]]:
    yield crashpoints.set_hook
    crashpoints.set_hook(None)


def test_hit_without_a_hook_does_nothing() -> None:
    assert not crashpoints.installed()
    crashpoints.hit("anything")


def test_the_hook_receives_each_name(
    hook: Callable[[Callable[[str], None] | None], None],
) -> None:
    names: list[str] = []
    hook(names.append)
    assert crashpoints.installed()
    crashpoints.hit("a")
    crashpoints.hit("b")
    assert names == ["a", "b"]


def _plant_torn_tail(fs: SimFileSystem) -> None:
    last = sorted(name for name in fs.listdir(DIRECTORY) if name.startswith("segment-"))[-1]
    path = f"{DIRECTORY}/{last}"
    fs.write_bytes(path, fs.read_bytes(path) + b"\xc1JRN half a record")


def test_a_scenario_passes_every_journal_crash_point(
    hook: Callable[[Callable[[str], None] | None], None],
) -> None:
    seen: set[str] = set()
    hook(seen.add)
    fs = SimFileSystem()

    async def main() -> None:
        journal = Journal.open(DIRECTORY, JournalOptions(segment_bytes=200), fs)
        assert await drive(journal, History(), PLAN)
        await journal.close()

    asyncio.run(main())
    _plant_torn_tail(fs)
    reopen(DIRECTORY, JournalOptions(segment_bytes=200), fs)
    assert seen == set(JOURNAL_CRASH_POINTS)


def _power_cut_at(fs: SimFileSystem, point: str, occurrence: int) -> Callable[[str], None]:
    count = 0

    def cut(name: str) -> None:
        nonlocal count
        if name == point:
            count += 1
            if count == occurrence:
                fs.crash()
                raise SimulatedCrash(f"power cut at {point}")

    return cut


# Balanced appends never fsync, so they never pass "after_fsync".
POINTS_BY_DURABILITY = [
    (point, durability)
    for durability in ("strict", "balanced")
    for point in JOURNAL_CRASH_POINTS
    if not (durability == "balanced" and point == "journal.append.after_fsync")
]


@pytest.mark.parametrize("mode", CRASH_MODES)
@pytest.mark.parametrize(("point", "durability"), POINTS_BY_DURABILITY)
def test_power_cut_at_a_crash_point_keeps_a_durable_prefix(
    hook: Callable[[Callable[[str], None] | None], None],
    point: str,
    mode: CrashMode,
    durability: str,
) -> None:
    options = JournalOptions(durability=durability, segment_bytes=200)  # type: ignore[arg-type]
    fs = SimFileSystem()
    history = History()

    async def main() -> bool:
        journal = Journal.open(DIRECTORY, options, fs)
        completed = await drive(journal, history, PLAN)
        try:
            await journal.close()
        except JournalError:
            return False
        history.closed_cleanly = completed
        return completed

    if point == "journal.replay.truncate":
        asyncio.run(main())
        _plant_torn_tail(fs)
        hook(_power_cut_at(fs, point, 1))
        with pytest.raises(SimulatedCrash):
            Journal.open(DIRECTORY, options, fs)
    else:
        hook(_power_cut_at(fs, point, 2 if point.startswith("journal.append") else 1))
        assert not asyncio.run(main()), "the power cut should have stopped the scenario"
    hook(None)
    assert fs.crashed

    opened = reopen(DIRECTORY, options, fs.crash_image(mode, seed=len(point)))
    last = check_prefix(opened, history)
    assert last >= history.require_durable(durability)
    if opened.snapshot is not None or history.snapshot_returned:
        assert opened.snapshot is not None
        assert opened.snapshot.sequence >= history.snapshot_returned


def test_new_segment_is_named_by_the_first_record_it_will_hold(
    hook: Callable[[Callable[[str], None] | None], None],
) -> None:
    fs = SimFileSystem()
    names: list[list[str]] = []
    hook(lambda name: names.append(sorted(fs.listdir(DIRECTORY))) if "roll" in name else None)

    async def main() -> None:
        journal = Journal.open(DIRECTORY, JournalOptions(segment_bytes=1), fs)
        await journal.append({"type": "A"})
        await journal.append({"type": "B"})
        await journal.close()

    asyncio.run(main())
    assert names == [[segment_name(1), segment_name(2)]]


def test_the_cut_bytes_are_durable_before_the_cut() -> None:
    fs = SimFileSystem()

    async def main() -> None:
        journal = Journal.open(DIRECTORY, JournalOptions(), fs)
        assert await drive(journal, History(), [("append", 2)])
        await journal.close()

    asyncio.run(main())
    path = f"{DIRECTORY}/{segment_name(1)}"
    good = fs.read_bytes(path)
    _plant_torn_tail(fs)
    Journal.open(DIRECTORY, JournalOptions(), fs)  # cuts the torn tail; then the power fails
    image = fs.crash_image("lose_unsynced")
    assert image.read_bytes(path) == good
    assert image.read_bytes(f"{path}.broken-{len(good)}") == b"\xc1JRN half a record"


@pytest.mark.parametrize("mode", CRASH_MODES)
def test_a_crash_anywhere_in_the_cut_never_loses_the_cut_bytes(mode: CrashMode) -> None:
    fs = SimFileSystem()

    async def main() -> None:
        journal = Journal.open(DIRECTORY, JournalOptions(), fs)
        assert await drive(journal, History(), [("append", 2)])
        await journal.close()

    asyncio.run(main())
    path = f"{DIRECTORY}/{segment_name(1)}"
    good = fs.read_bytes(path)
    _plant_torn_tail(fs)
    torn = fs.read_bytes(path)
    broken = f"{path}.broken-{len(good)}"
    probe = fs.crash_image("keep_unsynced")
    Journal.open(DIRECTORY, JournalOptions(), probe)
    assert probe.operations > 10
    for k in range(probe.operations + 1):
        trial = fs.crash_image("keep_unsynced")
        trial.crash_at(k)
        with contextlib.suppress(SimulatedCrash):
            Journal.open(DIRECTORY, JournalOptions(), trial)
        image = trial.crash_image(mode, seed=k)
        kept = image.read_bytes(path)
        assert kept in (good, torn) or (kept.startswith(good) and torn.startswith(kept))
        if kept == good:
            assert image.read_bytes(broken) == torn[len(good) :]
