"""Upload bodies described without reading them.

``body_from`` turns whatever the caller passed to ``put`` or ``upload_part`` into one of a few
small descriptions; the sync and async I/O layers stream each kind in their own way (the
async one reads files on an executor). Nothing here reads a stream: a body is read only while
it is being sent, a chunk at a time, so memory never depends on its size.

Only ``MemoryBody``, ``PathBody``, ``RegionBody`` and seekable ``FileBody`` can be sent twice,
so only those are retried after a failure mid-request.

Pure apart from ``FileBody``'s ``tell()`` and the blocking ``sha256_*`` helpers, which callers
on an event loop run on an executor. Bodies are immutable; a ``RegionBody`` reads with
``os.pread`` and so may be sent from several threads at once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from collections.abc import AsyncIterable, Iterable, Iterator
from typing import BinaryIO, TypeAlias

__all__ = [
    "CHUNK_BYTES",
    "AsyncIterBody",
    "Body",
    "Data",
    "FileBody",
    "IterBody",
    "MemoryBody",
    "PathBody",
    "RegionBody",
    "body_from",
    "check_chunk",
    "is_replayable",
    "known_length",
    "memory_chunks",
    "read_region",
    "sha256_bytes",
    "sha256_region",
]

#: Bytes read from a file per chunk while streaming or hashing it.
CHUNK_BYTES = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class MemoryBody:
    """Bytes already in memory (bytes, bytearray, memoryview, or str encoded as UTF-8)."""

    data: bytes


@dataclasses.dataclass(frozen=True)
class PathBody:
    """A whole file named by path; opened, sized and read only when sent."""

    path: str


@dataclasses.dataclass(frozen=True)
class RegionBody:
    """``length`` bytes at ``offset`` of an open file descriptor, read with ``os.pread`` so
    concurrent parts of one file never disturb each other's position."""

    fd: int
    offset: int
    length: int


@dataclasses.dataclass(frozen=True)
class FileBody:
    """A binary file object, read from its position at the time of the call. ``start`` is
    that position when the file can seek (the body can then be re-sent), else None."""

    file: BinaryIO
    start: int | None


@dataclasses.dataclass(frozen=True)
class IterBody:
    """An iterable of bytes chunks, sent with chunked transfer encoding."""

    iterable: Iterable[bytes]


@dataclasses.dataclass(frozen=True)
class AsyncIterBody:
    """An async iterable of bytes chunks (only ``AsyncServiceClient`` can send it)."""

    iterable: AsyncIterable[bytes]


Body: TypeAlias = MemoryBody | PathBody | RegionBody | FileBody | IterBody | AsyncIterBody

#: What ``put`` and ``upload_part`` accept. A ``str`` is text (sent as UTF-8), never a path:
#: pass a ``pathlib.Path`` (or use ``put_file``) to upload a file.
Data: TypeAlias = (
    bytes
    | bytearray
    | memoryview
    | str
    | os.PathLike[str]
    | BinaryIO
    | Iterable[bytes]
    | AsyncIterable[bytes]
)


def body_from(data: object) -> Body:
    """Describe ``data`` as a body, refusing anything that is not one of the accepted kinds.

    >>> body_from("héllo")
    MemoryBody(data=b'h\\xc3\\xa9llo')
    >>> body_from(memoryview(b"ab"))
    MemoryBody(data=b'ab')
    """
    if isinstance(data, bytes):
        return MemoryBody(data)
    if isinstance(data, bytearray | memoryview):
        return MemoryBody(bytes(data))
    if isinstance(data, str):
        return MemoryBody(data.encode("utf-8"))
    if isinstance(data, os.PathLike):
        return PathBody(os.fspath(data))
    if hasattr(data, "read"):
        return _file_body(data)  # type: ignore[arg-type]
    if isinstance(data, AsyncIterable):
        return AsyncIterBody(data)
    if isinstance(data, Iterable):
        return IterBody(data)
    raise TypeError(
        "data must be bytes, bytearray, memoryview, str, a path (os.PathLike), a binary file "
        f"object or an (async) iterable of bytes, not {type(data).__name__}"
    )


def _file_body(file: BinaryIO) -> FileBody:
    if isinstance(file, io.TextIOBase):
        raise TypeError("open the file in binary mode ('rb'): a text file yields str")
    try:
        start = file.tell() if file.seekable() else None
    except (OSError, ValueError):
        start = None
    return FileBody(file, start)


def is_replayable(body: Body | None) -> bool:
    """Whether the body can be sent again after a failed attempt."""
    if body is None:
        return True
    if isinstance(body, FileBody):
        return body.start is not None
    return isinstance(body, MemoryBody | PathBody | RegionBody)


def known_length(body: Body) -> int | None:
    """The length known without touching the disk (files are sized when sent)."""
    if isinstance(body, MemoryBody):
        return len(body.data)
    if isinstance(body, RegionBody):
        return body.length
    return None


def memory_chunks(data: bytes) -> Iterator[bytes]:
    """``data`` as zero-copy chunks. Large in-memory bodies are sent this way rather than as
    one ``bytes``: httpx keeps a sent request reachable from a reference cycle (response and
    stream) until the cyclic GC runs, and an exhausted generator holds nothing, whereas a
    ``bytes`` content would keep a whole part alive for that long."""
    view = memoryview(data)
    for start in range(0, len(view), CHUNK_BYTES):
        # httpx and h11 send any bytes-like chunk; a memoryview slice avoids a copy
        yield view[start : start + CHUNK_BYTES]  # type: ignore[misc]


def check_chunk(chunk: object) -> bytes:
    """A chunk from a caller's iterable, refusing str (whose encoding would be a guess)."""
    if isinstance(chunk, bytes):
        return chunk
    if isinstance(chunk, bytearray | memoryview):
        return bytes(chunk)
    raise TypeError(f"iterables must yield bytes, not {type(chunk).__name__}")


def read_region(fd: int, offset: int, length: int) -> bytes:
    """Exactly ``length`` bytes at ``offset`` (blocking). A file that shrank is an error:
    sending fewer bytes than announced would corrupt the upload."""
    data = os.pread(fd, length, offset)
    if len(data) == length:
        return data
    pieces = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, offset + got)
        if not more:
            raise OSError(f"file shrank while being read: wanted {length} bytes at {offset}")
        pieces.append(more)
        got += len(more)
    return b"".join(pieces)


def sha256_region(fd: int, offset: int, length: int) -> str:
    """Hex SHA-256 of a file region, read a chunk at a time (blocking)."""
    digest = hashlib.sha256()
    done = 0
    while done < length:
        size = min(CHUNK_BYTES, length - done)
        digest.update(read_region(fd, offset + done, size))
        done += size
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of bytes (blocking for large inputs: run it on an executor from a loop)."""
    return hashlib.sha256(data).hexdigest()
