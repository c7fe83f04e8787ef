"""Login throttling with an injected clock: lockouts, their growth, forgetting, memory bound."""

from __future__ import annotations

import pytest

from service.auth.throttle import LoginThrottle, ThrottleRule

T0 = 1_000_000.0
RULE = ThrottleRule(max_failures=5, window=900.0, base_lockout=1.0, max_lockout=60.0)
WIDE = ThrottleRule(max_failures=1000)
"""An address rule that stays out of the way of username tests."""


def fail(throttle: LoginThrottle, times: int, now: float, user: str = "alice") -> float:
    retry_after = 0.0
    for _ in range(times):
        retry_after = throttle.record_failure(user, "10.0.0.1", now)
    return retry_after


def test_first_failures_below_the_threshold_do_not_lock() -> None:
    throttle = LoginThrottle(username_rule=RULE, address_rule=WIDE)
    assert fail(throttle, 4, T0) == 0.0
    assert throttle.check("alice", "10.0.0.1", T0) == 0.0


def test_reaching_the_threshold_locks_for_the_base_lockout() -> None:
    throttle = LoginThrottle(username_rule=RULE, address_rule=WIDE)
    fail(throttle, 4, T0)
    assert throttle.record_failure("alice", "10.0.0.1", T0) == 1.0
    assert throttle.check("alice", "10.0.0.2", T0 + 0.25) == 0.75
    assert throttle.check("alice", "10.0.0.1", T0 + 1.0) == 0.0


def test_each_further_failure_doubles_the_lockout_up_to_the_cap() -> None:
    throttle = LoginThrottle(username_rule=RULE, address_rule=WIDE)
    now = T0
    fail(throttle, 4, now)
    lockouts = []
    for _ in range(9):
        lockout = throttle.record_failure("alice", "10.0.0.1", now)
        lockouts.append(lockout)
        now += lockout  # the caller waits exactly as long as told
    assert lockouts == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]


def test_lockout_applies_to_the_username_from_any_address() -> None:
    throttle = LoginThrottle(username_rule=RULE, address_rule=WIDE)
    fail(throttle, 5, T0)
    assert throttle.check("alice", "192.0.2.9", T0) == 1.0
    assert throttle.check("bob", "192.0.2.9", T0) == 0.0


def test_username_throttle_ignores_case() -> None:
    throttle = LoginThrottle(username_rule=RULE, address_rule=WIDE)
    fail(throttle, 5, T0, user="Alice")
    assert throttle.check("alice", "10.0.0.1", T0) == 1.0
    assert throttle.check("ALICE", "10.0.0.1", T0) == 1.0


def test_success_clears_the_username_but_not_the_address() -> None:
    address_rule = ThrottleRule(max_failures=6, base_lockout=5.0)
    throttle = LoginThrottle(username_rule=RULE, address_rule=address_rule)
    fail(throttle, 5, T0)
    throttle.record_success("alice")
    assert throttle.check("alice", "10.0.0.9", T0) == 0.0
    # The address kept its five failures: one more locks it, for any username.
    assert throttle.record_failure("mallory", "10.0.0.1", T0) == 5.0
    assert throttle.check("carol", "10.0.0.1", T0) == 5.0


def test_an_address_spraying_many_usernames_gets_locked() -> None:
    throttle = LoginThrottle()  # defaults: 5 per username, 20 per address
    for index in range(19):
        assert throttle.record_failure(f"user{index}", "203.0.113.7", T0) == 0.0
    assert throttle.record_failure("user19", "203.0.113.7", T0) == 1.0
    assert throttle.check("anyone", "203.0.113.7", T0) == 1.0
    assert throttle.check("anyone", "203.0.113.8", T0) == 0.0


def test_failures_are_forgotten_after_a_quiet_window() -> None:
    throttle = LoginThrottle(username_rule=RULE, address_rule=WIDE)
    fail(throttle, 4, T0)
    assert throttle.record_failure("alice", "10.0.0.1", T0 + 899.0) == 1.0
    fail(throttle, 4, T0 + 2000.0)
    assert throttle.record_failure("alice", "10.0.0.1", T0 + 3000.0) == 0.0


def test_quiet_window_counts_from_the_end_of_the_lockout() -> None:
    rule = ThrottleRule(max_failures=1, window=100.0, base_lockout=50.0, max_lockout=50.0)
    throttle = LoginThrottle(username_rule=rule, address_rule=WIDE)
    assert throttle.record_failure("alice", "10.0.0.1", T0) == 50.0
    # 120 s after the failure but only 70 s after the lockout ended: still remembered.
    assert throttle.record_failure("alice", "10.0.0.1", T0 + 120.0) == 50.0


def test_memory_stays_bounded_under_a_username_spray() -> None:
    throttle = LoginThrottle(max_entries=100)
    for index in range(5000):
        throttle.record_failure(f"user{index}", f"198.51.100.{index % 250}", T0 + index * 0.001)
    usernames, addresses = throttle.tracked
    assert usernames <= 100
    assert addresses <= 100


def test_the_most_recently_failed_entries_survive_eviction() -> None:
    throttle = LoginThrottle(username_rule=RULE, address_rule=WIDE, max_entries=10)
    for index in range(20):
        throttle.record_failure(f"spray{index}", "10.0.0.1", T0)
    fail(throttle, 5, T0, user="victim")
    assert throttle.check("victim", "10.0.0.2", T0) == 1.0
    assert throttle.tracked[0] == 10


def test_forgotten_entries_are_dropped_as_new_failures_arrive() -> None:
    throttle = LoginThrottle(username_rule=RULE, address_rule=RULE)
    for index in range(50):
        throttle.record_failure(f"user{index}", f"10.0.1.{index}", T0)
    assert throttle.tracked == (50, 50)
    throttle.record_failure("late", "10.0.2.1", T0 + RULE.window + 1)
    assert throttle.tracked == (1, 1)


def test_a_rule_locks_exponentially_from_its_threshold() -> None:
    rule = ThrottleRule(max_failures=3, base_lockout=2.0, max_lockout=100.0)
    assert [rule.lockout_after(n) for n in (1, 2, 3, 4, 5, 10, 10_000)] == [
        0.0,
        0.0,
        2.0,
        4.0,
        8.0,
        100.0,
        100.0,
    ]


def test_max_entries_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LoginThrottle(max_entries=0)
