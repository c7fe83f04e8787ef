"""``service.http.eager``: a coroutine's first step runs at once; the rest, if it waits, on a
task, with results, exceptions and cancellation passed through as a task would."""

from __future__ import annotations

import asyncio

import pytest

from service.http.eager import start_eagerly


def test_a_coroutine_that_never_waits_is_finished_on_the_spot() -> None:
    ran: list[str] = []

    async def body() -> None:
        ran.append("all of it")

    async def main() -> None:
        assert start_eagerly(body()) is None
        assert ran == ["all of it"]  # before the loop got another turn

    asyncio.run(main())


def test_an_exception_before_any_wait_is_raised_to_the_caller() -> None:
    async def body() -> None:
        raise ValueError("refused")

    async def main() -> None:
        with pytest.raises(ValueError, match="refused"):
            start_eagerly(body())

    asyncio.run(main())


def test_a_coroutine_that_waits_goes_on_in_a_task_with_every_result_passed_in() -> None:
    steps: list[object] = []

    async def body(first: asyncio.Future[int], second: asyncio.Future[int]) -> int:
        steps.append("started")
        steps.append(await first)
        steps.append(await second)
        return 42

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        future = start_eagerly(body(first, second))
        assert future is not None and steps == ["started"]
        loop.call_soon(first.set_result, 1)
        loop.call_later(0.01, second.set_result, 2)
        assert await future == 42
        assert steps == ["started", 1, 2]

    asyncio.run(main())


def test_an_exception_after_a_wait_reaches_the_future_and_the_coroutine_sees_it() -> None:
    caught: list[BaseException] = []

    async def body(waited: asyncio.Future[None]) -> None:
        try:
            await waited
        except KeyError as exc:
            caught.append(exc)
            raise RuntimeError("after") from exc

    async def main() -> None:
        waited = asyncio.get_running_loop().create_future()
        future = start_eagerly(body(waited))
        assert future is not None
        waited.set_exception(KeyError("lost"))
        with pytest.raises(RuntimeError, match="after"):
            await future
        assert isinstance(caught[0], KeyError)

    asyncio.run(main())


def test_cancelling_the_future_cancels_the_coroutine_where_it_waits() -> None:
    cleaned: list[str] = []

    async def body(waited: asyncio.Future[None]) -> None:
        try:
            await waited
        finally:
            cleaned.append("finally")

    async def main() -> None:
        waited = asyncio.get_running_loop().create_future()
        future = start_eagerly(body(waited))
        assert future is not None
        await asyncio.sleep(0)
        future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await future
        assert cleaned == ["finally"]
        assert waited.cancelled()

    asyncio.run(main())


def test_an_awaitable_that_is_not_a_coroutine_is_wrapped_as_ensure_future_does() -> None:
    async def main() -> None:
        done = asyncio.get_running_loop().create_future()
        done.set_result("ready")
        future = start_eagerly(done)
        assert future is done

    asyncio.run(main())
