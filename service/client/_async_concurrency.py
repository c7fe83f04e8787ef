"""What the asyncio driver does with tasks and the executor, written by hand.

``_async_io`` is the source from which ``scripts/unasync.py`` writes ``_sync_io``; the few
things whose async and sync forms differ in more than ``await`` live here and in
``_sync_concurrency`` (as httpcore keeps its ``_synchronization``): running blocking calls off
the event loop, running sub-flows in parallel, writing to a caller's file, and async
iterables, which only this flavour accepts.

Thread-safety: use from the event loop that owns the driver.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

from service.client._flow import Flow, Parallel
from service.client._payload import AsyncIterBody, check_chunk

__all__ = [
    "AsyncWritable",
    "async_iterable_chunks",
    "off_loop",
    "run_parallel",
    "write_chunk",
]

T = TypeVar("T")

#: What ``AsyncObjectStream.pipe_to`` writes to: a binary file object (written on the
#: executor) or an object whose ``write`` is a coroutine function (awaited).
AsyncWritable = Any


async def off_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on the default executor."""
    return await asyncio.get_running_loop().run_in_executor(None, function, *args)


async def write_chunk(file: AsyncWritable, chunk: bytes) -> None:
    """Write ``chunk`` to ``file`` without blocking the event loop."""
    if inspect.iscoroutinefunction(file.write):
        await file.write(chunk)
    else:
        await off_loop(file.write, chunk)


def async_iterable_chunks(body: AsyncIterBody) -> AsyncIterator[bytes]:
    """The chunks of an async iterable body, each checked to be bytes."""

    async def chunks() -> AsyncIterator[bytes]:
        async for chunk in body.iterable:
            yield check_chunk(chunk)

    return chunks()


async def run_parallel(
    step: Parallel[Any], run: Callable[[Flow[Any]], Awaitable[Any]]
) -> list[Any]:
    """Run sub-flows as tasks, taking the next one only when a slot is free. On the first
    failure the others are cancelled (their parts are either stored or not: both are
    fine for a resume) and that failure is raised."""
    slots = asyncio.Semaphore(step.limit)
    results: dict[int, object] = {}
    failures: list[BaseException] = []
    tasks: set[asyncio.Task[None]] = set()
    next_flow = _flow_source(step.flows)

    async def run_one(index: int, flow: Flow[Any]) -> None:
        try:
            results[index] = await run(flow)
        except Exception as exc:
            failures.append(exc)
            for task in tasks:
                if task is not asyncio.current_task():
                    task.cancel()
        finally:
            slots.release()

    count = 0
    try:
        while True:
            await slots.acquire()
            if failures:
                break
            flow = await next_flow()
            if flow is None:
                break
            task = asyncio.create_task(run_one(count, flow))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            count += 1
    except BaseException as exc:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if isinstance(exc, Exception):
            failures.insert(0, exc)
        else:
            raise
    await asyncio.gather(*tasks, return_exceptions=True)
    if failures:
        raise failures[0]
    return [results[index] for index in range(count)]


def _flow_source(flows: Iterable[Flow[Any]] | AsyncIterable[Flow[Any]]) -> Callable[[], Any]:
    """An awaitable "next sub-flow or None"; a plain iterator is advanced on the executor
    because producing a part may read the caller's source."""
    if isinstance(flows, AsyncIterable):
        iterator = aiter(flows)

        async def next_async() -> Flow[Any] | None:
            return await anext(iterator, None)

        return next_async
    plain = iter(flows)

    async def next_plain() -> Flow[Any] | None:
        return await off_loop(next, plain, None)

    return next_plain
