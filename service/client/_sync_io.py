"""The synchronous driver: performs a flow's steps with ``httpx.Client`` and threads.

``SyncDriver.run`` drives any flow from ``_ops_*``: requests go through one pooled
``httpx.Client`` (keep-alive connections reused), bodies stream from memory, files or
iterables a chunk at a time, ``Parallel`` steps run sub-flows on a thread pool. httpx
failures are translated here, at the boundary, into the client's ``TransportError`` family.

Thread-safety: a driver may run flows from several threads at once (httpx's pool is
thread-safe; the driver keeps no per-request state).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, BinaryIO, TypeVar, cast

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

__all__ = [
    "ERROR_BODY_LIMIT",
    "SyncDriver",
    "Writable",
    "sync_content",
    "write_chunk",
]

T = TypeVar("T")

#: At most this much of an error answer is read: enough for the contract's JSON, bounded
#: against a proxy's large HTML page.
ERROR_BODY_LIMIT = 64 * 1024

Content = bytes | Iterator[bytes] | None

#: What ``ObjectStream.pipe_to`` writes to.
Writable = IO[bytes]


def write_chunk(file: Writable, chunk: bytes) -> None:
    file.write(chunk)


class SyncDriver:
    """Runs flows over one ``httpx.Client``."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.http = httpx.Client(**config.httpx_options())

    def close(self) -> None:
        self.http.close()

    def run(self, flow: Flow[T]) -> T:
        """Drive ``flow`` to its end and return its result (or raise its error). A streamed
        reply that the flow does not hand back (because it failed) is closed here."""
        steps = with_retries(flow, self.config.retry)
        pending: httpx.Response | None = None
        try:
            step = next(steps)
            while True:
                try:
                    outcome = self._perform(step)
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
                pending.close()
            raise
        finally:
            steps.close()

    def _perform(self, step: Step) -> object:
        if isinstance(step, Call):
            return self._send(step)
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            return None
        if isinstance(step, Blocking):
            return step.function()
        return self._parallel(step)

    def _send(self, call: Call) -> Reply:
        content, headers = sync_content(call.body)
        request = self.http.build_request(
            call.method,
            call.path,
            params=call.params or None,
            headers={**call.headers, **headers},
            content=content,
            json=call.json,
        )
        try:
            response = self.http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        if response.is_success and call.stream:
            return Reply(response.status_code, response.headers, raw=response)
        try:
            body = _read(response, limit=None if response.is_success else ERROR_BODY_LIMIT)
        except httpx.HTTPError as exc:
            if response.is_success:
                raise transport_error(exc) from exc
            body = b""
        finally:
            response.close()
        if response.is_success:
            return Reply(response.status_code, response.headers, body)
        raise error_from_response(response.status_code, response.headers, body)

    def _parallel(self, step: Parallel[Any]) -> list[Any]:
        """Run sub-flows on threads, taking the next one only when a slot is free, so a lazy
        source never has more than ``limit`` parts in memory."""
        if not isinstance(step.flows, Iterable):
            raise TypeError("async iterables need AsyncServiceClient")
        slots = threading.Semaphore(step.limit)
        results: dict[int, object] = {}
        failures: list[BaseException] = []

        def run_one(index: int, flow: Flow[Any]) -> None:
            try:
                results[index] = self.run(flow)
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


def _read(response: httpx.Response, *, limit: int | None) -> bytes:
    if limit is None:
        return response.read()
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def sync_content(body: Body | None) -> tuple[Content, dict[str, str]]:
    """What httpx sends for ``body``, and the headers it needs. Files with a known size get
    a Content-Length (so the server can refuse an over-quota body up front); streams of
    unknown size go chunked. Called once per attempt, so a retry re-reads from the start."""
    if body is None:
        return None, {}
    if isinstance(body, MemoryBody):
        if len(body.data) <= CHUNK_BYTES:
            return body.data, {}
        return iter(memory_chunks(body.data)), _length(len(body.data))
    if isinstance(body, RegionBody):
        return _region_chunks(body.fd, body.offset, body.length), _length(body.length)
    if isinstance(body, PathBody):
        size = os.stat(body.path).st_size
        return _path_chunks(body.path, size), _length(size)
    if isinstance(body, FileBody):
        if body.start is None:
            return _file_chunks(body.file, None), {}
        end = body.file.seek(0, os.SEEK_END)
        body.file.seek(body.start)
        size = max(0, end - body.start)
        return _file_chunks(body.file, size), _length(size)
    if isinstance(body, IterBody):
        return (check_chunk(chunk) for chunk in body.iterable), {}
    assert isinstance(body, AsyncIterBody)
    raise TypeError("async iterables need AsyncServiceClient")


def _length(size: int) -> dict[str, str]:
    return {"Content-Length": str(size)}


def _region_chunks(fd: int, offset: int, length: int) -> Iterator[bytes]:
    done = 0
    while done < length:
        size = min(CHUNK_BYTES, length - done)
        yield read_region(fd, offset + done, size)
        done += size


def _path_chunks(path: str, size: int) -> Iterator[bytes]:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        yield from _region_chunks(fd, 0, size)
    finally:
        os.close(fd)


def _file_chunks(file: BinaryIO, size: int | None) -> Iterator[bytes]:
    """Read ``size`` bytes (or to EOF when None); a file shorter than announced is an error
    rather than a truncated upload."""
    remaining = size
    while remaining is None or remaining > 0:
        want = CHUNK_BYTES if remaining is None else min(CHUNK_BYTES, remaining)
        chunk = check_chunk(file.read(want))
        if not chunk:
            if remaining is not None:
                raise OSError(f"file shrank while being sent: {remaining} bytes missing")
            return
        if remaining is not None:
            remaining -= len(chunk)
        yield chunk
