"""The two ends of a transfer: a local file or directory, or a remote object or prefix.

``resolve`` turns the command line's SOURCE and TARGET into endpoints, following rsync and
mc: a directory (or prefix) given without a trailing ``/`` is copied as itself (``cp -r
photos local/b`` makes ``local/b/photos/...``), with a trailing ``/`` as its contents; a
single file copied into a directory-like target (an existing directory, a path ending in
``/``, a bucket or a key ending in ``/``) keeps its name. ``mirror`` always pairs contents
with contents.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from service.cli.errors import EXIT_NOT_FOUND, EXIT_USAGE, CliError, about
from service.cli.paths import Location, RemotePath, join_key
from service.cli.transfer.walk import Entry, walk_local, walk_remote
from service.client import BucketClient

__all__ = ["BucketFor", "End", "LocalEnd", "RemoteEnd", "hash_file", "lookup", "resolve"]

HASH_CHUNK = 1024 * 1024


def hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class LocalEnd:
    """A local file (``single``) or the directory whose files are walked."""

    root: Path
    single: bool
    walk_errors: list[tuple[str, OSError]]

    def path(self, rel: str) -> Path:
        return self.root if self.single else self.root.joinpath(*rel.split("/"))

    def display(self, rel: str) -> str:
        return str(self.path(rel))

    def walk(self) -> Iterator[Entry]:
        if self.single:
            if self.root.is_file():
                stat = self.root.stat()
                yield Entry("", stat.st_size, None, stat.st_mtime)
        elif self.root.is_dir():
            yield from walk_local(self.root, self.walk_errors)


@dataclass
class RemoteEnd:
    """One object (``single``: ``remote.key``) or every object below ``prefix``."""

    bucket: BucketClient
    remote: RemotePath
    prefix: str
    single: bool

    def key(self, rel: str) -> str:
        return self.remote.key if self.single else self.prefix + rel

    def display(self, rel: str) -> str:
        return f"{self.remote.alias}/{self.remote.bucket}/{self.key(rel)}"

    def walk(self) -> Iterator[Entry]:
        with about(str(self.remote)):  # a missing bucket names the path it was given as
            if not self.single:
                yield from walk_remote(self.bucket, self.prefix)
                return
            entry = lookup(self.bucket, self.remote.key)
            if entry is not None:
                yield entry


End = LocalEnd | RemoteEnd
#: What ``resolve`` needs of the app: a bucket handle for a remote path.
BucketFor = Callable[[RemotePath], BucketClient]


def lookup(bucket: BucketClient, key: str) -> Entry | None:
    """The object ``key`` as an ``Entry`` (one listing request, which also gives its SHA-256)."""
    page = bucket.list_page(prefix=key, limit=1)
    if page.objects and page.objects[0].key == key:
        obj = page.objects[0]
        return Entry("", obj.size_bytes, obj.sha256_checksum, None)
    return None


def _dir_key(key: str) -> str:
    return key if not key or key.endswith("/") else key + "/"


def _last_segment(text: str) -> str:
    return text.rstrip("/").rsplit("/", 1)[-1]


def resolve(
    source: Location,
    source_text: str,
    target: Location,
    target_text: str,
    *,
    recursive: bool,
    contents: bool,
    bucket_for: BucketFor,
) -> tuple[End, End]:
    """The endpoints for SOURCE and TARGET (``contents``: mirror's contents-to-contents)."""
    if not isinstance(source, RemotePath) and not isinstance(target, RemotePath):
        raise CliError(target_text, "both paths are local: use cp(1) or rsync(1)", EXIT_USAGE)
    keep_name = not contents and not source_text.endswith("/")
    if isinstance(source, RemotePath):
        bucket = bucket_for(source)
        key = source.key
        single = bool(key) and not key.endswith("/")
        if single and not contents:
            with about(source_text):
                found = lookup(bucket, key) is not None
            if not found and not recursive:
                cause = f"NoSuchKey: no object {key!r} in bucket {source.bucket!r}"
                raise CliError(source_text, cause, EXIT_NOT_FOUND)
            single = found
        if contents:
            single = False
        source_end: End = RemoteEnd(bucket, source, "" if single else _dir_key(key), single)
        name = _last_segment(key or source.bucket)
    else:
        if not source.exists():
            raise CliError(source_text, "No such file or directory", EXIT_NOT_FOUND)
        single = not source.is_dir()
        if not single and not recursive:
            raise CliError(source_text, "is a directory (use -r)", EXIT_USAGE)
        source_end = LocalEnd(source, single, [])
        name = source.resolve().name
    if not single and not recursive:
        raise CliError(source_text, "is a prefix (use -r)", EXIT_USAGE)
    target_name = name if keep_name or single else ""
    return source_end, _target(target, target_text, single, target_name, bucket_for)


def _target(target: Location, text: str, single: bool, name: str, bucket_for: BucketFor) -> End:
    if isinstance(target, RemotePath):
        if not target.bucket:
            raise CliError(text, "names no bucket: expected ALIAS/BUCKET[/KEY]", EXIT_USAGE)
        bucket = bucket_for(target)
        if single:
            key = target.key + name if target.is_prefix else target.key
            return RemoteEnd(bucket, RemotePath(target.alias, target.bucket, key), "", True)
        prefix = _dir_key(join_key(_dir_key(target.key), name) if name else target.key)
        return RemoteEnd(bucket, target, prefix, False)
    if single:
        into = text.endswith(("/", os.sep)) or target.is_dir()
        return LocalEnd(target / name if into else target, True, [])
    return LocalEnd(target / name if name else target, False, [])
