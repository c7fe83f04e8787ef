"""Run a delegate's coroutine up to its first wait at once, on the caller's stack.

Why: a handler's ``data_received`` is a coroutine that, for a body kept in memory (a small
PUT), never waits. Wrapped in a task it still cost a ``Task``, a done callback and one more
turn of the event loop per chunk (docs/benchmarks.md, "Issue 27"). ``start_eagerly`` steps
it here instead (what Python 3.12's eager tasks do); only a coroutine that really waits is
handed to a task, which carries it on from the future it is waiting for.

May import: the standard library only. Thread-safety: event-loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any


def start_eagerly(awaitable: Awaitable[Any]) -> asyncio.Future[Any] | None:
    """None when ``awaitable`` (a coroutine) finished without waiting (its exception, if
    any, raised here); else a future of its outcome, carried on by a task. An awaitable
    that is not a coroutine is wrapped as ``asyncio.ensure_future`` does."""
    if not asyncio.iscoroutine(awaitable):
        return asyncio.ensure_future(awaitable)
    coroutine: Coroutine[Any, Any, Any] = awaitable
    try:
        waiting_for = coroutine.send(None)
    except StopIteration:
        return None
    return asyncio.ensure_future(_CarryOn(coroutine, waiting_for))


class _CarryOn:
    """The rest of a started coroutine, as an awaitable a task can run: it first hands the
    task what the coroutine is waiting for, then passes each result (or exception, or
    cancellation) back into the coroutine, as the task would have done directly."""

    def __init__(self, coroutine: Coroutine[Any, Any, Any], waiting_for: Any) -> None:
        self._coroutine = coroutine
        self._waiting_for = waiting_for

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, waiting_for = self._coroutine, self._waiting_for
        while True:
            try:
                sent = yield waiting_for
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:  # thrown in by the task: cancellation included
                try:
                    waiting_for = coroutine.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                waiting_for = coroutine.send(sent)
            except StopIteration as stop:
                return stop.value
