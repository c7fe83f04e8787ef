"""The asyncio driver: performs a flow's steps with ``httpx.AsyncClient``.

Of the two driver modules the async one is the source: ``scripts/unasync.py`` writes the
sync one from it, so edit the async one. ``AsyncDriver.run`` drives any
flow from ``_ops_*``: requests go through one pooled client (keep-alive connections reused),
bodies stream from memory, files or iterables a chunk at a time, ``Parallel`` steps run
sub-flows at once (tasks or threads: see the two ``*_concurrency`` modules). In the
async flavour everything that may block (reading files, iterating a caller's plain iterator)
runs on the executor, off the event loop. httpx failures are translated here, at the
boundary, into the client's ``TransportError`` family.

Thread-safety: an asyncio driver belongs to the event loop it was created on (many tasks may
run flows on it at once); a sync driver may run flows from several threads at once (httpx's
pool is thread-safe; the driver keeps no per-request state).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any, BinaryIO, TypeVar, cast

import httpx

from service.client._async_concurrency import async_iterable_chunks, off_loop, run_parallel
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

__all__ = [
    "ERROR_BODY_LIMIT",
    "AsyncDriver",
    "Handle",
    "async_content",
]

T = TypeVar("T")

#: At most this much of an error answer is read: enough for the contract's JSON, bounded
#: against a proxy's large HTML page.
ERROR_BODY_LIMIT = 64 * 1024

AsyncContent = bytes | AsyncIterator[bytes] | None

_DONE = object()


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
        return await run_parallel(step, self.run)


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
    """What httpx sends for ``body``, and the headers it needs. Files with a known size get
    a Content-Length (so the server can refuse an over-quota body up front); streams of
    unknown size go chunked. Called once per attempt, so a retry re-reads from the start."""
    if body is None:
        return None, {}
    if isinstance(body, MemoryBody):
        if len(body.data) <= CHUNK_BYTES:
            return body.data, {}
        return _memory_chunks(body.data), _length(len(body.data))
    if isinstance(body, RegionBody):
        return _region_chunks(body.fd, body.offset, body.length), _length(body.length)
    if isinstance(body, PathBody):
        stat = await off_loop(os.stat, body.path)
        return _path_chunks(body.path, stat.st_size), _length(stat.st_size)
    if isinstance(body, FileBody):
        if body.start is None:
            return _file_chunks(body.file, None), {}
        size = await off_loop(_rewind, body.file, body.start)
        return _file_chunks(body.file, size), _length(size)
    if isinstance(body, IterBody):
        return _iter_chunks(iter(body.iterable)), {}
    assert isinstance(body, AsyncIterBody)
    return async_iterable_chunks(body), {}


class Handle:
    """Base of the sub-clients and handles: they run flows on the client's driver."""

    def __init__(self, driver: AsyncDriver) -> None:
        self._driver = driver

    async def _run(self, flow: Flow[T]) -> T:
        return await self._driver.run(flow)


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
    """Read ``size`` bytes (or to EOF when None); a file shorter than announced is an error
    rather than a truncated upload."""
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
