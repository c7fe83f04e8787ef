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

from service.replication.payloads import PayloadSource, ReplicationError
from service.replication.wire import (
    HEADER_SNAPSHOT_SEQUENCE,
    PAYLOADS_PATH,
    SECRET_PATH,
    SNAPSHOT_PATH,
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

    @contextlib.contextmanager
    def payload(self, payload_id: str) -> Iterator[Iterable[bytes] | None]:
        with self._client.stream("GET", f"{PAYLOADS_PATH}/{payload_id}") as answer:
            if answer.status_code == 404:
                yield None
                return
            _check(answer, f"payload {payload_id}")
            yield answer.iter_bytes()


def _check(answer: httpx.Response, what: str) -> None:
    if answer.status_code != 200:
        raise ReplicationError(f"{what}: the primary answered {answer.status_code}")
