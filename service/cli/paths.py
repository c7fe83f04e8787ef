"""Telling a remote path (``ALIAS/BUCKET/KEY``) from a local one.

A path is remote when its first segment names a known alias (``env`` counts while
``SVC_URL`` is set); anything else is a local path. To name a local directory that shares an
alias's name, write ``./NAME``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from service.cli.config import AliasStore
from service.cli.errors import EXIT_USAGE, CliError

__all__ = ["Location", "RemotePath", "join_key", "parse_location", "require_remote"]


@dataclass(frozen=True)
class RemotePath:
    """``alias/bucket/key``; ``bucket`` is empty for the alias itself, ``key`` for a bucket."""

    alias: str
    bucket: str = ""
    key: str = ""

    def __str__(self) -> str:
        text = self.alias
        if self.bucket:
            text += "/" + self.bucket
            if self.key:
                text += "/" + self.key
        return text

    @property
    def is_prefix(self) -> bool:
        """Whether the path names a folder-like prefix (the bucket itself or ``.../``)."""
        return not self.key or self.key.endswith("/")

    def child(self, relative: str) -> RemotePath:
        return RemotePath(self.alias, self.bucket, join_key(self.key, relative))


Location = RemotePath | Path


def join_key(prefix: str, relative: str) -> str:
    """``prefix`` and ``relative`` joined by exactly one ``/`` (``prefix`` may be empty)."""
    if not prefix:
        return relative
    return prefix.rstrip("/") + "/" + relative if relative else prefix


def parse_location(text: str, aliases: AliasStore) -> Location:
    """``text`` as a remote path when its first segment is an alias, else a local path."""
    head, _, rest = text.partition("/")
    if head and aliases.has(head):
        bucket, _, key = rest.partition("/")
        return RemotePath(head, bucket, key)
    return Path(text)


def require_remote(
    text: str, aliases: AliasStore, *, bucket: bool = True, key: bool = False
) -> RemotePath:
    """``text`` as a remote path, or a usage error naming it. ``key``: it must name one
    object (``ALIAS/BUCKET/KEY``, not a bucket or a prefix ending in ``/``)."""
    location = parse_location(text, aliases)
    if not isinstance(location, RemotePath):
        known = ", ".join(aliases.names()) or "none; add one with `svc alias set`"
        raise CliError(text, f"not a remote path ALIAS/BUCKET[/KEY] (aliases: {known})", EXIT_USAGE)
    if bucket and not location.bucket:
        raise CliError(text, "names no bucket: expected ALIAS/BUCKET[/KEY]", EXIT_USAGE)
    if key and location.is_prefix:
        raise CliError(text, "names no key: expected ALIAS/BUCKET/KEY", EXIT_USAGE)
    return location
