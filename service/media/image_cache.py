"""Derived image variants on disk: ``<data_dir>/cache/images/``, bounded, atomic, verified.

A variant is keyed by the SHA-256 of its source's bytes and the canonical form of the
transform's parameters (``variant_key``): an overwritten source has a new SHA-256, so it
can never be answered with a stale variant, and identical sources share their variants.

One flat directory; a file's name holds everything the cache knows of it, so the index is
rebuilt from a listing alone::

    <key>.<sha256 of the variant>.<width>x<height>.<format>

Writes go to a temporary ``.<key>.<random>.tmp`` and are renamed into place, so a reader sees
a whole variant or none. There is no fsync: a variant is derived data. Instead every read
hashes the bytes (the hash is the variant's ETag anyway) and a file that does not match its
name, torn by a power loss, is removed and recomputed rather than served. A cache directory
deleted by an operator is simply recreated by the next write.

The bound: the index (least recently used first) keeps the total size of the files at most
``max_bytes``; admitting a variant evicts the least recently used ones. Use is tracked in
memory; at startup the order is rebuilt from the files' mtimes (oldest first), so "least
recently used" means "least recently used in this run, then oldest written". A variant
larger than a quarter of the bound is served but not kept.

Thread-safety: ``lookup``, ``forget``, ``admit`` and ``load`` touch the index and belong to the
event-loop thread; ``scan``, ``read``, ``write`` and ``remove`` do file I/O through the
file-system seam and belong to an executor thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from fsseam.fs import FileSystem
from service.media.image_params import FORMATS, ImageFormat, ImageParams

log = logging.getLogger("service.media")

CACHE_SUBDIR = os.path.join("cache", "images")
"""The cache's directory, relative to the data dir."""
_TEMP_SUFFIX = ".tmp"
_NAME = re.compile(
    r"^(?P<key>[0-9a-f]{64})\.(?P<sha256>[0-9a-f]{64})\.(?P<width>[0-9]{1,9})x"
    r"(?P<height>[0-9]{1,9})\.(?P<format>[a-z]{3,4})$"
)
_LARGEST_SHARE = 4
"""A variant larger than ``max_bytes / _LARGEST_SHARE`` is not kept (it would flush the rest)."""


def variant_key(source_sha256: str, params: ImageParams) -> str:
    """The cache key of the variant ``params`` make of the source with this SHA-256."""
    token = f"{source_sha256}\n{params.cache_token()}".encode()
    return hashlib.sha256(token).hexdigest()


@dataclass(frozen=True, slots=True)
class CachedVariant:
    """One file of the cache, as its name describes it."""

    key: str
    sha256: str
    width: int
    height: int
    format: ImageFormat
    size: int

    @property
    def filename(self) -> str:
        return f"{self.key}.{self.sha256}.{self.width}x{self.height}.{self.format}"

    @classmethod
    def parse(cls, name: str, size: int) -> CachedVariant | None:
        """The variant a file name describes, or None for any other name."""
        match = _NAME.match(name)
        if match is None or match["format"] not in FORMATS:
            return None
        return cls(
            key=match["key"],
            sha256=match["sha256"],
            width=int(match["width"]),
            height=int(match["height"]),
            format=cast(ImageFormat, match["format"]),
            size=size,
        )


