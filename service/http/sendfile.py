"""Zero-copy response bodies: ``os.sendfile`` from a payload file to a Tornado connection.

Why: copying a large body through Python (read into a buffer, hand it to the IOStream)
costs two copies and the GIL per chunk; ``sendfile`` lets the kernel move page-cache pages
straight to the socket, which is how nginx serves at memory speed.

How it stays off the event loop: the socket is non-blocking, so each ``sendfile`` call
returns once the socket buffer is full; the calls run on an executor thread (a cold page
cache means disk reads). A reader that keeps up drains the buffer within microseconds, so
the thread waits up to ``WRITABLE_WAIT_MS`` for room and goes on sending: a round trip
through the event loop per buffer-full cost a tenth of a fast download. A slower reader
returns the thread to the pool, and the loop waits for the socket to become writable.
The connection's descriptor is duplicated first, so a peer that disconnects (Tornado then
closes its own descriptor) can never make us write into a reused descriptor number.

Tornado has no public sendfile hook: the caller writes the headers through Tornado, the
body goes around it, and ``_mark_body_written`` tells the HTTP/1.1 connection that the declared
Content-Length was sent (``HTTP1Connection._expected_content_remaining``). The object
tests fail loudly if a Tornado upgrade changes that attribute.
"""

from __future__ import annotations

import asyncio
import os
import select
from concurrent.futures import Executor

from tornado.http1connection import HTTP1Connection
from tornado.iostream import StreamClosedError

_MAX_BYTES_PER_JOB = 64 * 1024 * 1024
WRITABLE_WAIT_MS = 10
"""How long an executor thread waits for a full socket buffer to drain before it hands the
wait back to the event loop: long enough for a local reader, short for a pool thread."""


def _send_some(socket_fd: int, file_fd: int, offset: int, count: int) -> int:
    """Send from ``file_fd`` until the socket stays full for ``WRITABLE_WAIT_MS``; return
    bytes sent."""
    sent_total = 0
    budget = min(count, _MAX_BYTES_PER_JOB)
    writable = select.poll()
    writable.register(socket_fd, select.POLLOUT)
    while sent_total < budget:
        try:
            sent = os.sendfile(socket_fd, file_fd, offset + sent_total, budget - sent_total)
        except BlockingIOError:
            if writable.poll(WRITABLE_WAIT_MS):
                continue
            break
        if sent == 0:
            raise EOFError("payload file ended before the declared length")
        sent_total += sent
    return sent_total


async def _wait_writable(socket_fd: int, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def on_writable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(socket_fd, on_writable)
    try:
        await asyncio.wait_for(ready, timeout)
    finally:
        loop.remove_writer(socket_fd)


def _mark_body_written(connection: HTTP1Connection, count: int) -> None:
    remaining = connection._expected_content_remaining
    if remaining is not None:
        connection._expected_content_remaining = remaining - count


async def send_file_body(
    connection: HTTP1Connection,
    file_fd: int,
    offset: int,
    count: int,
    *,
    executor: Executor,
    idle_timeout: float,
) -> None:
    """Send ``count`` bytes of ``file_fd`` from ``offset`` as the body whose headers the
    caller has written (and waited for).

    Raises StreamClosedError when the peer went away (the caller just stops).
    """
    stream = connection.stream
    if stream.closed() or stream.socket is None:
        raise StreamClosedError()
    loop = asyncio.get_running_loop()
    socket_fd = os.dup(stream.socket.fileno())
    try:
        remaining = count
        position = offset
        while remaining > 0:
            try:
                sent = await loop.run_in_executor(
                    executor, _send_some, socket_fd, file_fd, position, remaining
                )
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise StreamClosedError(real_error=exc) from exc
            if sent == 0:
                try:
                    await _wait_writable(socket_fd, idle_timeout)
                except TimeoutError as exc:
                    stream.close()
                    raise StreamClosedError(real_error=exc) from exc
                continue
            position += sent
            remaining -= sent
            _mark_body_written(connection, sent)
    finally:
        os.close(socket_fd)
