"""``svc cat``, ``pipe`` and ``rm``: one object's bytes in and out, and deletions."""

from __future__ import annotations

import datetime
import io
import sys
from collections.abc import Callable, Iterator
from typing import cast

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_NOT_FOUND, EXIT_OK, EXIT_PARTIAL, CliError, about
from service.cli.paths import RemotePath, require_remote
from service.cli.transfer.pool import run_bounded

__all__ = ["commands"]

STDIN_CHUNK = 1024 * 1024


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--version-id", help="Read this version instead of the current one.")
@pass_app
def cat(app: App, paths: tuple[str, ...], version_id: str | None) -> None:
    """Write objects to stdout, one after the other (streamed, checked by SHA-256).

    \b
    Examples:
      svc cat local/logs/today.txt | grep ERROR
      svc cat local/backups/db.sql.gz | gunzip | psql
    """
    sink = sys.stdout.buffer
    for path in paths:
        remote = require_remote(path, app.aliases, key=True)
        with about(path), app.bucket(remote).get(remote.key, version_id=version_id) as obj:
            for chunk in obj.iter_bytes():
                sink.write(chunk)
        sink.flush()


def _stdin_chunks() -> Iterator[bytes]:
    source = cast(io.BufferedReader, sys.stdin.buffer)
    while chunk := source.read1(STDIN_CHUNK):
        yield chunk


@click.command()
@click.argument("path")
@click.option("--content-type", help="The object's media type (default: from the key).")
@pass_app
def pipe(app: App, path: str, content_type: str | None) -> None:
    """Store stdin as object ALIAS/BUCKET/KEY (streamed: any size, constant memory).

    \b
    Examples:
      pg_dump mydb | gzip | svc pipe local/backups/mydb.sql.gz
      echo hello | svc pipe --content-type text/plain local/notes/hello.txt
    """
    remote = require_remote(path, app.aliases, key=True)
    with about(path):
        obj = app.bucket(remote).put(remote.key, _stdin_chunks(), content_type=content_type)
    app.output.result(obj, f"`stdin` -> `{remote}` ({obj.size_bytes} bytes)")


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-r", "--recursive", is_flag=True, help="Everything below a prefix or bucket.")
@click.option("--versions", is_flag=True, help="Every version, not just the current one.")
@click.option("--older-than", type=float, metavar="DAYS", help="Only what changed over DAYS ago.")
@click.option("--jobs", type=click.IntRange(1, 64), default=8, show_default=True)
@pass_app
def rm(
    app: App,
    paths: tuple[str, ...],
    recursive: bool,
    versions: bool,
    older_than: float | None,
    jobs: int,
) -> int:
    """Remove objects. With versioning on, a plain rm leaves a delete marker; --versions
    removes the versions themselves (for good).

    \b
    Examples:
      svc rm local/photos/cat.jpg
      svc rm -r local/tmp/
      svc rm -r --older-than 30 local/logs/
      svc rm --versions local/docs/report.pdf
    """
    failed = 0
    cutoff = None
    if older_than is not None:
        cutoff = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=older_than)
    for path in paths:
        remote = require_remote(path, app.aliases)
        if not recursive and remote.is_prefix:
            raise CliError(path, "is a bucket or prefix (use -r)", 2)
        failed += _remove(app, remote, path, recursive, versions, cutoff, jobs)
    return EXIT_PARTIAL if failed else EXIT_OK


def _remove(
    app: App,
    remote: RemotePath,
    path: str,
    recursive: bool,
    versions: bool,
    cutoff: datetime.datetime | None,
    jobs: int,
) -> int:
    """Delete what ``path`` names; the number of failures (reported as they happen)."""
    bucket = app.bucket(remote)
    if not recursive and not versions and cutoff is None:
        with about(path):
            deleted = bucket.delete(remote.key)
        if not deleted:
            raise CliError(path, "NoSuchKey", EXIT_NOT_FOUND)
        _removed(app, path, None)
        return 0
    name = f"{remote.alias}/{remote.bucket}/"
    found = [0, 0]  # matched, failed

    def targets() -> Iterator[Callable[[], tuple[str, str | None]]]:
        with about(path):
            if versions:
                for version in bucket.list_versions(prefix=remote.key or None):
                    if not recursive and version.key != remote.key:
                        continue
                    if cutoff is not None and version.updated_at >= cutoff:
                        continue
                    found[0] += 1
                    version_id = version.version_id or "null"  # the one from before versioning
                    yield _deleter(bucket.delete, name, version.key, version_id)
                return
            if not recursive:
                first = bucket.list_page(prefix=remote.key, limit=1).objects
                old = cutoff is not None and bool(first) and first[0].updated_at < cutoff
                if first and first[0].key == remote.key and old:
                    found[0] += 1
                    yield _deleter(bucket.delete, name, remote.key, None)
                return
            for obj in bucket.list(prefix=remote.key or None):
                if cutoff is not None and obj.updated_at >= cutoff:
                    continue
                found[0] += 1
                yield _deleter(bucket.delete, name, obj.key, None)

    def done(result: tuple[str, str | None] | None, error: BaseException | None) -> None:
        if error is not None or result is None:
            found[1] += 1
            subject = error.subject if isinstance(error, CliError) else path
            app.output.failure(subject, error)
            return
        _removed(app, result[0], result[1])

    run_bounded(targets(), jobs, done)
    if not found[0] and not recursive:
        raise CliError(path, "NoSuchKey: nothing matches", EXIT_NOT_FOUND)
    return found[1]


def _removed(app: App, name: str, version_id: str | None) -> None:
    document = {"status": "removed", "target": name, "version_id": version_id}
    shown = f"{name} (version {version_id})" if version_id else name
    app.output.result(document, f"Removed `{shown}`.")


def _deleter(
    delete: Callable[..., bool], base: str, key: str, version_id: str | None
) -> Callable[[], tuple[str, str | None]]:
    """A task deleting ``key`` (one version of it when ``version_id``)."""

    def run() -> tuple[str, str | None]:
        with about(base + key):
            deleted = delete(key, version_id=version_id) if version_id else delete(key)
        if not deleted:
            raise CliError(base + key, "NoSuchKey", EXIT_NOT_FOUND)
        return base + key, version_id

    return run


def commands() -> list[click.Command]:
    return [cat, pipe, rm]
