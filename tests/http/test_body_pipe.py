"""``BodyPipe``: bytes from the event loop to a reader thread, bounded, and its ends."""

from __future__ import annotations

import asyncio
import threading

import pytest

from service.http.body_pipe import BodyAborted, BodyPipe, in_own_thread


def read_all(pipe: BodyPipe, size: int) -> bytes:
    pieces = []
    while piece := pipe.read(size):
        pieces.append(piece)
    return b"".join(pieces)


def test_bytes_arrive_whole_and_in_order_and_feed_waits_when_full() -> None:
    async def main() -> tuple[bytes, int]:
        pipe = BodyPipe(asyncio.get_running_loop(), high_water=1000)
        chunks = [bytes([n]) * 300 for n in range(40)]
        most = 0
        release = threading.Event()

        def reader() -> bytes:
            release.wait()
            return read_all(pipe, 128)

        job = asyncio.ensure_future(in_own_thread(pipe, reader))
        for index, chunk in enumerate(chunks):
            feeding = asyncio.ensure_future(pipe.feed(chunk))
            await asyncio.sleep(0.01)
            # The fourth chunk takes the queue over the high-water mark with no reader: that
            # feed waits for room, the ones before it did not.
            assert feeding.done() == (index != 3 or release.is_set())
            if index == 3:
                release.set()
            await feeding
            most = max(most, pipe._buffered)
        pipe.end()
        return await job, most

    data, most = asyncio.run(main())
    assert data == b"".join(bytes([n]) * 300 for n in range(40))
    assert most < 1000 + 300


def test_abort_makes_the_reader_fail_and_a_gone_reader_drops_what_comes() -> None:
    async def main() -> None:
        pipe = BodyPipe(asyncio.get_running_loop(), high_water=100)
        job = asyncio.ensure_future(in_own_thread(pipe, lambda: read_all(pipe, 10)))
        await pipe.feed(b"x" * 50)
        await asyncio.sleep(0.05)
        pipe.abort()
        with pytest.raises(BodyAborted):
            await job
        # The reader is gone: feeding never waits, however much comes.
        for _ in range(10):
            await asyncio.wait_for(pipe.feed(b"y" * 500), timeout=1)

    asyncio.run(main())
