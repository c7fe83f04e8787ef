"""Object lock in ``MetaState.apply``: retention, legal hold, the clock rule, every removal.

The rules are ``service.meta.lock_policy``'s; these tests drive them through events, as the
journal does at run time and at replay, and end with a Hypothesis state machine: random
writes, deletes, lock changes and clock steps (forward and back), after which no version
that was locked at an event's time is ever gone.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from service.meta import MetaState, ObjectVersion, decode_snapshot, encode_snapshot, records
from service.meta.lock_policy import COMPLIANCE, DAY_MS, GOVERNANCE, is_locked, retention_holds
from tests.meta.factory import Factory, applied

MINUTE = 60_000


@pytest.fixture
def f() -> Factory:
    return Factory()


def locked_state(f: Factory, **default: object) -> MetaState:
    state = MetaState()
    applied(state, f.lock_bucket(**default))  # type: ignore[arg-type]
    return state


def put(state: MetaState, f: Factory, key: str = "k") -> ObjectVersion:
    version = applied(state, f.put(key, bucket="lk")).value
    assert isinstance(version, ObjectVersion)
    assert version.version_id is not None
    return version


def refused(state: MetaState, event: records.Event, code: str = "ObjectLocked") -> str:
    before = state.freeze()
    outcome = state.apply(event)
    assert (outcome.ok, outcome.error_code) == (False, code), outcome
    assert state.freeze() == before
    return outcome.error_message or ""


# -- buckets ---------------------------------------------------------------------------------


def test_a_lock_bucket_keeps_versioning_on_for_good(f: Factory) -> None:
    state = locked_state(f)
    bucket = state.get_bucket("lk")
    assert bucket is not None and bucket.object_lock_enabled and bucket.versioning_enabled
    refused(state, f.update("lk", versioning_enabled=False), "InvalidState")


def test_default_retention_is_stamped_on_every_new_version(f: Factory) -> None:
    state = locked_state(f, mode=COMPLIANCE, days=2)
    event = f.put("k", bucket="lk")
    version = applied(state, event).value
    assert isinstance(version, ObjectVersion)
    assert (version.retention_mode, version.retain_until) == (COMPLIANCE, event["at"] + 2 * DAY_MS)
    applied(state, f.update("lk", default_retention_mode=None, default_retention_days=None))
    later = applied(state, f.put("k", bucket="lk")).value
    assert isinstance(later, ObjectVersion) and later.retention_mode is None


def test_a_default_retention_needs_a_lock_bucket(f: Factory) -> None:
    state = MetaState()
    applied(state, f.bucket("b", versioning=True))
    refused(
        state,
        f.update("b", default_retention_mode=GOVERNANCE, default_retention_days=1),
        "InvalidState",
    )


def test_retention_and_legal_hold_need_a_lock_bucket(f: Factory) -> None:
    state = MetaState()
    applied(state, f.bucket("b", versioning=True))
    version = applied(state, f.put("k")).value
    assert isinstance(version, ObjectVersion) and version.version_id is not None
    refused(
        state,
        f.retention("k", version.version_id, GOVERNANCE, f.now + MINUTE, bucket="b"),
        "InvalidState",
    )
    refused(state, f.legal_hold("k", version.version_id, True, bucket="b"), "InvalidState")


# -- removals ----------------------------------------------------------------------------------


def test_a_retained_version_cannot_be_deleted_until_its_retention_ends(f: Factory) -> None:
    state = locked_state(f)
    version = put(state, f)
    assert version.version_id is not None
    until = f.now + MINUTE
    applied(state, f.retention("k", version.version_id, GOVERNANCE, until))
    message = refused(state, f.delete("k", version.version_id, bucket="lk"))
    assert "governance retention until" in message
    # A delete without a version id adds a marker, as usual.
    applied(state, f.delete("k", bucket="lk"))
    # At its end it goes.
    applied(state, f.delete("k", version.version_id, bucket="lk", at=until))
    assert state.head_object("lk", "k", version.version_id) is None


def test_a_legal_hold_lasts_until_turned_off(f: Factory) -> None:
    state = locked_state(f)
    version = put(state, f)
    assert version.version_id is not None
    applied(state, f.legal_hold("k", version.version_id, True))
    f.now += 365 * DAY_MS
    assert "legal hold" in refused(state, f.delete("k", version.version_id, bucket="lk"))
    applied(state, f.legal_hold("k", version.version_id, False))
    applied(state, f.delete("k", version.version_id, bucket="lk"))


def test_a_forced_bucket_deletion_is_refused_while_a_version_is_locked(f: Factory) -> None:
    state = locked_state(f)
    version = put(state, f)
    put(state, f, "other")
    assert version.version_id is not None
    applied(state, f.legal_hold("k", version.version_id, True))
    assert "locked" in refused(state, f.drop_bucket("lk", force=True), "BucketNotEmpty")
    applied(state, f.legal_hold("k", version.version_id, False))
    applied(state, f.drop_bucket("lk", force=True))


def test_a_lifecycle_delete_of_a_locked_version_is_refused(f: Factory) -> None:
    state = locked_state(f)
    old = put(state, f)
    put(state, f)
    assert old.version_id is not None
    applied(state, f.retention("k", old.version_id, COMPLIANCE, f.now + MINUTE))
    judged = {
        "kind": "noncurrent",
        "version_id": old.version_id,
        "payload_id": old.payload_id,
        "updated_at": old.updated_at,
        "cutoff": f.now + 1,
    }
    event = records.object_deleted(
        bucket="lk",
        key="k",
        version_id=old.version_id,
        version_token="x",
        at=f.at(),
        judged=judged,
    )
    refused(state, event)


# -- retention changes ---------------------------------------------------------------------------


def test_compliance_can_be_lengthened_but_never_shortened_or_removed(f: Factory) -> None:
    state = locked_state(f)
    version = put(state, f)
    vid = version.version_id
    assert vid is not None
    until = f.now + 10 * MINUTE
    applied(state, f.retention("k", vid, COMPLIANCE, until))
    for mode, end in ((COMPLIANCE, until - 1), (GOVERNANCE, until + MINUTE), (None, None)):
        message = refused(state, f.retention("k", vid, mode, end, bypass=True))
        assert "compliance" in message
    applied(state, f.retention("k", vid, COMPLIANCE, until + MINUTE))


def test_governance_gives_way_only_to_a_bypass(f: Factory) -> None:
    state = locked_state(f)
    version = put(state, f)
    vid = version.version_id
    assert vid is not None
    until = f.now + 10 * MINUTE
    applied(state, f.retention("k", vid, GOVERNANCE, until))
    assert "X-Bypass-Governance-Retention" in refused(state, f.retention("k", vid, None, None))
    refused(state, f.retention("k", vid, GOVERNANCE, until - 1))
    applied(state, f.retention("k", vid, GOVERNANCE, until + MINUTE))  # lengthen: anyone
    applied(state, f.retention("k", vid, None, None, bypass=True))
    applied(state, f.delete("k", vid, bucket="lk"))


def test_retain_until_must_lie_in_the_future(f: Factory) -> None:
    state = locked_state(f)
    version = put(state, f)
    assert version.version_id is not None
    refused(state, f.retention("k", version.version_id, GOVERNANCE, f.now), "InvalidArgument")


def test_a_delete_marker_takes_no_lock(f: Factory) -> None:
    state = locked_state(f)
    put(state, f)
    marker = applied(state, f.delete("k", bucket="lk")).value
    assert isinstance(marker, ObjectVersion) and marker.version_id is not None
    refused(state, f.legal_hold("k", marker.version_id, True), "MethodNotAllowed")


# -- the clock rule ----------------------------------------------------------------------------


def test_a_clock_behind_the_newest_time_unlocks_nothing_until_it_caught_up(f: Factory) -> None:
    state = locked_state(f)
    version = put(state, f)
    vid = version.version_id
    assert vid is not None
    until = f.now + MINUTE
    applied(state, f.retention("k", vid, GOVERNANCE, until))
    applied(
        state,
        f.put(
            "later",
            bucket="lk",
        )
        | {"at": until + 10 * MINUTE},
    )
    behind = until + 5 * MINUTE  # past the retention, behind the newest journaled time
    assert "behind" in refused(state, f.delete("k", vid, bucket="lk", at=behind))
    refused(state, f.retention("k", vid, None, None, at=behind))
    applied(state, f.delete("k", vid, bucket="lk", at=until + 10 * MINUTE))


def test_the_newest_time_survives_a_snapshot(f: Factory) -> None:
    state = locked_state(f)
    applied(state, f.put("k", bucket="lk") | {"at": 5_000_000_000_000})
    assert decode_snapshot(encode_snapshot(state)).locks.latest_at == 5_000_000_000_000


def test_locked_versions_survive_a_snapshot(f: Factory) -> None:
    state = locked_state(f, mode=GOVERNANCE, days=1)
    version = put(state, f)
    assert version.version_id is not None
    applied(state, f.legal_hold("k", version.version_id, True))
    again = decode_snapshot(encode_snapshot(state))
    assert again == state
    restored = again.head_object("lk", "k")
    assert restored is not None and restored.legal_hold
    assert restored.retention_mode == GOVERNANCE
    bucket = again.get_bucket("lk")
    assert bucket is not None and bucket.default_retention_days == 1.0


# -- the state machine ---------------------------------------------------------------------------

KEYS = ("a", "b")


class LockMachine(RuleBasedStateMachine):
    """Random operations, lock changes and clock steps on one lock bucket; nothing locked
    at an event's time is ever gone after it."""

    def __init__(self) -> None:
        super().__init__()
        self.f = Factory()
        self.state = MetaState()
        applied(self.state, self.f.lock_bucket())
        self.clock = self.f.now
        self.known: dict[str, ObjectVersion] = {}
        """Every version ever stored, by id (as last seen)."""

    def at(self) -> int:
        self.clock += 1
        return self.clock

    def versions(self) -> list[ObjectVersion]:
        return [v for key in KEYS for v in self.state.object_versions("lk", key)]

    def apply(self, event: records.Event) -> None:
        at = event["at"]
        trusted = at >= self.state.locks.latest_at
        before = {v.version_id: v for v in self.versions()}
        locked = {vid for vid, v in before.items() if is_locked(v, at, trusted=trusted)}
        self.state.apply(event)
        after = {v.version_id: v for v in self.versions()}
        gone = locked - set(after)
        assert not gone, f"locked versions {gone} removed by {event}"
        for vid, old in before.items():
            new = after.get(vid)
            if (
                new is not None
                and old.retention_mode == COMPLIANCE
                and retention_holds(old, at, trusted=trusted)
            ):
                assert new.retention_mode == COMPLIANCE, "an active compliance was weakened"
                assert (new.retain_until or 0) >= (old.retain_until or 0), "compliance shortened"
        self.known.update({vid: v for vid, v in after.items() if vid is not None})

    def pick(self, data: st.DataObject) -> ObjectVersion | None:
        versions = [v for v in self.versions() if not v.is_delete_marker]
        return data.draw(st.sampled_from(versions)) if versions else None

    @rule(key=st.sampled_from(KEYS))
    def write(self, key: str) -> None:
        self.apply(self.f.put(key, bucket="lk") | {"at": self.at()})

    @rule(key=st.sampled_from(KEYS))
    def delete_key(self, key: str) -> None:
        self.apply(self.f.delete(key, bucket="lk", at=self.at()))

    @rule(data=st.data())
    def delete_version(self, data: st.DataObject) -> None:
        versions = self.versions()
        if versions:
            version = data.draw(st.sampled_from(versions))
            assert version.version_id is not None
            self.apply(self.f.delete(version.key, version.version_id, bucket="lk", at=self.at()))

    @rule(
        data=st.data(),
        mode=st.sampled_from((GOVERNANCE, COMPLIANCE, None)),
        minutes=st.integers(min_value=1, max_value=30),
        bypass=st.booleans(),
    )
    def set_retention(
        self, data: st.DataObject, mode: str | None, minutes: int, bypass: bool
    ) -> None:
        version = self.pick(data)
        if version is None or version.version_id is None:
            return
        at = self.at()
        until = None if mode is None else at + minutes * MINUTE
        self.apply(
            self.f.retention(version.key, version.version_id, mode, until, bypass=bypass, at=at)
        )

    @rule(data=st.data(), on=st.booleans())
    def legal_hold(self, data: st.DataObject, on: bool) -> None:
        version = self.pick(data)
        if version is not None and version.version_id is not None:
            self.apply(self.f.legal_hold(version.key, version.version_id, on, at=self.at()))

    @rule(minutes=st.integers(min_value=-40, max_value=40))
    def clock_step(self, minutes: int) -> None:
        """The server's clock jumps (a restart with another clock, an NTP step)."""
        self.clock += minutes * MINUTE

    @rule()
    def force_delete_bucket(self) -> None:
        event = self.f.drop_bucket("lk", force=True) | {"at": self.at()}
        at, trusted = event["at"], event["at"] >= self.state.locks.latest_at
        any_locked = any(is_locked(v, at, trusted=trusted) for v in self.versions())
        outcome = self.state.apply(event)
        assert outcome.ok != any_locked, (outcome, any_locked)
        if outcome.ok:
            applied(self.state, self.f.lock_bucket() | {"at": self.at()})

    @rule()
    def snapshot_round_trip(self) -> None:
        again = decode_snapshot(encode_snapshot(self.state))
        assert again == self.state
        assert again.locks.latest_at == self.state.locks.latest_at

    @invariant()
    def nothing_locked_is_gone(self) -> None:
        """A version last seen under legal hold, or under a retention that lasts past the
        newest time applied, is still there."""
        present = {v.version_id for v in self.versions()}
        newest = self.state.locks.latest_at
        for vid, version in self.known.items():
            held = version.legal_hold or (
                version.retain_until is not None and version.retain_until > newest
            )
            assert not held or vid in present, f"locked version {vid} is gone"


TestLockMachine = LockMachine.TestCase
TestLockMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
