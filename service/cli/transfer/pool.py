"""A bounded worker pool: at most ``jobs`` tasks run and ``2 * jobs`` wait, whatever the
number of tasks, so a stream of a million files never becomes a million futures.

``run_bounded`` consumes a lazy iterable of callables and calls ``done(result_or_error)``
for each as it finishes (on the worker thread); if ``done`` itself raises (stdout was
closed), no further task starts and that error is raised here. Ctrl-C in the main thread
stops feeding new tasks; the ones running finish or fail on their own.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["run_bounded"]

T = TypeVar("T")


def run_bounded(
    tasks: Iterable[Callable[[], T]],
    jobs: int,
    done: Callable[[T | None, BaseException | None], None],
) -> None:
    """Run every task on ``jobs`` threads; ``done(result, None)`` or ``done(None, error)``."""
    slots = threading.BoundedSemaphore(jobs * 2)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="svc")
    broken: list[BaseException] = []  # ``done`` itself failed (stdout closed): stop feeding

    def finished(future: concurrent.futures.Future[T]) -> None:
        try:
            if future.cancelled():
                return
            error = future.exception()
            done(None if error else future.result(), error)
        except BaseException as failure:
            broken.append(failure)
        finally:
            slots.release()

    try:
        for task in tasks:
            slots.acquire()
            if broken:
                break
            pool.submit(task).add_done_callback(finished)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True, cancel_futures=bool(broken))
    if broken:
        raise broken[0]
