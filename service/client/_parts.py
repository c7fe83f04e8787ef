"""Planning a multipart upload: part sizes, splitting a source into parts, progress.

A source becomes a lazy sequence of ``Piece`` objects, each one part's number and body:

- a file (a path, or a binary file object with a real descriptor that can seek) is split by
  offset into ``RegionBody`` pieces; nothing is read until a part is sent, and then only that
  part's region, a chunk at a time;
- bytes in memory are sliced;
- anything else (a pipe, ``BytesIO``, an iterable or async iterable of bytes) is read into
  one part-sized buffer per piece, and a piece is only produced when an upload slot is free.

So memory stays at most ``max_parallel`` parts, whatever the source's size. ``open_source``
and the readers block (they open and read files): callers on an event loop run them on an
executor. ``ProgressMeter`` is thread-safe; everything else is used by one thread at a time.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import stat
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from typing import BinaryIO, TypeAlias

from service.client._models import Part
from service.client._payload import MemoryBody, RegionBody, check_chunk, sha256_bytes, sha256_region
from service.client._wire import MAX_PART_NUMBER

__all__ = [
    "AsyncIterSource",
    "IterSource",
    "MemorySource",
    "MultipartSource",
    "Piece",
    "ProgressCallback",
    "ProgressMeter",
    "ReaderSource",
    "Rechunker",
    "RegionSource",
    "Source",
    "choose_part_size",
    "is_already_stored",
    "open_source",
    "split",
]

#: ``progress(bytes_done, total_bytes_or_None)``, called after each part is stored.
ProgressCallback: TypeAlias = Callable[[int, int | None], object]

#: What ``upload_multipart`` accepts as its source. A ``str`` is a path here.
MultipartSource: TypeAlias = (
    str
    | os.PathLike[str]
    | bytes
    | bytearray
    | memoryview
    | BinaryIO
    | Iterable[bytes]
    | AsyncIterable[bytes]
)


@dataclasses.dataclass(frozen=True)
class Piece:
    """Part ``number`` of an upload and the body that holds its ``size`` bytes."""

    number: int
    body: MemoryBody | RegionBody
    size: int

    def sha256(self) -> str:
        """Hex SHA-256 of the part (blocking: reads a region from disk)."""
        if isinstance(self.body, RegionBody):
            return sha256_region(self.body.fd, self.body.offset, self.body.length)
        return sha256_bytes(self.body.data)


def choose_part_size(requested: int | None, recommended: int, total: int | None) -> int:
    """The part size: the caller's, else the server's recommendation, grown when needed so a
    source of known size fits in the contract's 10 000 parts.

    >>> choose_part_size(None, 8, 100), choose_part_size(4, 8, 100), choose_part_size(1, 8, 25_000)
    (8, 4, 3)
    """
    size = requested if requested is not None else recommended
    if size < 1:
        raise ValueError("part_size must be at least 1 byte")
    if total is not None and math.ceil(total / size) > MAX_PART_NUMBER:
        size = math.ceil(total / MAX_PART_NUMBER)
    return size


def split(total: int, part_size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of each part of ``total`` bytes; an empty source is one empty part.

    >>> split(10, 4), split(8, 4), split(0, 4)
    ([(0, 4), (4, 4), (8, 2)], [(0, 4), (4, 4)], [(0, 0)])
    """
    if total == 0:
        return [(0, 0)]
    return [(offset, min(part_size, total - offset)) for offset in range(0, total, part_size)]


def is_already_stored(stored: Part | None, size: int, sha256: str) -> bool:
    """Whether a resumed upload may skip a part: the server holds one with this number, this
    size and this content (its etag is the part's SHA-256)."""
    return stored is not None and stored.size_bytes == size and stored.etag == sha256


def _check_number(number: int) -> int:
    if number > MAX_PART_NUMBER:
        raise ValueError(
            f"the source needs more than {MAX_PART_NUMBER} parts: pass a larger part_size"
        )
    return number


class Rechunker:
    """Cuts a stream of arbitrary chunks into numbered pieces of exactly ``part_size`` bytes
    (the last may be shorter). Holds at most one part plus one incoming chunk.

    >>> cutter = Rechunker(4)
    >>> [p.body.data for p in cutter.feed(b"abcdef")], [p.number for p in cutter.feed(b"gh")]
    ([b'abcd'], [2])
    >>> cutter.finish() is None, Rechunker(4).finish()
    (True, Piece(number=1, body=MemoryBody(data=b''), size=0))
    """

    def __init__(self, part_size: int) -> None:
        self.part_size = part_size
        self.buffer = bytearray()
        self.count = 0

    def feed(self, chunk: bytes) -> list[Piece]:
        self.buffer += chunk
        pieces = []
        while len(self.buffer) >= self.part_size:
            pieces.append(self._piece(bytes(self.buffer[: self.part_size])))
            del self.buffer[: self.part_size]
        return pieces

    def finish(self) -> Piece | None:
        """The rest as a last piece; an empty stream still makes one (empty) piece."""
        if not self.buffer and self.count > 0:
            return None
        rest = bytes(self.buffer)
        self.buffer.clear()
        return self._piece(rest)

    def _piece(self, data: bytes) -> Piece:
        self.count += 1
        return Piece(_check_number(self.count), MemoryBody(data), len(data))


