"""The asynchronous driver: performs a flow's steps with ``httpx.AsyncClient`` and tasks.

The counterpart of ``_sync_io`` for asyncio. Everything that may block (reading files,
hashing, iterating a caller's plain iterator) runs on the default executor so the event loop
keeps serving other tasks; ``Parallel`` steps run sub-flows as tasks. httpx failures are
translated here into the client's ``TransportError`` family.

Thread-safety: use a driver from the event loop it was created on; many tasks may run flows
on it at once.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from typing import Any, BinaryIO, TypeVar, cast

import httpx

from service.client._config import ClientConfig
from service.client._exceptions import error_from_response, transport_error
from service.client._flow import Blocking, Call, Flow, Parallel, Reply, Sleep, Step, with_retries
from service.client._payload import (
    CHUNK_BYTES,
    AsyncIterBody,
    Body,
    FileBody,
    IterBody,
    MemoryBody,
    PathBody,
    RegionBody,
    check_chunk,
    memory_chunks,
    read_region,
)
from service.client._sync_io import ERROR_BODY_LIMIT

__all__ = [
    "AsyncDriver",
    "AsyncWritable",
    "async_content",
    "off_loop",
    "write_chunk",
]

T = TypeVar("T")

AsyncContent = bytes | AsyncIterator[bytes] | None

#: What ``AsyncObjectStream.pipe_to`` writes to: a binary file object (written on the
#: executor) or an object whose ``write`` is a coroutine function (awaited).
AsyncWritable = Any

_DONE = object()


async def off_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on the default executor."""
    return await asyncio.get_running_loop().run_in_executor(None, function, *args)


async def write_chunk(file: AsyncWritable, chunk: bytes) -> None:
    """Write ``chunk`` to ``file`` without blocking the event loop."""
    if inspect.iscoroutinefunction(file.write):
        await file.write(chunk)
    else:
        await off_loop(file.write, chunk)


class AsyncDriver:
    """Runs flows over one ``httpx.AsyncClient``."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.http = httpx.AsyncClient(**config.httpx_options())

    async def close(self) -> None:
        await self.http.aclose()

    async def run(self, flow: Flow[T]) -> T:
        """Drive ``flow`` to its end and return its result (or raise its error). A streamed
        reply that the flow does not hand back (because it failed) is closed here."""
        steps = with_retries(flow, self.config.retry)
        pending: httpx.Response | None = None
        try:
            step = next(steps)
            while True:
                try:
                    outcome = await self._perform(step)
                except Exception as exc:
                    step = steps.throw(exc)
                else:
                    if isinstance(outcome, Reply) and outcome.raw is not None:
                        pending = outcome.raw
                    step = steps.send(outcome)
        except StopIteration as stop:
            return cast(T, stop.value)
        except BaseException:
            if pending is not None:
                await pending.aclose()
            raise
        finally:
            steps.close()

    async def _perform(self, step: Step) -> object:
        if isinstance(step, Call):
            return await self._send(step)
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            return None
        if isinstance(step, Blocking):
            return await off_loop(step.function)
        return await self._parallel(step)

    async def _send(self, call: Call) -> Reply:
        content, headers = await async_content(call.body)
        request = self.http.build_request(
            call.method,
            call.path,
            params=call.params or None,
            headers={**call.headers, **headers},
            content=content,
            json=call.json,
        )
        try:
            response = await self.http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        if response.is_success and call.stream:
            return Reply(response.status_code, response.headers, raw=response)
        try:
            body = await _read(response, limit=None if response.is_success else ERROR_BODY_LIMIT)
        except httpx.HTTPError as exc:
            if response.is_success:
                raise transport_error(exc) from exc
            body = b""
        finally:
            await response.aclose()
        if response.is_success:
            return Reply(response.status_code, response.headers, body)
        raise error_from_response(response.status_code, response.headers, body)

    async def _parallel(self, step: Parallel[Any]) -> list[Any]:
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
                results[index] = await self.run(flow)
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


async def _read(response: httpx.Response, *, limit: int | None) -> bytes:
    if limit is None:
        return await response.aread()
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


async def async_content(body: Body | None) -> tuple[AsyncContent, dict[str, str]]:
    """What httpx sends for ``body``, and the headers it needs (see ``sync_content``);
    files are sized and read on the executor."""
    if body is None:
        return None, {}
    if isinstance(body, MemoryBody):
        if len(body.data) <= CHUNK_BYTES:
            return body.data, {}
        return _memory_chunks(body.data), _length(len(body.data))
    if isinstance(body, RegionBody):
        return _region_chunks(body.fd, body.offset, body.length), _length(body.length)
    if isinstance(body, PathBody):
        size = (await off_loop(os.stat, body.path)).st_size
        return _path_chunks(body.path, size), _length(size)
    if isinstance(body, FileBody):
        if body.start is None:
            return _file_chunks(body.file, None), {}
        size = await off_loop(_rewind, body.file, body.start)
        return _file_chunks(body.file, size), _length(size)
    if isinstance(body, IterBody):
        return _iter_chunks(iter(body.iterable)), {}
    assert isinstance(body, AsyncIterBody)
    return _aiter_chunks(body.iterable), {}


def _length(size: int) -> dict[str, str]:
    return {"Content-Length": str(size)}


def _rewind(file: BinaryIO, start: int) -> int:
    """Seek to ``start`` and return how many bytes follow it."""
    end = file.seek(0, os.SEEK_END)
    file.seek(start)
    return max(0, end - start)


async def _memory_chunks(data: bytes) -> AsyncIterator[bytes]:
    for chunk in memory_chunks(data):
        yield chunk


async def _region_chunks(fd: int, offset: int, length: int) -> AsyncIterator[bytes]:
    done = 0
    while done < length:
        size = min(CHUNK_BYTES, length - done)
        yield await off_loop(read_region, fd, offset + done, size)
        done += size


async def _path_chunks(path: str, size: int) -> AsyncIterator[bytes]:
    fd = await off_loop(os.open, path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        async for chunk in _region_chunks(fd, 0, size):
            yield chunk
    finally:
        os.close(fd)


async def _file_chunks(file: BinaryIO, size: int | None) -> AsyncIterator[bytes]:
    remaining = size
    while remaining is None or remaining > 0:
        want = CHUNK_BYTES if remaining is None else min(CHUNK_BYTES, remaining)
        chunk = check_chunk(await off_loop(file.read, want))
        if not chunk:
            if remaining is not None:
                raise OSError(f"file shrank while being sent: {remaining} bytes missing")
            return
        if remaining is not None:
            remaining -= len(chunk)
        yield chunk


async def _iter_chunks(iterator: Iterator[bytes]) -> AsyncIterator[bytes]:
    while (chunk := await off_loop(next, iterator, _DONE)) is not _DONE:
        yield check_chunk(chunk)


async def _aiter_chunks(iterable: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    async for chunk in iterable:
        yield check_chunk(chunk)
