"""What the synchronous driver does with threads, written by hand (see ``_async_concurrency``).

Thread-safety: every function may be called from several threads at once.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable
from typing import IO, Any, NoReturn

from service.client._flow import Flow, Parallel
from service.client._payload import AsyncIterBody

__all__ = [
    "Writable",
    "async_iterable_chunks",
    "run_parallel",
    "write_chunk",
]

#: What ``ObjectStream.pipe_to`` writes to.
Writable = IO[bytes]


def write_chunk(file: Writable, chunk: bytes) -> None:
    file.write(chunk)


def async_iterable_chunks(body: AsyncIterBody) -> NoReturn:
    """Async iterables cannot be read without an event loop."""
    raise TypeError("async iterables need AsyncServiceClient")


def run_parallel(step: Parallel[Any], run: Callable[[Flow[Any]], Any]) -> list[Any]:
    """Run sub-flows on threads, taking the next one only when a slot is free, so a lazy
    source never has more than ``limit`` parts in memory."""
    if not isinstance(step.flows, Iterable):
        raise TypeError("async iterables need AsyncServiceClient")
    slots = threading.Semaphore(step.limit)
    results: dict[int, object] = {}
    failures: list[BaseException] = []

    def run_one(index: int, flow: Flow[Any]) -> None:
        try:
            results[index] = run(flow)
        except BaseException as exc:
            failures.append(exc)
        finally:
            slots.release()

    count = 0
    flows = iter(step.flows)
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=step.limit, thread_name_prefix="service-client"
    ) as pool:
        while True:
            slots.acquire()
            if failures:
                break
            try:
                flow = next(flows, None)
            except BaseException as exc:
                failures.append(exc)
                break
            if flow is None:
                break
            pool.submit(run_one, count, flow)
            count += 1
    if failures:
        raise failures[0]
    return [results[index] for index in range(count)]
