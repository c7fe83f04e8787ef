"""The shared file-system sync of strict small PUTs (``service.storage.groupsync``)."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from fsseam.fs import RealFileSystem
from service.storage.groupsync import GroupSync


class GatedSync:
    """An ``FsSync`` that records its calls and blocks each until released."""

    def __init__(self, fail_on: frozenset[int] = frozenset()) -> None:
        self.calls = 0
        self.entered = threading.Semaphore(0)
        self.release = threading.Semaphore(0)
        self.fail_on = fail_on
        """Numbers (1-based) of the calls that raise EIO."""

    def sync(self) -> None:
        self.calls += 1
        number = self.calls
        self.entered.release()
        assert self.release.acquire(timeout=10)
        if number in self.fail_on:
            raise OSError(errno.EIO, "EIO")

    def close(self) -> None:
        """Nothing held."""


async def entered(gate: GatedSync) -> None:
    assert await asyncio.to_thread(gate.entered.acquire, True, 10)


async def outcomes(tasks: list[asyncio.Task[None]]) -> list[str]:
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return ["ok" if result is None else type(result).__name__ for result in results]


def blocking(pool: ThreadPoolExecutor) -> Callable[[Callable[[], None]], Awaitable[None]]:
    """``Engine.run_blocking`` on ``pool``."""
    return lambda fn: asyncio.get_running_loop().run_in_executor(pool, fn)


@pytest.fixture
def executor() -> ThreadPoolExecutor:
    pool = ThreadPoolExecutor(2)
    yield pool  # type: ignore[misc]
    pool.shutdown(wait=True)


def test_callers_arriving_during_a_sync_share_the_next_one(executor: ThreadPoolExecutor) -> None:
    async def scenario() -> None:
        gate = GatedSync()
        group = GroupSync(gate, blocking(executor))
        first = asyncio.create_task(group.sync(group.ticket()))
        await entered(gate)
        followers = [asyncio.create_task(group.sync(group.ticket())) for _ in range(7)]
        await asyncio.sleep(0.05)
        assert not any(task.done() for task in [first, *followers])
        gate.release.release()
        await first
        await entered(gate)  # the followers' own sync: one for all seven
        await asyncio.sleep(0.05)
        assert not any(task.done() for task in followers)
        gate.release.release()
        assert await outcomes(followers) == ["ok"] * 7
        assert gate.calls == group.syncs == 2

    asyncio.run(scenario())


def test_a_failed_sync_fails_every_caller_that_took_a_ticket_before_it(
    executor: ThreadPoolExecutor,
) -> None:
    """Even callers that wait for the *next* sync: the failed one may have seen their error."""

    async def scenario() -> None:
        gate = GatedSync(fail_on=frozenset({1}))
        group = GroupSync(gate, blocking(executor))
        first = asyncio.create_task(group.sync(group.ticket()))
        await entered(gate)
        followers = [asyncio.create_task(group.sync(group.ticket())) for _ in range(3)]
        await asyncio.sleep(0.05)
        gate.release.release()
        assert await outcomes([first, *followers]) == ["OSError"] * 4
        assert gate.calls == 1  # nobody was left for a second sync
        with pytest.raises(OSError) as raised:
            await first
        assert raised.value.errno == errno.EIO
        # A caller with a later ticket is served by a later sync.
        later = asyncio.create_task(group.sync(group.ticket()))
        await entered(gate)
        gate.release.release()
        await later
        assert gate.calls == 2

    asyncio.run(scenario())


def test_a_ticket_taken_before_a_failure_fails_even_if_its_sync_starts_after_it(
    executor: ThreadPoolExecutor,
) -> None:
    async def scenario() -> None:
        gate = GatedSync(fail_on=frozenset({1}))
        group = GroupSync(gate, blocking(executor))
        ticket = group.ticket()  # taken, file being written...
        failing = asyncio.create_task(group.sync(group.ticket()))
        await entered(gate)
        gate.release.release()
        assert await outcomes([failing]) == ["OSError"]
        with pytest.raises(OSError):
            await group.sync(ticket)  # ...its sync comes after the failure: still failed
        assert gate.calls == 1

    asyncio.run(scenario())


def test_a_cancelled_leader_does_not_strand_its_followers(executor: ThreadPoolExecutor) -> None:
    async def scenario() -> None:
        gate = GatedSync()
        group = GroupSync(gate, blocking(executor))
        leader = asyncio.create_task(group.sync(group.ticket()))
        await entered(gate)
        follower = asyncio.create_task(group.sync(group.ticket()))
        await asyncio.sleep(0.01)
        leader.cancel()
        gate.release.release()
        await entered(gate)
        gate.release.release()
        assert await outcomes([follower]) == ["ok"]
        assert leader.cancelled()

    asyncio.run(scenario())


def test_the_real_syncfs_syncs_and_closes(tmp_path: str, executor: ThreadPoolExecutor) -> None:
    handle = RealFileSystem().open_syncfs(str(tmp_path))
    if handle is None:
        pytest.skip("no trustworthy syncfs on this OS (Linux >= 5.8)")
    with open(os.path.join(str(tmp_path), "f"), "wb") as file:
        file.write(b"x")

    async def scenario() -> None:
        group = GroupSync(handle, blocking(executor))
        await asyncio.gather(*(group.sync(group.ticket()) for _ in range(5)))
        assert group.syncs == 2  # the first caller leads, the other four share one

    asyncio.run(scenario())
    handle.close()
    handle.close()  # idempotent
    with pytest.raises(ValueError):
        handle.sync()
