"""A request body handed from the event loop to one reader thread, with back-pressure.

A batch upload's tar stream is read by a thread (``service.ops.batch``) that blocks on it;
the body arrives on the event loop through ``data_received``. ``BodyPipe`` joins the two:
the loop ``feed``s chunks in, the reader thread ``read``s them out like a socket (whatever is
there, waiting only when nothing is). Memory is bounded: once ``HIGH_WATER_BYTES`` are queued
``feed`` waits until the reader has taken the queue below half of that, so Tornado stops
reading the connection meanwhile. ``in_own_thread`` runs the reader on a thread of its own,
not on the engine's executor, because it waits for the client's bytes and a slow client must
not hold a thread that PUTs and reads need.

Rules: ``feed``, ``end`` and ``abort`` are called on the event loop; ``read`` on the reader
thread; the two sides share only the state under ``_lock``. Once the reader is gone
(``reader_done``), fed bytes are dropped: the rest of the body is read and discarded so the
error can still be answered on the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

HIGH_WATER_BYTES = 4 * 1024 * 1024
"""Bytes queued for the reader before ``feed`` waits."""


class BodyAborted(Exception):
    """The client went away (or the upload was cut) before the body ended."""


class BodyPipe:
    """See the module docstring."""

    def __init__(self, loop: asyncio.AbstractEventLoop, high_water: int = HIGH_WATER_BYTES) -> None:
        self._loop = loop
        self._high = high_water
        self._lock = threading.Condition()
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._ended = False
        self._aborted = False
        self._reader_gone = False
        self._room: asyncio.Future[None] | None = None

    async def feed(self, chunk: bytes) -> None:
        """Queue ``chunk`` for the reader; wait while the queue is full (event loop)."""
        with self._lock:
            if self._reader_gone or not chunk:
                return
            self._chunks.append(chunk)
            self._buffered += len(chunk)
            self._lock.notify()
            if self._buffered < self._high:
                return
            room = self._room = self._loop.create_future()
        await room

    def end(self) -> None:
        """The body ended: ``read`` returns b"" once the queue is empty (event loop)."""
        with self._lock:
            self._ended = True
            self._lock.notify()

    def abort(self) -> None:
        """The body will never end: ``read`` raises ``BodyAborted`` (event loop)."""
        with self._lock:
            self._aborted = True
            self._lock.notify()
            self._wake()

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all queued when negative), waiting only while nothing is
        queued; b"" at the end of the body (reader thread)."""
        with self._lock:
            while not self._buffered and not self._ended and not self._aborted:
                self._lock.wait()
            if self._aborted:
                raise BodyAborted("the client went away before the body ended")
            data = self._take(self._buffered if size < 0 else min(size, self._buffered))
            if self._buffered <= self._high // 2:
                self._wake()
            return data

    def reader_done(self) -> None:
        """The reader stopped reading (done or failed): drop what is queued and what comes."""
        with self._lock:
            self._reader_gone = True
            self._chunks.clear()
            self._buffered = 0
            self._wake()

    def _take(self, count: int) -> bytes:
        pieces = []
        wanted = count
        while wanted:
            chunk = self._chunks[0]
            if len(chunk) <= wanted:
                pieces.append(self._chunks.popleft())
                wanted -= len(chunk)
            else:
                pieces.append(chunk[:wanted])
                self._chunks[0] = chunk[wanted:]
                wanted = 0
        self._buffered -= count
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _wake(self) -> None:
        """Let a waiting ``feed`` go on (any thread; the lock is held)."""
        room, self._room = self._room, None
        if room is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                self._loop.call_soon_threadsafe(_settle, room)


def _settle(room: asyncio.Future[None]) -> None:
    if not room.done():
        room.set_result(None)


async def in_own_thread(pipe: BodyPipe, function: Callable[[], T]) -> T:
    """Run ``function`` (which reads ``pipe``) on a new thread and return its result; the
    pipe is told when it stops reading."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def main() -> None:
        try:
            result = function()
        except BaseException as error:
            outcome: tuple[T | None, BaseException | None] = (None, error)
        else:
            outcome = (result, None)
        finally:
            pipe.reader_done()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=main, name="batch-reader", daemon=True).start()
    return await done
