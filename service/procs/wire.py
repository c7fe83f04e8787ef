"""The frames between a worker and the writer on the local socket.

Each frame is a 4-byte big-endian length and a msgpack array. A worker sends
``[request id, event]``; the writer answers ``[request id, OK, outcome]`` or
``[request id, REFUSED, kind, message, retry after, log detail]`` (the engine's domain errors,
``service.engine.errors``, which the worker raises again). Many requests are in flight on one
connection; answers come in any order, matched by the id (never 0: ``NOTE_ID`` frames carry
a worker's notes, unanswered).

Outcomes carry their record as ``[type name, [fields in order]]``: every record is a flat
frozen dataclass of ``service.meta.model``, so this is exact (mappings arrive as dicts).

Thread-safety: pure functions and ``asyncio`` stream helpers for one event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import Mapping
from typing import Any

import msgpack

from service.common.api_errors import ServiceError
from service.engine.errors import (
    CommitFailedError,
    NotServingError,
    ReadOnlyError,
    StorageFullError,
)
from service.meta import Outcome
from service.meta.model import (
    AccessKey,
    Bucket,
    ObjectVersion,
    PartInfo,
    UploadSession,
    User,
    VideoJob,
    VideoShare,
)

OK = 0
REFUSED = 1
NOTE_ID = 0
"""The request id of ``[0, {"uses": {access key id: ms}, "put": [...], "stored": [...],
"get": [...]}]``: notes from a worker, unanswered (``service.procs.notes``)."""
MAX_FRAME = 64 * 1024 * 1024
"""A frame larger than this is a broken peer, not an event (events are small)."""
_LENGTH = struct.Struct(">I")
_RECORDS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        AccessKey,
        Bucket,
        ObjectVersion,
        PartInfo,
        UploadSession,
        User,
        VideoJob,
        VideoShare,
    )
}


class FrameError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def pack(message: list[Any]) -> bytes:
    body: bytes = msgpack.packb(message, use_bin_type=True)
    return _LENGTH.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> list[Any]:
    """The next frame; ``asyncio.IncompleteReadError`` at the end of the stream."""
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if length > MAX_FRAME:
        raise FrameError(f"frame of {length} bytes")
    message = msgpack.unpackb(await reader.readexactly(length), raw=False, strict_map_key=False)
    if not isinstance(message, list) or not message:
        raise FrameError("a frame is not a list")
    return message


def encode_outcome(outcome: Outcome) -> list[Any]:
    value = outcome.value
    record = (
        None
        if value is None
        else [
            type(value).__name__,
            [_plain(getattr(value, f.name)) for f in dataclasses.fields(value)],
        ]
    )
    return [
        outcome.ok,
        outcome.error_code,
        outcome.error_message,
        record,
        list(outcome.released_payloads),
    ]


def decode_outcome(fields: list[Any]) -> Outcome:
    ok, code, message, record, released = fields
    value = None
    if record is not None:
        name, values = record
        value = _RECORDS[name](*values)
    return Outcome(ok, code, message, value, tuple(released))


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


def encode_error(error: ServiceError) -> list[Any]:
    """``[kind, message, retry after, log detail]`` of an engine error."""
    return [type(error).__name__, error.message, error.retry_after, error.log_detail]


def decode_error(fields: list[Any]) -> ServiceError:
    """The engine error the writer raised, to raise again in the worker."""
    kind, message, retry_after, detail = fields
    if kind == ReadOnlyError.__name__:
        return ReadOnlyError()
    if kind == StorageFullError.__name__:
        return StorageFullError(detail or message)
    if kind == CommitFailedError.__name__:
        return CommitFailedError(detail or message)
    return NotServingError(message, retry_after or 1)
