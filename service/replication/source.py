"""Where a standby's copies come from: its primary's signing secret, newest snapshot and
payload bytes, behind one small interface.

The standby's apply (``service.replication.bootstrap``, ``service.replication.payloads``)
reads its primary only through ``PrimarySource``, so the code that makes a copy durable is
separate from the transport: the server reads its primary over HTTP (``HttpSource``), and
the crash matrix's standby kinds (``tests/crash/standbykit.py``) hand it an in-process
primary's files, so that a power cut can be simulated at every file operation of the apply.

Thread-safety: an ``HttpSource`` takes concurrent calls (its ``httpx.Client`` does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

import httpx

from service.archive.refs import PayloadRef
from service.replication.payloads import PayloadSource, ReplicationError
from service.replication.wire import (
    HEADER_SNAPSHOT_SEQUENCE,
    NOT_HELD,
    PAYLOADS_PATH,
    SECRET_PATH,
    SNAPSHOT_PATH,
    iter_entries,
)

READ_BYTES = 1 << 20
"""A streamed payload is written this much at a time."""


class PrimarySource(PayloadSource, Protocol):
    """What a fresh standby copies from its primary."""

    def secret(self) -> bytes:
        """The primary's signing secret (``server-secret``)."""
        ...

    def snapshot(self) -> AbstractContextManager[tuple[int, Iterable[bytes]]]:
        """The newest snapshot's sequence and its bytes (0 and none: no record yet)."""
        ...


class HttpSource:
    """A primary over the replication stream (``service.replication.wire``)."""

    def __init__(self, client: httpx.Client) -> None:
        self._client = client

    def secret(self) -> bytes:
        answer = self._client.get(SECRET_PATH)
        _check(answer, "the signing secret")
        return answer.content

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[tuple[int, Iterable[bytes]]]:
        with self._client.stream("GET", SNAPSHOT_PATH) as answer:
            _check(answer, "the snapshot")
            sequence = int(answer.headers.get(HEADER_SNAPSHOT_SEQUENCE, "0"))
            yield sequence, (answer.iter_bytes() if sequence else ())

    def payloads(self, group: list[PayloadRef]) -> Iterator[tuple[str, int, Iterable[bytes]]]:
        """One bulk payloads request (``wire.iter_entries``), streamed."""
        params = {"id": [ref.payload_id for ref in group]}
        with self._client.stream("GET", PAYLOADS_PATH, params=params) as answer:
            if answer.status_code != 200:
                answer.read()
                raise ReplicationError(f"payloads: the primary answered {answer.status_code}")
            reader = _StreamReader(answer.iter_bytes(READ_BYTES))
            try:
                for name, size, read in iter_entries(reader.read_exactly):
                    yield name, size, (_windows(read, size) if size != NOT_HELD else ())
            except ValueError as exc:
                raise ReplicationError(f"the payloads answer is malformed: {exc}") from None


def _windows(read: Callable[[int], bytes], size: int) -> Iterator[bytes]:
    """``size`` bytes of a stream, a window at a time; ``ReplicationError`` if it ends first."""
    left = size
    while left > 0:
        chunk = read(min(READ_BYTES, left))
        if len(chunk) != min(READ_BYTES, left):
            raise ReplicationError("the payloads answer ended early")
        left -= len(chunk)
        yield chunk


class _StreamReader:
    """Exact reads over an answer's chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = bytearray()

    def read_exactly(self, count: int) -> bytes:
        """``count`` bytes, fewer only at the end of the stream."""
        while len(self._buffer) < count:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        out = bytes(self._buffer[:count])
        del self._buffer[:count]
        return out


def _check(answer: httpx.Response, what: str) -> None:
    if answer.status_code != 200:
        raise ReplicationError(f"{what}: the primary answered {answer.status_code}")