class ProgressMeter:
    """Adds up stored bytes and reports them; calls are serialised so a callback sees an
    increasing count even when parts finish on several threads at once."""

    def __init__(self, callback: ProgressCallback | None, total: int | None) -> None:
        self.callback = callback
        self.total = total
        self.done = 0
        self._lock = threading.Lock()

    def advance(self, size: int) -> None:
        with self._lock:
            self.done += size
            if self.callback is not None:
                self.callback(self.done, self.total)


class RegionSource:
    """A file read by offset through a descriptor (ours when opened from a path)."""

    def __init__(self, fd: int, start: int, size: int, *, owned: bool) -> None:
        self.fd, self.start, self.size, self.owned = fd, start, size, owned

    def pieces(self, part_size: int) -> Iterator[Piece]:
        for number, (offset, length) in enumerate(split(self.size, part_size), start=1):
            body = RegionBody(self.fd, self.start + offset, length)
            yield Piece(_check_number(number), body, length)

    def close(self) -> None:
        if self.owned:
            self.owned = False
            os.close(self.fd)


class MemorySource:
    """Bytes already in memory, sliced; each part is copied only when it is produced."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.view = memoryview(data).cast("B")
        self.size = len(self.view)

    def pieces(self, part_size: int) -> Iterator[Piece]:
        for number, (offset, length) in enumerate(split(self.size, part_size), start=1):
            data = bytes(self.view[offset : offset + length])
            yield Piece(_check_number(number), MemoryBody(data), length)

    def close(self) -> None:
        self.view.release()


class ReaderSource:
    """A file object without a usable descriptor (``BytesIO``, a pipe): read in order."""

    size: int | None = None

    def __init__(self, file: BinaryIO) -> None:
        self.file = file

    def pieces(self, part_size: int) -> Iterator[Piece]:
        def chunks() -> Iterator[bytes]:
            while chunk := self.file.read(part_size):
                yield check_chunk(chunk)

        return _cut(chunks(), part_size)

    def close(self) -> None:
        """The caller opened the file and closes it."""


class IterSource:
    """An iterable of bytes chunks of any sizes."""

    size: int | None = None

    def __init__(self, iterable: Iterable[bytes]) -> None:
        self.iterable = iterable

    def pieces(self, part_size: int) -> Iterator[Piece]:
        return _cut((check_chunk(chunk) for chunk in self.iterable), part_size)

    def close(self) -> None:
        """Nothing to release."""


class AsyncIterSource:
    """An async iterable of bytes chunks (``AsyncServiceClient`` only)."""

    size: int | None = None

    def __init__(self, iterable: AsyncIterable[bytes]) -> None:
        self.iterable = iterable

    async def pieces(self, part_size: int) -> AsyncIterator[Piece]:
        cutter = Rechunker(part_size)
        async for chunk in self.iterable:
            for piece in cutter.feed(check_chunk(chunk)):
                yield piece
        last = cutter.finish()
        if last is not None:
            yield last

    def close(self) -> None:
        """Nothing to release."""


def _cut(chunks: Iterator[bytes], part_size: int) -> Iterator[Piece]:
    cutter = Rechunker(part_size)
    for chunk in chunks:
        yield from cutter.feed(chunk)
    last = cutter.finish()
    if last is not None:
        yield last


Source: TypeAlias = RegionSource | MemorySource | ReaderSource | IterSource | AsyncIterSource


def open_source(source: object) -> Source:
    """The part source for what the caller passed (blocking: opens and sizes files).

    A ``str`` is a path here (nobody multipart-uploads a literal string). A file object with
    a descriptor of a regular file is read by offset from its current position; other file
    objects are read in order.
    """
    if isinstance(source, str | os.PathLike):
        fd = os.open(os.fspath(source), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        return RegionSource(fd, 0, size, owned=True)
    if isinstance(source, bytes | bytearray | memoryview):
        return MemorySource(source)
    if hasattr(source, "read"):
        return _file_source(source)  # type: ignore[arg-type]
    if isinstance(source, AsyncIterable):
        return AsyncIterSource(source)
    if isinstance(source, Iterable):
        return IterSource(source)
    raise TypeError(
        "source must be a path, bytes, a binary file object or an (async) iterable of bytes, "
        f"not {type(source).__name__}"
    )


def _file_source(file: BinaryIO) -> RegionSource | ReaderSource:
    if isinstance(file, io.TextIOBase):
        raise TypeError("open the file in binary mode ('rb'): a text file yields str")
    try:
        fd = file.fileno()
        info = os.fstat(fd)
        regular = stat.S_ISREG(info.st_mode) and file.seekable()
    except (OSError, ValueError, io.UnsupportedOperation):
        return ReaderSource(file)
    if not regular:
        return ReaderSource(file)
    start = file.tell()
    return RegionSource(fd, start, max(0, info.st_size - start), owned=False)
