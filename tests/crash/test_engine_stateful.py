"""A Hypothesis state machine over the real engine on a simulated disk.

Where the crash matrix walks every file operation of one operation at a time, this machine
draws whole histories: puts, overwrites, gets, deletes, multipart steps, GC, staging sweeps,
snapshots, the clock moving on, faults armed at a later file operation (a power cut, EIO or
ENOSPC, once or for good) and power cuts followed by recovery (sometimes crashing again
during the recovery). The model is ``tests.crash.model.Ledger``: the states each key and
upload may be in, given what every operation was answered.

Checked after every step: the live engine's keys and uploads are in allowed states, and no
success follows a journal fault. Checked after every recovery: the log is a gap-free prefix
holding everything durable, every key and upload is in an allowed state (acknowledged work
survives in strict mode and on a disk that kept every write), every version serves exactly
its bytes, and after the TTLs and one GC pass the payload files are exactly the referenced
ones with no staging left.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fsseam import crashpoints
from fsseam.simfs import CRASH_MODES, CrashMode, Fault, FaultKind, SimulatedCrash
from journal.model import Durability
from tests.crash.checkkit import (
    check_bytes,
    check_files_after_gc,
    check_journal,
    check_state,
    observe_upload,
)
from tests.crash.enginekit import SimMachine
from tests.crash.model import sha256, visible
from tests.crash.replay_controls import CrashPoints, seeded_names

BUCKETS = {"plain": False, "versioned": True}
KEYS = ("a", "b", "dir/c")
bodies = st.binary(min_size=0, max_size=600)
buckets = st.sampled_from(sorted(BUCKETS))
keys = st.sampled_from(KEYS)
FAULT_KINDS: tuple[FaultKind, ...] = ("crash", "eio", "enospc")


class EngineMachine(RuleBasedStateMachine):
    """One simulated computer; subclasses choose the durability mode."""

    durability: Durability = "strict"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.names = seeded_names(f"engine-stateful/{self.durability}")
        self.names.__enter__()
        self.points = CrashPoints()
        crashpoints.set_hook(self.points)
        self.machine = SimMachine(self.durability)
        self.faulted = False
        """A fault fired since the last recovery (a failed fsync may have dropped pages)."""
        self.uploads: list[str] = []
        self.recoveries = 0

    def run(self, call: Any) -> Any:
        return self.loop.run_until_complete(call)

    @initialize()
    def boot(self) -> None:
        self.run(self.machine.boot())
        for name, versioned in BUCKETS.items():
            assert self.run(self.machine.create_bucket(name, versioned=versioned)).ok

    def teardown(self) -> None:
        with contextlib.suppress(Exception):
            self.run(self.machine.power_cut())
        crashpoints.set_hook(None)
        self.names.__exit__(None, None, None)
        self.loop.close()

    @property
    def powered(self) -> bool:
        return self.machine.engine is not None and not self.machine.fs.crashed

    # -- buckets ------------------------------------------------------------------------

    @rule(bucket=buckets)
    def create_bucket(self, bucket: str) -> None:
        self.run(self.machine.create_bucket(bucket, versioned=BUCKETS[bucket]))

    @rule(bucket=buckets)
    def delete_bucket(self, bucket: str) -> None:
        """Delete with force: every key and upload of the bucket goes with it."""
        self.run(self.machine.delete_bucket(bucket))

    # -- objects ------------------------------------------------------------------------

    @rule(bucket=buckets, key=keys, data=bodies, chunks=st.integers(1, 4))
    def put(self, bucket: str, key: str, data: bytes, chunks: int) -> None:
        self.run(self.machine.put(bucket, key, data, chunks=chunks))

    @rule(bucket=buckets, key=keys)
    def delete(self, bucket: str, key: str) -> None:
        self.run(self.machine.delete(bucket, key))

    @precondition(lambda self: self.powered)
    @rule(bucket=buckets, key=keys)
    def get(self, bucket: str, key: str) -> None:
        """A 200 serves the newest visible version of some allowed state; a 404 means an
        allowed state has none."""
        result = self.run(self.machine.get(bucket, key))
        if self.machine.fs.crashed:
            return  # the power went during the read
        ledger = self.machine.ledger
        allowed = ledger.key(bucket, key).allowed(firm=True)
        if result.code == "NoSuchBucket":
            assert False in ledger.buckets[bucket].allowed(firm=True), f"{bucket} lost"
        elif result.ok:
            latest = {state[-1] for state in allowed if visible(state)}
            assert sha256(result.value) in latest, f"GET {bucket}/{key} served other bytes"
        elif result.code == "NoSuchKey":
            assert any(not visible(state) for state in allowed), f"{bucket}/{key} lost"
        else:
            # An injected read error is a 500; so is a payload quarantined after a power
            # cut in balanced mode. Nothing else may fail a read.
            excused = self.faulted or self.durability == "balanced"
            assert excused and result.code == "InternalError", result

    # -- multipart ----------------------------------------------------------------------

    @rule(bucket=buckets, key=keys)
    def start_upload(self, bucket: str, key: str) -> None:
        result = self.run(self.machine.start_upload(bucket, key))
        if result.ok:
            self.uploads.append(result.value.upload_id)

    @precondition(lambda self: self.uploads)
    @rule(data=st.data(), number=st.integers(1, 3), body=bodies)
    def put_part(self, data: st.DataObject, number: int, body: bytes) -> None:
        upload_id = data.draw(st.sampled_from(self.uploads))
        self.run(self.machine.put_part(upload_id, number, body))

    @precondition(lambda self: self.uploads and self.powered)
    @rule(data=st.data())
    def complete_upload(self, data: st.DataObject) -> None:
        """Complete with a drawn subset of the parts the engine holds, in order."""
        upload_id = data.draw(st.sampled_from(self.uploads))
        stored = observe_upload(self.machine.running, upload_id)
        if not stored:
            return
        chosen = data.draw(st.lists(st.sampled_from(sorted(stored)), min_size=1, unique=True))
        self.run(self.machine.complete_upload(upload_id, sorted(chosen)))

    @precondition(lambda self: self.uploads)
    @rule(data=st.data())
    def abort_upload(self, data: st.DataObject) -> None:
        self.run(self.machine.abort_upload(data.draw(st.sampled_from(self.uploads))))

    # -- background work and time -------------------------------------------------------

    @precondition(lambda self: self.powered)
    @rule()
    def snapshot(self) -> None:
        self.run(self.machine.snapshot())

    @precondition(lambda self: self.powered)
    @rule()
    def collect_garbage(self) -> None:
        self.run(self.machine.collect_garbage())

    @precondition(lambda self: self.powered)
    @rule()
    def sweep_staging(self) -> None:
        self.run(self.machine.sweep_staging())

    @rule(seconds=st.sampled_from([1.0, 31.0, 61.0, 3601.0]))
    def advance_clock(self, seconds: float) -> None:
        self.machine.clock.advance(seconds)

    # -- faults and power cuts ----------------------------------------------------------

    @precondition(lambda self: self.powered)
    @rule(
        after=st.integers(0, 40),
        kind=st.sampled_from(FAULT_KINDS),
        persistent=st.booleans(),
    )
    def arm_fault(self, after: int, kind: FaultKind, persistent: bool) -> None:
        """Make a later file operation crash or fail (EIO/ENOSPC), once or for good."""
        fs = self.machine.fs
        fs.inject(Fault(fs.operations + after, kind, persistent=persistent and kind != "crash"))
        self.faulted = True

    @rule(
        mode=st.sampled_from(CRASH_MODES),
        seed=st.integers(0, 2**30),
        again=st.booleans(),
        files=st.booleans(),
    )
    def crash_and_recover(self, mode: CrashMode, seed: int, again: bool, files: bool) -> None:
        self.run(self._crash_and_recover(mode, seed, again, files))

    async def _crash_and_recover(
        self, mode: CrashMode, seed: int, again: bool, files: bool
    ) -> None:
        machine = self.machine
        await machine.power_cut()
        image = machine.image(mode, seed)
        firm = self.durability == "strict" or (mode == "keep_unsynced" and not self.faulted)
        if again:  # the power goes again while the recovery runs
            first = machine.successor(image)
            image.crash_at(image.operations + seed % 60)
            with contextlib.suppress(SimulatedCrash):
                await first.boot()
            await first.power_cut()
            machine, image = first, image.crash_image(mode, seed + 1)
        verdict = await check_journal(machine, image, firm=firm)
        successor = machine.successor(image)
        await successor.boot()
        verdict.problems += check_state(successor, firm=firm).problems
        await check_bytes(successor, verdict)
        if files:
            await check_files_after_gc(successor, verdict)
        assert verdict.problems == [], "\n".join(verdict.problems)
        self.machine = successor
        self.faulted = False
        self.recoveries += 1

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def live_state_is_allowed(self) -> None:
        if self.powered:
            problems = check_state(self.machine, firm=True, settle=False).problems
            assert problems == [], "\n".join(problems)

    @invariant()
    def no_success_after_a_journal_fault(self) -> None:
        assert self.machine.success_after_failure == []


class StrictEngineMachine(EngineMachine):
    durability = "strict"


class BalancedEngineMachine(EngineMachine):
    durability = "balanced"


SETTINGS = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

TestStrictEngine = StrictEngineMachine.TestCase
TestStrictEngine.settings = SETTINGS
TestBalancedEngine = BalancedEngineMachine.TestCase
TestBalancedEngine.settings = SETTINGS
