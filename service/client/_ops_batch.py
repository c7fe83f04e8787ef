"""The batch upload flow: many small objects in one request as a tar stream (docs/batch.md).

``put_many`` turns ``(key, data)`` entries into a pax tar built by ``tarfile`` while it is
being sent (``IterBody``: the async driver reads it off the event loop), one member per
entry, and returns one ``PutManyResult`` per entry, in order. Memory holds one member's bytes
at a time when it is small (read whole so its SHA-256 can go ahead of it as the
``SERVICE.sha256`` pax record, which the server verifies), one buffer when it is large. The
SHA-256 the server reports for each stored member is compared with the one of the bytes sent.

Pure but for ``tar_stream``, which reads the entries' files (blocking; run off the loop).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import tarfile
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO, TypeAlias

from service.client._exceptions import (
    IntegrityError,
    ServiceError,
    UnexpectedResponseError,
    error_class,
)
from service.client._flow import Call, Flow, request
from service.client._models import Object, parse
from service.client._paths import bucket_path
from service.client._payload import IterBody
from service.client._wire import (
    BATCH_PAX_CONTENT_TYPE,
    BATCH_PAX_META_PREFIX,
    BATCH_PAX_SHA256,
)

__all__ = [
    "BatchEntry",
    "BatchItem",
    "PutManyResult",
    "put_many",
    "route_missing",
    "tar_stream",
]

#: Entries of at most this many bytes are read whole and sent with their SHA-256.
INLINE_BYTES = 1024 * 1024
#: The tar stream is handed to the HTTP layer in pieces of about this size.
PIECE_BYTES = 256 * 1024
#: The server's answer for a route it does not have (an older server or a proxy).
ROUTE_MISSING_CODES = frozenset({"NotFound", "MethodNotAllowed"})


@dataclasses.dataclass(frozen=True)
class BatchEntry:
    """One object of a ``put_many``, with the options a plain ``(key, data)`` pair lacks."""

    key: str
    data: bytes | bytearray | memoryview | os.PathLike[str]
    content_type: str | None = None
    metadata: Mapping[str, str] | None = None


#: What ``put_many`` takes per object: a ``BatchEntry`` or a ``(key, data)`` pair, where data
#: is bytes or a path (``pathlib.Path``; a ``str`` is not taken as a path).
BatchItem: TypeAlias = BatchEntry | tuple[str, bytes | bytearray | memoryview | os.PathLike[str]]


@dataclasses.dataclass(frozen=True)
class PutManyResult:
    """One entry's outcome: the stored ``object``, or the ``error`` that refused it."""

    key: str
    object: Object | None = None
    error: ServiceError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _entry(item: BatchItem) -> BatchEntry:
    entry = item if isinstance(item, BatchEntry) else BatchEntry(*item)
    if not isinstance(entry.key, str):
        raise TypeError(f"keys must be str, not {type(entry.key).__name__}")
    if entry.key.startswith("./"):
        raise ValueError(f"a batch cannot carry a key starting with './': {entry.key!r}")
    if not isinstance(entry.data, bytes | bytearray | memoryview | os.PathLike):
        raise TypeError(
            "batch data must be bytes or a path (os.PathLike), not " + type(entry.data).__name__
        )
    return entry


