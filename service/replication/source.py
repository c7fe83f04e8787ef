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
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

import httpx

from service.archive.refs import PayloadRef
from service.replication.payloads import Chunks, PayloadSource, ReplicationError
from service.replication.wire import (
    HEADER_SNAPSHOT_SEQUENCE,
    NOT_HELD,
    PAYLOADS_PATH,
    SECRET_PATH,
    SNAPSHOT_PATH,
    iter_entries,
)


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

    def payloads(self, group: list[PayloadRef]) -> Iterator[tuple[str, int, Chunks]]:
        """One bulk payloads request (``wire.iter_entries``), streamed: a payload's bytes go
        on in the pieces the connection received them in (no copy into windows)."""
        params = {"id": [ref.payload_id for ref in group]}
        with self._client.stream("GET", PAYLOADS_PATH, params=params) as answer:
            if answer.status_code != 200:
                answer.read()
                raise ReplicationError(f"payloads: the primary answered {answer.status_code}")
            reader = _StreamReader(answer.iter_raw())
            try:
                for name, size in iter_entries(reader.read_exactly):
                    yield name, size, (reader.pieces(size) if size != NOT_HELD else ())
            except ValueError as exc:
                raise ReplicationError(f"the payloads answer is malformed: {exc}") from None


class _StreamReader:
    """Exact reads over an answer's chunks (an entry's small header), and a payload's bytes
    as views of the chunks themselves (``pieces``)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._view = memoryview(b"")

    def read_exactly(self, count: int) -> bytes:
        """``count`` bytes, fewer only at the end of the stream."""
        if len(self._view) >= count:
            out = bytes(self._view[:count])
            self._view = self._view[count:]
            return out
        parts = [bytes(self._view)]
        have = len(parts[0])
        self._view = memoryview(b"")
        while have < count:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            take = min(len(chunk), count - have)
            parts.append(chunk[:take])
            have += take
            self._view = memoryview(chunk)[take:]
        return b"".join(parts)

    def pieces(self, size: int) -> Iterator[bytes | memoryview]:
        """Exactly ``size`` bytes, in the pieces received; ``ReplicationError`` if the
        stream ends first. Each piece must be used before the next is asked for."""
        left = size
        while left > 0:
            if not self._view:
                chunk = next(self._chunks, None)
                if chunk is None:
                    raise ReplicationError("the payloads answer ended early")
                self._view = memoryview(chunk)
            piece = self._view[:left]
            self._view = self._view[len(piece) :]
            left -= len(piece)
            yield piece


def _check(answer: httpx.Response, what: str) -> None:
    if answer.status_code != 200:
        raise ReplicationError(f"{what}: the primary answered {answer.status_code}")
