"""Unit tests of ``service.limits.upload_slots``: per-user and total caps, stall and rate.

The waiting and its fairness are ``service.limits.fair_slots``'s (``tests/test_fair_slots.py``);
here a wait of 0 s shows which cap refuses.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from service.limits.fair_slots import SlotsFull
from service.limits.upload_slots import UploadSlots


@dataclass(eq=False)
class Holder:
    request_id: str
    closed: bool = field(default=False)

    def close_connection(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def slots(clock: Clock, **overrides: int) -> UploadSlots:
    settings = {"capacity": 4, "per_user": 2, "min_body_rate": 100}
    settings.update(overrides)
    return UploadSlots(idle_timeout=10.0, clock=clock, **settings)


def take(pool: UploadSlots, holder: Holder, owner: str) -> SlotsFull | None:
    """Acquire without waiting: None, or the refusal."""

    async def attempt() -> None:
        await pool.acquire(holder, owner, 0)

    try:
        asyncio.run(attempt())
    except SlotsFull as full:
        return full
    return None


def test_a_user_past_its_share_is_refused_while_others_get_slots() -> None:
    pool = slots(Clock())
    a1, a2, a3, b1 = (Holder(name) for name in ("a1", "a2", "a3", "b1"))
    assert take(pool, a1, "alice") is None
    assert take(pool, a2, "alice") is None
    refused = take(pool, a3, "alice")
    assert refused is not None and refused.own_cap and "this user" in str(refused)
    assert take(pool, b1, "bob") is None
    assert len(pool) == 3 and pool.held_by("alice") == 2 and pool.waiting() == 0
    pool.release(a1)
    pool.release(a1)  # twice is harmless
    assert pool.held_by("alice") == 1
    assert take(pool, a3, "alice") is None
    assert take(pool, a3, "alice") is None  # a holder holds one slot, however often it asks
    assert pool.held_by("alice") == 2


def test_the_total_cap_applies_to_everyone() -> None:
    pool = slots(Clock(), capacity=2, per_user=2)
    assert take(pool, Holder("a"), "alice") is None
    assert take(pool, Holder("b"), "bob") is None
    refused = take(pool, Holder("c"), "carol")
    assert refused is not None and not refused.own_cap and "the server" in str(refused)


def pool_with(clock: Clock, *pairs: tuple[Holder, str], **overrides: int) -> UploadSlots:
    pool = slots(clock, **overrides)
    for holder, owner in pairs:
        assert take(pool, holder, owner) is None
    return pool


def test_a_silent_upload_is_cut_after_the_idle_timeout() -> None:
    clock = Clock()
    holder = Holder("r1")
    pool = pool_with(clock, (holder, "alice"))
    clock.now += 9.9
    pool.cut_stalled()
    assert not holder.closed
    clock.now += 0.2
    pool.cut_stalled()
    assert holder.closed and len(pool) == 0 and pool.cut_stalled_count == 1


def test_a_drip_below_the_rate_is_cut_at_the_end_of_its_window() -> None:
    clock = Clock()
    drip, fast = Holder("drip"), Holder("fast")
    pool = pool_with(clock, (drip, "alice"), (fast, "bob"))
    for second in range(1, 11):
        clock.now += 1
        pool.delivered(drip, 10 * second)  # 10 B/s, never silent
        pool.delivered(fast, 1000 * second)  # 1000 B/s
        pool.cut_stalled()
    assert drip.closed and pool.cut_slow_count == 1
    assert not fast.closed and len(pool) == 1


def test_a_fast_start_does_not_buy_a_slow_finish() -> None:
    clock = Clock()
    holder = Holder("r")
    pool = pool_with(clock, (holder, "alice"))
    clock.now += 1
    pool.delivered(holder, 10_000_000)
    clock.now += 9
    pool.cut_stalled()  # the first window averaged far above the minimum: a new window
    assert not holder.closed
    for _ in range(10):
        clock.now += 1
        pool.delivered(holder, 10_000_000 + 1)
        pool.cut_stalled()
    assert holder.closed


def test_zero_minimum_rate_only_cuts_silence() -> None:
    clock = Clock()
    holder = Holder("r")
    pool = pool_with(clock, (holder, "alice"), min_body_rate=0)
    for second in range(1, 30):
        clock.now += 1
        pool.delivered(holder, second)
        pool.cut_stalled()
    assert not holder.closed


def test_try_acquire_takes_a_free_slot_now_and_never_past_a_cap_or_a_waiter() -> None:
    pool = slots(Clock(), capacity=3)
    a1, a2, a3, b1, c1 = (Holder(name) for name in ("a1", "a2", "a3", "b1", "c1"))
    assert pool.try_acquire(a1, "alice") and pool.try_acquire(a2, "alice")
    assert pool.try_acquire(a1, "alice")  # a holder keeps the slot it has: not a second one
    assert pool.held_by("alice") == 2 and len(pool) == 2
    assert not pool.try_acquire(a3, "alice")  # alice's own cap
    assert pool.try_acquire(b1, "bob")
    assert not pool.try_acquire(c1, "carol")  # the total
    assert len(pool) == 3 and pool.held_by("carol") == 0

    async def queued_then_try() -> bool:
        waiting = asyncio.ensure_future(pool.acquire(c1, "carol", 5.0))
        await asyncio.sleep(0)  # carol waits for a slot
        pool.release(b1)  # freed: it goes to the waiter, not to a later try_acquire
        taken_by_dave = pool.try_acquire(Holder("d1"), "dave")
        await waiting
        return taken_by_dave

    assert not asyncio.run(queued_then_try())
    assert pool.held_by("carol") == 1 and pool.held_by("dave") == 0
    pool.release(a1)
    assert pool.held_by("alice") == 1 and pool.try_acquire(a3, "alice")
