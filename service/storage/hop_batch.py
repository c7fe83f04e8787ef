"""Blocking calls made in the same event-loop iteration, run as one executor job.

Why: a small PUT's file work (create, write, rename of a 4 KiB staging file, no fsync in
balanced mode or under the group sync) takes a few tens of microseconds, and handing it to a
pool thread and back cost about as much again in Python: a ``concurrent.futures.Future``, a
queue, a thread wake-up, ``call_soon_threadsafe``'s self-pipe write and the loop's read of
it. With many PUTs in flight several arrive in one loop iteration; ``HopBatch`` gives them
one hop between them: the calls run one after another on one pool thread, in the order they
were made, and every caller gets its own result or exception.

Only calls that never wait for the disk may share a hop (no fsync): one slow call would delay
the others. Each call keeps its own crash points and error handling; batching changes only
which thread runs it and when its caller is woken.

Thread-safety: ``run`` on the event-loop thread only; the batch runs on one pool thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from concurrent.futures import Future as ThreadFuture
from typing import Any, TypeVar

T = TypeVar("T")
_Call = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


class HopBatch:
    """Runs the calls made in one loop iteration as one job on ``executor()``: the pool is
    looked up at each hop, as ``Engine.run_blocking`` looks up ``Engine.executor`` (which
    the crash kit replaces after the engine is built)."""

    def __init__(self, executor: Callable[[], Executor]) -> None:
        self._executor = executor
        self._pending: list[_Call] = []

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` on a pool thread, in a hop shared with the calls made meanwhile."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._submit, loop)
        self._pending.append((fn, args, future))
        return future

    def _submit(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._pending = self._pending, []
        try:
            job = self._executor().submit(_run_all, batch)
        except RuntimeError as exc:  # the executor is shut down
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        job.add_done_callback(lambda done: loop.call_soon_threadsafe(_deliver, batch, done))


def _run_all(batch: list[_Call]) -> list[tuple[bool, Any]]:
    results: list[tuple[bool, Any]] = []
    for fn, args, _ in batch:
        try:
            results.append((True, fn(*args)))
        except BaseException as exc:  # handed to its own caller
            results.append((False, exc))
    return results


def _deliver(batch: list[_Call], done: ThreadFuture[list[tuple[bool, Any]]]) -> None:
    error = done.exception()
    results = [(False, error)] * len(batch) if error is not None else done.result()
    for (_, _, future), (ok, value) in zip(batch, results, strict=True):
        if future.done():
            continue  # its caller went away (cancelled)
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