class ImageCache:
    """The variants on disk and their in-memory index (see the module docstring)."""

    def __init__(self, fs: FileSystem, directory: str, max_bytes: int) -> None:
        self._fs = fs
        self.directory = directory
        self.max_bytes = max_bytes
        self._index: OrderedDict[str, CachedVariant] = OrderedDict()
        self.total_bytes = 0

    # -- the index (event-loop thread) --------------------------------------------------

    def __len__(self) -> int:
        return len(self._index)

    def load(self, variants: Iterable[CachedVariant]) -> list[CachedVariant]:
        """Fill the index with ``variants`` (oldest first); return those over the bound or
        superseded, for the caller to ``remove``."""
        evicted: list[CachedVariant] = []
        for variant in variants:
            evicted.extend(self.admit(variant))
        return evicted

    def lookup(self, key: str) -> CachedVariant | None:
        """The cached variant of ``key``, now the most recently used, or None."""
        variant = self._index.get(key)
        if variant is not None:
            self._index.move_to_end(key)
        return variant

    def forget(self, key: str) -> None:
        """Drop ``key`` from the index (its file is gone or was damaged)."""
        variant = self._index.pop(key, None)
        if variant is not None:
            self.total_bytes -= variant.size

    def keeps(self, size: int) -> bool:
        """Whether a variant of ``size`` bytes is worth writing."""
        return size <= self.max_bytes // _LARGEST_SHARE

    def admit(self, variant: CachedVariant) -> list[CachedVariant]:
        """Index a written variant as the most recently used; return the variants evicted
        to stay within the bound (their files are the caller's to ``remove``)."""
        evicted: list[CachedVariant] = []
        previous = self._index.pop(variant.key, None)
        if previous is not None:
            self.total_bytes -= previous.size
            if previous.filename != variant.filename:
                evicted.append(previous)
        self._index[variant.key] = variant
        self.total_bytes += variant.size
        while self.total_bytes > self.max_bytes and self._index:
            _, oldest = self._index.popitem(last=False)
            self.total_bytes -= oldest.size
            evicted.append(oldest)
        return evicted

    # -- files (executor thread) ----------------------------------------------------------

    def scan(self) -> list[CachedVariant]:
        """The variants on disk, oldest first; temporary files a crash left are removed.
        Blocking."""
        try:
            names = self._fs.listdir(self.directory)
        except FileNotFoundError:
            return []
        found: list[tuple[float, CachedVariant]] = []
        for name in names:
            path = os.path.join(self.directory, name)
            if name.startswith(".") and name.endswith(_TEMP_SUFFIX):
                with contextlib.suppress(OSError):
                    self._fs.unlink(path)
                continue
            try:
                stat = self._fs.stat(path)
            except FileNotFoundError:
                continue
            variant = CachedVariant.parse(name, stat.size)
            if variant is not None and not stat.is_dir:
                found.append((stat.mtime, variant))
        found.sort(key=lambda item: (item[0], item[1].key))
        return [variant for _, variant in found]

    def read(self, variant: CachedVariant) -> bytes | None:
        """The variant's bytes, or None when the file is gone or does not match its name
        (then it is removed). Blocking."""
        path = os.path.join(self.directory, variant.filename)
        try:
            source = self._fs.open_read(path)
        except FileNotFoundError:
            return None
        try:
            data = source.read()
        finally:
            source.close()
        if hashlib.sha256(data).hexdigest() != variant.sha256:
            log.warning("image cache: %s does not match its digest; removed", variant.filename)
            with contextlib.suppress(OSError):
                self._fs.unlink(path)
            return None
        return data

    def write(
        self, key: str, data: bytes, sha256: str, width: int, height: int, fmt: ImageFormat
    ) -> CachedVariant:
        """Store a variant atomically and return its entry (not yet indexed). Blocking."""
        variant = CachedVariant(key, sha256, width, height, fmt, len(data))
        temp = os.path.join(self.directory, f".{key}.{secrets.token_hex(4)}{_TEMP_SUFFIX}")
        try:
            handle = self._fs.create(temp)
        except FileNotFoundError:
            self._fs.mkdir(self.directory)  # first write, or an operator deleted the cache
            handle = self._fs.create(temp)
        try:
            try:
                handle.write(data)
            finally:
                handle.close()
            # Atomic: a reader sees the whole variant or none. No fsync: reads verify the
            # digest in the name, so a file torn by a power loss is recomputed, not served.
            self._fs.rename(temp, os.path.join(self.directory, variant.filename))
        except BaseException:
            with contextlib.suppress(OSError):
                self._fs.unlink(temp)
            raise
        return variant

    def remove(self, variants: Iterable[CachedVariant]) -> None:
        """Delete the files of evicted variants (already gone is fine). Blocking."""
        for variant in variants:
            with contextlib.suppress(FileNotFoundError):
                self._fs.unlink(os.path.join(self.directory, variant.filename))
