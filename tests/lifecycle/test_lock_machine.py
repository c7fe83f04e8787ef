"""A Hypothesis state machine over a real engine: random writes, deletes (of keys and of
versions), retention and legal hold changes, lifecycle passes with tiny days, forced bucket
deletions, clock steps forward and back, and restarts (replay); a locked version is never
gone while its lock holds.

It drives the operations the HTTP handlers call (``service.ops``, ``service.upkeep``), so
every path that could remove a version meets the one rule (``service.meta.lock_policy``).
The clock moves with the test-only offset (``service.common.timefmt.set_clock_offset``);
"now" for the model is the newest time the state applied, which the clock rule also uses.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from service.common.api_errors import ApiError
from service.common.timefmt import now_ms, set_clock_offset
from service.config import Config
from service.engine.core import Engine
from service.engine.journaled import journaled_engine
from service.meta import ObjectVersion
from service.meta.lock_policy import COMPLIANCE, GOVERNANCE, is_locked
from service.multipart.uploads import Uploads
from service.ops.buckets import create_bucket, delete_bucket
from service.ops.lifecycle_rules import parse_rules, set_rules
from service.ops.object_lock import set_legal_hold, set_retention
from service.ops.objects import PutIntent, delete_object, store_small_object
from service.upkeep.lifecycle import LifecycleRunner

BUCKET = "locks"
KEYS = ("a", "b")
MINUTE = 60.0
TINY_DAYS = 1e-5
"""0.864 s: every version is due for the lifecycle, locked or not."""


class EngineLockMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="lock-machine-")
        self.config = Config(data_dir=self.directory, durability="strict", workers=1)
        self.loop = asyncio.new_event_loop()
        self.offset = 0.0
        set_clock_offset(0)
        self.engine = self.run(self.start())
        self.known: dict[str, ObjectVersion] = {}
        self.run(self.make_bucket())

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    async def start(self) -> Engine:
        engine, _ = journaled_engine(self.config)
        await engine.start()
        return engine

    async def make_bucket(self) -> None:
        await create_bucket(self.engine, "u_1", {"name": BUCKET, "object_lock_enabled": True})
        rule = {
            "id": "all",
            "expire_after_days": TINY_DAYS,
            "noncurrent_expire_after_days": TINY_DAYS,
        }
        await set_rules(self.engine, BUCKET, parse_rules({"rules": [rule]}))

    def versions(self) -> list[ObjectVersion]:
        state = self.engine.state
        return [v for key in KEYS for v in state.object_versions(BUCKET, key)]

    def note(self) -> None:
        self.known.update({v.version_id: v for v in self.versions() if v.version_id})

    def attempt(self, coroutine: Any) -> None:
        """Run an operation; the contract's refusals are expected outcomes here."""
        locked_before = {
            v.version_id
            for v in self.versions()
            if is_locked(v, now_ms(), trusted=now_ms() >= self.engine.state.locks.latest_at)
        }
        try:
            self.run(coroutine)
        except ApiError as error:
            assert error.status < 500, error
        present = {v.version_id for v in self.versions()}
        gone = locked_before - present
        assert not gone, f"locked versions {gone} were removed"
        self.note()

    def pick(self, data: st.DataObject, *, markers: bool = False) -> ObjectVersion | None:
        versions = [v for v in self.versions() if markers or not v.is_delete_marker]
        return data.draw(st.sampled_from(versions)) if versions else None

    @rule(key=st.sampled_from(KEYS), size=st.integers(min_value=0, max_value=64))
    def put(self, key: str, size: int) -> None:
        intent = PutIntent(bucket=BUCKET, key=key, content_length=size)
        self.attempt(store_small_object(self.engine, intent, b"x" * size))

    @rule(key=st.sampled_from(KEYS))
    def delete_key(self, key: str) -> None:
        self.attempt(delete_object(self.engine, BUCKET, key, None))

    @rule(data=st.data())
    def delete_version(self, data: st.DataObject) -> None:
        version = self.pick(data, markers=True)
        if version is not None and version.version_id is not None:
            self.attempt(delete_object(self.engine, BUCKET, version.key, version.version_id))

    @rule(
        data=st.data(),
        mode=st.sampled_from((GOVERNANCE, COMPLIANCE, None)),
        minutes=st.integers(min_value=1, max_value=60),
        bypass=st.booleans(),
    )
    def retention(self, data: st.DataObject, mode: str | None, minutes: int, bypass: bool) -> None:
        version = self.pick(data)
        if version is None:
            return
        until = None if mode is None else now_ms() + int(minutes * MINUTE * 1000)
        self.attempt(set_retention(self.engine, version, mode, until, bypass=bypass))

    @rule(data=st.data(), on=st.booleans())
    def legal_hold(self, data: st.DataObject, on: bool) -> None:
        version = self.pick(data)
        if version is not None:
            self.attempt(set_legal_hold(self.engine, version, on))

    @rule()
    def lifecycle_pass(self) -> None:
        self.attempt(
            LifecycleRunner(Uploads(self.engine, shared=False, keeps_files=True), 0.0).run_pass()
        )

    @rule()
    def force_delete_bucket(self) -> None:
        self.attempt(delete_bucket(self.engine, BUCKET, force=True))
        if self.engine.state.get_bucket(BUCKET) is None:
            self.known.clear()  # nothing locked was there (checked above)
            self.run(self.make_bucket())

    @rule(minutes=st.integers(min_value=-90, max_value=90))
    def clock_step(self, minutes: int) -> None:
        """The server's clock jumps (a restart with another clock, an NTP step)."""
        self.offset += minutes * MINUTE
        set_clock_offset(self.offset)

    @rule()
    def restart(self) -> None:
        """A clean stop and a start: replay must reach the same state."""
        before = self.engine.state.freeze()
        self.run(self.engine.stop())
        self.engine = self.run(self.start())
        assert self.engine.state.freeze() == before

    @invariant()
    def nothing_locked_is_gone(self) -> None:
        present = {v.version_id for v in self.versions()}
        newest = self.engine.state.locks.latest_at
        for version_id, version in self.known.items():
            held = version.legal_hold or (
                version.retain_until is not None and version.retain_until > newest
            )
            assert not held or version_id in present, f"locked version {version_id} is gone"

    def teardown(self) -> None:
        try:
            self.run(self.engine.stop())
        finally:
            self.loop.close()
            set_clock_offset(0)
            shutil.rmtree(self.directory, ignore_errors=True)


TestEngineLockMachine = EngineLockMachine.TestCase
TestEngineLockMachine.settings = settings(max_examples=12, stateful_step_count=30, deadline=None)
