"""Unit tests of ``service.limits.fair_slots``: waiting for a slot, giving up, fairness.

Pure asyncio on one loop: requests are tasks, a slot freed is a ``release``. The rules are
the module docstring's, numbered the same; the HTTP view of them is
``tests/http/test_edge_caps.py``. A hypothesis state machine checks the invariants under
any interleaving of arrivals, releases and departures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from service.limits.fair_slots import FairSlots, SlotsFull


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class Requests:
    """Tasks acquiring slots of ``slots``, and the order in which they got them."""

    def __init__(self, slots: FairSlots) -> None:
        self.slots = slots
        self.served: list[str] = []
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, name: str, owner: str, timeout: float = 60.0) -> asyncio.Task[None]:
        async def one() -> None:
            await self.slots.acquire(owner, timeout)
            self.served.append(name)

        task = asyncio.ensure_future(one())
        self.tasks[name] = task
        return task


def test_rule_1_caps_hold_and_a_free_slot_is_taken_at_once() -> None:
    async def scenario() -> None:
        slots = FairSlots(per_user=2, capacity=3)
        requests = Requests(slots)
        for name, owner in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c")):
            requests.start(name, owner)
        await settle()
        assert requests.served == ["a1", "a2", "b1"]
        assert len(slots) == 3 and slots.held_by("a") == 2 and slots.waiting() == 2
        slots.release("a")
        await settle()
        # c holds nothing, a holds one: c goes first (rule 3).
        assert requests.served[-1] == "c1" and slots.waiting() == 1
        slots.release("b")
        await settle()
        assert requests.served[-1] == "a3" and slots.waiting() == 0

    run(scenario)


def test_rule_2_a_newcomer_never_overtakes_a_waiter() -> None:
    async def scenario() -> None:
        slots = FairSlots(per_user=1, capacity=None)
        requests = Requests(slots)
        requests.start("first", "a")
        requests.start("second", "a")
        await settle()
        assert not slots.try_acquire("a")  # "second" waits, so a newcomer of a does too
        slots.release("a")
        await settle()
        assert requests.served == ["first", "second"]

    run(scenario)


def test_a_wait_that_runs_out_says_which_cap_was_full() -> None:
    async def scenario() -> None:
        slots = FairSlots(per_user=1, capacity=2)
        assert slots.try_acquire("a") and slots.try_acquire("b")
        with pytest.raises(SlotsFull) as own:
            await slots.acquire("a", 0.05)
        assert own.value.own_cap
        with pytest.raises(SlotsFull) as total:
            await slots.acquire("c", 0.05)
        assert not total.value.own_cap
        assert slots.waiting() == 0 and len(slots) == 2

    run(scenario)


def test_rule_3_a_burst_is_served_in_turn_with_other_users() -> None:
    async def scenario() -> None:
        slots = FairSlots(per_user=4, capacity=1)
        requests = Requests(slots)
        assert slots.try_acquire("hog")
        for number in range(4):
            requests.start(f"hog{number}", "hog")
        await settle()
        requests.start("ann", "ann")
        requests.start("bob", "bob")
        await settle()
        for _ in range(6):
            owner = requests.served[-1][:3] if requests.served else "hog"
            slots.release(owner)
            await settle()
        # After the hog's first slot: ann and bob (holding nothing) before the rest of the
        # hog's burst, though they queued after it; then the hog, in its own order.
        assert requests.served == ["ann", "bob", "hog0", "hog1", "hog2", "hog3"]

    run(scenario)


def test_rule_3_ties_go_to_the_owner_served_longest_ago() -> None:
    async def scenario() -> None:
        slots = FairSlots(per_user=2, capacity=3)
        requests = Requests(slots)
        assert slots.try_acquire("a") and slots.try_acquire("b") and slots.try_acquire("x")
        requests.start("b2", "b")  # b queues first...
        await settle()
        requests.start("a2", "a")
        await settle()
        slots.release("x")
        await settle()
        # ...but both hold one slot, and a was served longer ago.
        assert requests.served == ["a2"]
        slots.release("x" if slots.held_by("x") else "a")
        await settle()
        assert requests.served == ["a2", "b2"]

    run(scenario)


def test_rule_4_a_cancelled_waiter_leaves_and_loses_nothing() -> None:
    async def scenario() -> None:
        slots = FairSlots(per_user=1)
        requests = Requests(slots)
        assert slots.try_acquire("a")
        gone = requests.start("gone", "a")
        requests.start("next", "a")
        await settle()
        assert slots.waiting() == 2
        gone.cancel()
        await settle()
        assert slots.waiting() == 1
        slots.release("a")
        await settle()
        assert requests.served == ["next"] and slots.held_by("a") == 1

    run(scenario)


def test_rule_4_a_slot_granted_as_its_waiter_leaves_is_given_back() -> None:
    async def scenario() -> None:
        slots = FairSlots(per_user=1)
        requests = Requests(slots)
        assert slots.try_acquire("a")
        leaving = requests.start("leaving", "a")
        await settle()
        slots.release("a")  # granted, but the task has not run yet...
        leaving.cancel()  # ...and is cancelled before it does
        await settle()
        assert slots.held_by("a") == 0 and len(slots) == 0 and slots.waiting() == 0
        assert slots.try_acquire("a")

    run(scenario)


def test_rule_5_waiters_are_bounded_per_owner() -> None:
    async def scenario() -> None:
        slots = FairSlots(per_user=1, max_waiting=2)
        requests = Requests(slots)
        assert slots.try_acquire("a")
        requests.start("w1", "a")
        requests.start("w2", "a")
        await settle()
        with pytest.raises(SlotsFull) as refused:
            await slots.acquire("a", 10)
        assert refused.value.own_cap and "waiting" in str(refused.value)
        assert slots.try_acquire("b")  # other owners are not affected

    run(scenario)


class SlotsMachine(RuleBasedStateMachine):
    """Arrivals, releases and departures in any order: the caps hold, nobody waits while a
    slot it could use is free, and no slot is lost."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.slots = FairSlots(per_user=2, capacity=3)
        self.holding: dict[str, int] = {}
        self.waiters: list[tuple[str, asyncio.Task[None]]] = []

    def teardown(self) -> None:
        for _, task in self.waiters:
            task.cancel()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()

    def settle(self) -> None:
        for _ in range(3):
            self.loop.run_until_complete(asyncio.sleep(0))
        still = []
        for owner, task in self.waiters:
            if not task.done():
                still.append((owner, task))
            elif not task.cancelled() and task.exception() is None:
                self.holding[owner] = self.holding.get(owner, 0) + 1
        self.waiters = still

    @rule(owner=st.sampled_from("abc"))
    def arrive(self, owner: str) -> None:
        task = self.loop.create_task(self.slots.acquire(owner, 3600))
        self.waiters.append((owner, task))
        self.settle()

    @rule(owner=st.sampled_from("abc"))
    def release(self, owner: str) -> None:
        if self.holding.get(owner, 0) > 0:
            self.holding[owner] -= 1
            self.slots.release(owner)
        self.settle()

    @rule(index=st.integers(min_value=0, max_value=20))
    def leave(self, index: int) -> None:
        if self.waiters:
            _, task = self.waiters[index % len(self.waiters)]
            task.cancel()
        self.settle()

    @invariant()
    def caps_hold_and_nothing_is_lost(self) -> None:
        assert all(count <= 2 for count in self.holding.values())
        assert sum(self.holding.values()) == len(self.slots) <= 3
        for owner in "abc":
            assert self.slots.held_by(owner) == self.holding.get(owner, 0)
        assert self.slots.waiting() == len(self.waiters)

    @invariant()
    def nobody_waits_for_a_free_slot_it_could_use(self) -> None:
        if len(self.slots) < 3:
            assert all(self.holding.get(owner, 0) >= 2 for owner, _ in self.waiters)


TestSlotsMachine = SlotsMachine.TestCase
TestSlotsMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
