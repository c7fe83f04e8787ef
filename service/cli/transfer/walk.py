"""The two sides of a transfer as streams of ``Entry`` in key order.

Key order is code-point order of the ``/``-joined relative path, which is also UTF-8 byte
order, the order of the server's listings. A local directory is read and sorted one directory
at a time; a sub-directory sorts as ``name/``, so its files come exactly where their keys
fall (``a-b`` < ``a/x`` < ``a0``). A remote prefix is listed a page at a time. So neither walk
holds more than one directory or one page in memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from service.client import BucketClient

__all__ = ["Entry", "walk_local", "walk_remote"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One file or object: ``rel`` is its ``/``-separated path below the walked root."""

    rel: str
    size: int
    sha256: str | None = None  # known for objects; computed on demand for local files
    mtime: float | None = None


def walk_local(root: Path, errors: list[tuple[str, OSError]] | None = None) -> Iterator[Entry]:
    """Every regular file below ``root`` in key order. Symbolic links to files are followed,
    links to directories are not (no cycles). A directory that cannot be read is reported in
    ``errors`` (when given) and skipped."""
    yield from _walk(str(root), "", errors)


def _walk(directory: str, prefix: str, errors: list[tuple[str, OSError]] | None) -> Iterator[Entry]:
    try:
        with os.scandir(directory) as scan:
            names = []
            for item in scan:
                is_dir = item.is_dir(follow_symlinks=False)
                names.append((item.name + "/" if is_dir else item.name, is_dir, item))
    except OSError as error:
        if errors is None:
            raise
        errors.append((directory, error))
        return
    names.sort(key=lambda row: row[0])
    for _, is_dir, item in names:
        rel = prefix + item.name
        if is_dir:
            yield from _walk(item.path, rel + "/", errors)
            continue
        try:
            if not item.is_file():
                continue  # sockets, fifos, dangling links
            stat = item.stat()
        except OSError as error:
            if errors is None:
                raise
            errors.append((item.path, error))
            continue
        yield Entry(rel, stat.st_size, None, stat.st_mtime)


def walk_remote(bucket: BucketClient, prefix: str) -> Iterator[Entry]:
    """Every object whose key starts with ``prefix``, relative to it, a page at a time."""
    for obj in bucket.list(prefix=prefix or None, page_size=1000):
        yield Entry(obj.key[len(prefix) :], obj.size_bytes, obj.sha256_checksum, None)