class _Sink:
    """Where ``tarfile`` writes: pieces kept until taken."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> int:
        self.pieces.append(bytes(data))
        self.size += len(data)
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self.pieces)
        self.pieces, self.size = [], 0
        return data


class _HashingReader:
    """A file read through, hashing what is read (a large entry's SHA-256, to compare)."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self.digest.update(data)
        return data


def tar_stream(items: Iterable[BatchItem], sent: list[tuple[str, str]]) -> Iterator[bytes]:
    """The pax tar of ``items`` in pieces (blocking: reads files); appends each entry's
    ``(key, sha256)`` to ``sent`` as it is written."""
    sink = _Sink()
    with tarfile.open(  # type: ignore[call-overload]
        fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT, bufsize=PIECE_BYTES
    ) as archive:
        for item in items:
            entry = _entry(item)
            sent.append((entry.key, _add(archive, entry)))
            if sink.size >= PIECE_BYTES:
                yield sink.take()
    if sink.size:
        yield sink.take()


def _add(archive: tarfile.TarFile, entry: BatchEntry) -> str:
    """Write ``entry`` as a member and return the SHA-256 of its bytes."""
    info = tarfile.TarInfo(entry.key)
    info.mode = 0o644
    records = {}
    if entry.content_type is not None:
        records[BATCH_PAX_CONTENT_TYPE] = entry.content_type
    for name, value in (entry.metadata or {}).items():
        records[BATCH_PAX_META_PREFIX + name] = value
    data = entry.data
    if not isinstance(data, os.PathLike):
        payload = bytes(data)
        info.mtime = int(time.time())
        return _add_bytes(archive, info, records, payload)
    with open(data, "rb") as file:
        stat = os.fstat(file.fileno())
        info.mtime = int(stat.st_mtime)
        if stat.st_size <= INLINE_BYTES:
            return _add_bytes(archive, info, records, file.read(INLINE_BYTES + 1))
        info.size = stat.st_size
        info.pax_headers = records
        reader = _HashingReader(file)
        archive.addfile(info, reader)
        return reader.digest.hexdigest()


def _add_bytes(
    archive: tarfile.TarFile, info: tarfile.TarInfo, records: dict[str, str], payload: bytes
) -> str:
    digest = hashlib.sha256(payload).hexdigest()
    info.size = len(payload)
    info.pax_headers = {**records, BATCH_PAX_SHA256: digest}
    archive.addfile(info, io.BytesIO(payload))
    return digest


def put_many(bucket: str, items: Iterable[BatchItem], *, prefix: str) -> Flow[list[PutManyResult]]:
    """POST the entries as one tar stream; one result per entry, in order."""
    sent: list[tuple[str, str]] = []
    call = Call(
        "POST",
        f"{bucket_path(bucket)}/batch",
        params={"prefix": prefix} if prefix else {},
        headers={"Content-Type": "application/x-tar"},
        body=IterBody(tar_stream(items, sent)),
    )
    reply = yield from request(call)
    request_id = reply.headers.get("X-Request-Id")
    document = reply.json()
    results = parse(lambda doc: list(doc["results"]), document)
    if len(results) != len(sent):
        raise UnexpectedResponseError(
            f"the server answered {len(results)} results for {len(sent)} entries",
            status=reply.status,
        )
    return [
        _result(item, key, digest, prefix, request_id)
        for item, (key, digest) in zip(results, sent, strict=True)
    ]


def _result(item: Any, key: str, digest: str, prefix: str, request_id: str | None) -> PutManyResult:
    if isinstance(item, Mapping) and "error" in item:
        error = item["error"]
        status = error.get("status") if isinstance(error.get("status"), int) else 400
        code, message = str(error.get("code")), str(error.get("message"))
        cls = error_class(status, code)
        return PutManyResult(
            key, error=cls(message, status=status, code=code, request_id=request_id)
        )
    stored = parse(Object.from_json, item)
    if stored.key != prefix + key:
        raise UnexpectedResponseError(f"result for {stored.key!r} where {prefix + key!r} was sent")
    if stored.sha256_checksum.lower() != digest:
        failure = IntegrityError(
            f"server stored SHA-256 {stored.sha256_checksum}, the data has {digest}",
            request_id=request_id,
        )
        return PutManyResult(key, object=stored, error=failure)
    return PutManyResult(key, object=stored)


def route_missing(error: ServiceError) -> bool:
    """Whether ``error`` says the server has no batch route (an older server, a proxy that
    refuses it): then each object goes up with its own PUT."""
    return error.status in (404, 405) and error.code in ROUTE_MISSING_CODES
