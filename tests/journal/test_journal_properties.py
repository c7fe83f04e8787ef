"""Hypothesis properties of recovery, on the simulated file system.

For any sequence of appends and snapshots:

- losing any subset of the unsynced writes (a crash at any operation, in every crash mode)
  reopens without error to an unaltered prefix holding every durable record;
- truncating any file at any byte, or flipping any byte, reopens to exactly the longest
  intact prefix, or raises ``JournalCorruptionError`` exactly when that prefix would drop a
  record some intact record (or snapshot) claims durable.

Plus a model-based state machine of append / snapshot / reopen / crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from fsseam.simfs import CRASH_MODES, CrashMode, SimFileSystem, SimulatedCrash
from journal import Journal, JournalCorruptionError, JournalError, JournalOptions
from journal.framing import HEADER
from journal.segment import parse_segment_name
from journal.snapshot import parse_snapshot_name
from tests.journal.journal_testkit import (
    History,
    Opened,
    Step,
    check_prefix,
    drive,
    record_offsets,
    reopen,
)

DIRECTORY = "/j"
SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

steps = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4)),
    st.just(("snapshot", 0)),
)
plans = st.lists(steps, min_size=1, max_size=10)
durabilities = st.sampled_from(["strict", "balanced"])
segment_sizes = st.sampled_from([120, 300, 1 << 20])


def build(plan: list[Step], options: JournalOptions, fs: SimFileSystem, history: History) -> None:
    """Run ``plan`` on a fresh journal in ``fs``; stop quietly at a crash."""

    async def main() -> None:
        journal = Journal.open(DIRECTORY, options, fs)
        for _ in journal.replay():
            pass
        completed = await drive(journal, history, plan)
        try:
            await journal.close()
        except JournalError:
            return
        history.closed_cleanly = completed

    asyncio.run(main())


@SETTINGS
@given(
    plan=plans,
    durability=durabilities,
    segment_bytes=segment_sizes,
    crash_after=st.integers(0, 150),
    mode=st.sampled_from(CRASH_MODES),
    seed=st.integers(0, 2**16),
)
def test_losing_unsynced_writes_keeps_every_durable_record(
    plan: list[Step],
    durability: str,
    segment_bytes: int,
    crash_after: int,
    mode: CrashMode,
    seed: int,
) -> None:
    options = JournalOptions(durability=durability, segment_bytes=segment_bytes)  # type: ignore[arg-type]
    fs = SimFileSystem()
    fs.mkdir(DIRECTORY)
    fs.fsync_dir("/")
    fs.crash_at(fs.operations + crash_after)
    history = History()
    with contextlib.suppress(SimulatedCrash):  # the crash hit Journal.open itself
        build(plan, options, fs, history)
    event(f"crashed: {fs.crashed}")
    opened = reopen(DIRECTORY, options, fs.crash_image(mode, seed))
    last = check_prefix(opened, history)
    event(f"records lost: {len(history.calls) > last}")
    assert last >= history.require_durable(durability)
    if history.snapshot_returned:
        assert opened.snapshot is not None
        assert opened.snapshot.sequence >= history.snapshot_returned


# -- damage: the oracle -------------------------------------------------------------------


@dataclass
class Expectation:
    snapshot: int
    last: int
    """The end of the longest intact prefix of the chain."""
    corrupt: bool
    """Whether that prefix drops a record claimed durable by intact data."""


def expect(original: dict[str, bytes], damaged: dict[str, bytes]) -> Expectation:
    """What a correct reader must do, from the file bytes alone (the format's spec)."""
    snapshots = {
        sequence: path
        for path in original
        if (sequence := parse_snapshot_name(os.path.basename(path))) is not None
    }
    claims = max(snapshots, default=0)  # a snapshot under its final name was durable
    intact_snapshots = [seq for seq, p in snapshots.items() if damaged[p] == original[p]]
    base = max(intact_snapshots, default=0)
    segments = sorted(
        (first, path)
        for path in original
        if (first := parse_segment_name(os.path.basename(path))) is not None
    )
    start = max((i for i, (first, _) in enumerate(segments) if first <= base + 1), default=0)
    chain: list[tuple[int, bool]] = []  # (sequence, intact) for every record in the chain
    for _, path in segments[start:]:
        before, after = original[path], damaged[path]
        for offset in record_offsets(before):
            _, _, length, sequence, durable = HEADER.unpack_from(before, offset)
            end = offset + HEADER.size + length
            intact = after[offset:end] == before[offset:end]
            chain.append((sequence, intact))
            if intact:
                claims = max(claims, durable)
    first_broken = next((sequence for sequence, intact in chain if not intact), None)
    if first_broken is None:
        last = chain[-1][0] if chain else base
        return Expectation(base, max(last, base), corrupt=False)
    return Expectation(base, max(first_broken - 1, base), corrupt=first_broken <= claims)


def damage_and_check(
    plan: list[Step],
    durability: str,
    segment_bytes: int,
    data: st.DataObject,
    damage: str,
) -> None:
    options = JournalOptions(durability=durability, segment_bytes=segment_bytes)  # type: ignore[arg-type]
    fs = SimFileSystem()
    history = History()
    build(plan, options, fs, history)
    paths = [f"{DIRECTORY}/{name}" for name in fs.listdir(DIRECTORY)]
    original = {path: fs.read_bytes(path) for path in paths}
    target = data.draw(st.sampled_from(sorted(paths)), label="file")
    content = original[target]
    if damage == "truncate":
        cut = data.draw(st.integers(0, len(content)), label="cut")
        changed = content[:cut]
    else:
        if not content:
            return
        where = data.draw(st.integers(0, len(content) - 1), label="byte")
        bit = data.draw(st.integers(0, 7), label="bit")
        changed = content[:where] + bytes([content[where] ^ (1 << bit)]) + content[where + 1 :]
    fs.write_bytes(target, changed)
    expectation = expect(original, {**original, target: changed})
    event(f"{damage} {os.path.basename(target).split('-')[0]}: corrupt={expectation.corrupt}")
    try:
        opened: Opened | None = reopen(DIRECTORY, options, fs)
    except JournalCorruptionError:
        opened = None
    if expectation.corrupt:
        assert opened is None, "damage to durable records must not pass silently"
        opened = reopen(DIRECTORY, JournalOptions(repair=True), fs)
    assert opened is not None, "a torn tail is not corruption"
    assert (opened.snapshot.sequence if opened.snapshot else 0) == expectation.snapshot
    assert check_prefix(opened, history) == expectation.last
    # Whatever was cut, the journal is healthy again: it appends and reopens cleanly.
    del history.calls[expectation.last :]
    build([("append", 1)], options, fs, history)
    assert check_prefix(reopen(DIRECTORY, options, fs), history) == expectation.last + 1


@SETTINGS
@given(plan=plans, durability=durabilities, segment_bytes=segment_sizes, data=st.data())
def test_truncating_any_file_at_any_byte(
    plan: list[Step], durability: str, segment_bytes: int, data: st.DataObject
) -> None:
    damage_and_check(plan, durability, segment_bytes, data, "truncate")


@SETTINGS
@given(plan=plans, durability=durabilities, segment_bytes=segment_sizes, data=st.data())
def test_flipping_any_bit_of_any_file(
    plan: list[Step], durability: str, segment_bytes: int, data: st.DataObject
) -> None:
    damage_and_check(plan, durability, segment_bytes, data, "flip")


# -- the model-based state machine --------------------------------------------------------


class JournalMachine(RuleBasedStateMachine):
    """Append, snapshot, reopen and crash in any order; the journal must match the model.

    The model is the list of events in call order; after a crash it is cut back to what
    survived, which must include everything the journal promised durable.
    """

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.fs = SimFileSystem()
        self.history = History()
        self.options = JournalOptions()
        self.journal: Journal | None = None

    @initialize(durability=durabilities, segment_bytes=segment_sizes)
    def start(self, durability: str, segment_bytes: int) -> None:
        self.options = JournalOptions(durability=durability, segment_bytes=segment_bytes)  # type: ignore[arg-type]
        self._open()

    def _open(self) -> None:
        journal = Journal.open(DIRECTORY, self.options, self.fs)
        opened = Opened(journal.snapshot, list(journal.replay()))
        last = check_prefix(opened, self.history)
        assert last >= self.history.require_durable(self.options.durability)
        del self.history.calls[last:]
        self.history.acknowledged = last
        self.history.snapshot_returned = min(self.history.snapshot_returned, last)
        self.history.closed_cleanly = False
        self.journal = journal

    def _run(self, plan: list[Step]) -> bool:
        assert self.journal is not None
        return self.loop.run_until_complete(drive(self.journal, self.history, plan))

    @rule(count=st.integers(1, 8))
    def append(self, count: int) -> None:
        assert self._run([("append", count)])

    @rule()
    def snapshot(self) -> None:
        assert self._run([("snapshot", 0)])

    @rule()
    def reopen(self) -> None:
        assert self.journal is not None
        self.loop.run_until_complete(self.journal.close())
        self.history.closed_cleanly = True
        self._open()
        assert self.journal.stats().last_sequence == len(self.history.calls)

    @rule(
        after=st.integers(0, 40),
        count=st.integers(1, 8),
        mode=st.sampled_from(CRASH_MODES),
        seed=st.integers(0, 1000),
    )
    def crash(self, after: int, count: int, mode: CrashMode, seed: int) -> None:
        assert self.journal is not None
        self.fs.crash_at(self.fs.operations + after)
        self._run([("append", count), ("snapshot", 0), ("append", count)])
        with contextlib.suppress(JournalError):
            self.loop.run_until_complete(self.journal.close())
        self.fs = self.fs.crash_image(mode, seed)
        self._open()

    @precondition(lambda self: self.journal is not None)
    @invariant()
    def acknowledged_matches_the_journal(self) -> None:
        assert self.journal is not None
        assert self.journal.stats().last_sequence == self.history.acknowledged

    def teardown(self) -> None:
        if self.journal is not None:
            with contextlib.suppress(JournalError):
                self.loop.run_until_complete(self.journal.close())
        self.loop.close()


JournalMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_journal_state_machine = JournalMachine.TestCase
