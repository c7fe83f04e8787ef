"""``HopBatch``: calls made in one loop iteration share one executor job, in order, and each
caller gets its own result or exception."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.storage.hop_batch import HopBatch


class CountingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=4)
        self.jobs = 0

    def submit(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        self.jobs += 1
        return super().submit(*args, **kwargs)


def test_calls_of_one_iteration_share_one_job_and_keep_their_order() -> None:
    async def main() -> tuple[list[int], list[int], int, set[int]]:
        executor = CountingExecutor()
        batch = HopBatch(lambda: executor)
        order: list[int] = []
        threads: set[int] = set()

        def work(number: int) -> int:
            order.append(number)
            threads.add(threading.get_ident())
            return number * 10

        results = await asyncio.gather(*(batch.run(work, number) for number in range(5)))
        executor.shutdown()
        return list(results), order, executor.jobs, threads

    results, order, jobs, threads = asyncio.run(main())
    assert results == [0, 10, 20, 30, 40]
    assert order == [0, 1, 2, 3, 4]
    assert jobs == 1 and len(threads) == 1


def test_each_caller_gets_its_own_exception() -> None:
    async def main() -> list[object]:
        executor = ThreadPoolExecutor(max_workers=2)
        batch = HopBatch(lambda: executor)

        def fail(number: int) -> int:
            if number == 1:
                raise OSError(28, "No space left on device")
            return number

        outcomes = await asyncio.gather(
            *(batch.run(fail, number) for number in range(3)), return_exceptions=True
        )
        executor.shutdown()
        return list(outcomes)

    first, second, third = asyncio.run(main())
    assert first == 0 and third == 2
    assert isinstance(second, OSError) and second.errno == 28


def test_calls_of_later_iterations_get_a_job_of_their_own() -> None:
    async def main() -> int:
        executor = CountingExecutor()
        batch = HopBatch(lambda: executor)
        for number in range(3):
            assert await batch.run(lambda value: value + 1, number) == number + 1
        executor.shutdown()
        return executor.jobs

    assert asyncio.run(main()) == 3


def test_a_shut_down_executor_fails_every_call_of_the_batch() -> None:
    async def main() -> None:
        executor = ThreadPoolExecutor(max_workers=1)
        executor.shutdown()
        batch = HopBatch(lambda: executor)
        with pytest.raises(RuntimeError):
            await batch.run(lambda: 1)

    asyncio.run(main())
