"""A payload file opened through the file-system seam, as the file object decoders read.

Pillow and PyAV both want a Python binary file (``read``, ``seek`` with ``whence``,
``tell``); the seam's ``ReadableFile`` has plain ``read``/``seek``/``size``. One adapter
serves both, so payload bytes reach a decoder without being read whole into memory.

Thread-safety: one reader per decode, used by one thread.
"""

from __future__ import annotations

from typing import Protocol


class RandomAccessFile(Protocol):
    """What the media decoders need of a payload file (``fsseam.fs.ReadableFile`` has it)."""

    def read(self, size: int = -1) -> bytes: ...

    def seek(self, offset: int) -> None: ...

    def size(self) -> int: ...


class SeamFileReader:
    """A ``RandomAccessFile`` as the binary file object Pillow and PyAV expect (``seek`` with
    ``whence``, ``tell``). Remembers a failure of the underlying file, so a disk error is
    not mistaken for an undecodable image or video."""

    def __init__(self, source: RandomAccessFile) -> None:
        self._source = source
        self._position = 0
        self.failure: OSError | None = None

    def read(self, size: int | None = -1) -> bytes:
        try:
            data = self._source.read(-1 if size is None else size)
        except OSError as exc:
            self.failure = exc
            raise
        self._position += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 1:
            offset += self._position
        elif whence == 2:
            offset += self._source.size()
        if offset < 0:
            raise ValueError("negative seek position")
        try:
            self._source.seek(offset)
        except OSError as exc:
            self.failure = exc
            raise
        self._position = offset
        return offset

    def tell(self) -> int:
        return self._position

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True
