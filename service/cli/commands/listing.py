"""``svc ls``, ``find``, ``du`` and ``stat``: looking at what is stored, page by page.

Every listing streams: a page of at most 1,000 keys is printed before the next is asked
for, so ``ls -r`` of a million keys holds one page.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
from collections.abc import Iterator

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_NOT_FOUND, CliError, about
from service.cli.output import timestamp, to_json
from service.cli.paths import RemotePath, require_remote
from service.cli.sizes import format_size, parse_size
from service.client import BucketClient, Object

__all__ = ["commands"]


def _folder(bucket: BucketClient, key: str) -> str:
    """``key`` as the listing prefix: ``photos`` means ``photos/`` when that is a folder and
    no object is called ``photos``."""
    if not key or key.endswith("/"):
        return key
    page = bucket.list_page(prefix=key, delimiter="/", limit=2)
    if key + "/" in page.common_prefixes and not any(o.key == key for o in page.objects):
        return key + "/"
    return key


def _object_line(obj: Object, name: str) -> str:
    return f"[{timestamp(obj.updated_at)}] {format_size(obj.size_bytes):>10}  {name}"


@click.command()
@click.argument("path")
@click.option("-r", "--recursive", is_flag=True, help="Every key below PATH, not one level.")
@click.option("--versions", is_flag=True, help="Every version, delete markers included.")
@pass_app
def ls(app: App, path: str, recursive: bool, versions: bool) -> None:
    """List buckets (PATH = ALIAS), or objects and folders below ALIAS/BUCKET[/PREFIX].

    \b
    Examples:
      svc ls local
      svc ls local/photos/2026/
      svc ls -r --json local/photos | jq -r .key
      svc ls --versions local/docs/report.pdf
    """
    remote = require_remote(path, app.aliases, bucket=False)
    output = app.output
    with about(path):
        if not remote.bucket:
            for info in app.client(remote.alias).buckets.list():
                text = (
                    f"[{timestamp(info.created_at)}] "
                    f"{format_size(info.usage.size_bytes):>10}  {info.name}/"
                )
                output.result(info, text)
            return
        bucket = app.bucket(remote)
        prefix = _folder(bucket, remote.key)
        base = prefix[: prefix.rfind("/") + 1]
        shown = _versions(app, bucket, prefix, base, recursive) if versions else 0
        if not versions:
            for page in bucket.list_pages(
                prefix=prefix or None, delimiter=None if recursive else "/"
            ):
                items: list[Object | str] = [*page.objects, *page.common_prefixes]
                items.sort(key=lambda item: item if isinstance(item, str) else item.key)
                for item in items:
                    shown += 1
                    if isinstance(item, str):
                        output.result({"prefix": item}, f"{'':21} {'PRE':>10}  {item[len(base) :]}")
                    else:
                        output.result(item, _object_line(item, item.key[len(base) :]))
    if not shown and remote.key:
        raise CliError(path, "NoSuchKey: nothing matches", EXIT_NOT_FOUND)


def _versions(app: App, bucket: BucketClient, prefix: str, base: str, recursive: bool) -> int:
    shown = 0
    for version in bucket.list_versions(prefix=prefix or None):
        name = version.key[len(base) :]
        if not recursive and "/" in name:
            continue
        shown += 1
        flags = ("latest " if version.is_latest else "") + (
            "delete-marker" if version.is_delete_marker else ""
        )
        text = f"{_object_line(version, name)}  {version.version_id or 'null'} {flags}".rstrip()
        app.output.result(version, text)
    return shown


def _walk(app: App, path: str) -> tuple[RemotePath, Iterator[Object]]:
    remote = require_remote(path, app.aliases)
    bucket = app.bucket(remote)
    return remote, bucket.list(prefix=_folder(bucket, remote.key) or None)


def _days_ago(days: float) -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=days)


@click.command()
@click.argument("path")
@click.option("--name", "pattern", metavar="GLOB", help="Key's last segment matches GLOB.")
@click.option("--larger", metavar="SIZE", help="Bigger than SIZE (e.g. 10MiB).")
@click.option("--smaller", metavar="SIZE", help="Smaller than SIZE.")
@click.option("--older-than", type=float, metavar="DAYS", help="Last changed over DAYS ago.")
@click.option("--newer-than", type=float, metavar="DAYS", help="Changed within DAYS.")
@pass_app
def find(
    app: App,
    path: str,
    pattern: str | None,
    larger: str | None,
    smaller: str | None,
    older_than: float | None,
    newer_than: float | None,
) -> None:
    """Find objects below ALIAS/BUCKET[/PREFIX] matching every condition given.

    \b
    Examples:
      svc find local/photos --name '*.jpg' --larger 5MiB
      svc find local/logs --older-than 30 --json
    """
    low = parse_size(larger) if larger else None
    high = parse_size(smaller) if smaller else None
    before = _days_ago(older_than) if older_than is not None else None
    after = _days_ago(newer_than) if newer_than is not None else None
    remote, objects = _walk(app, path)
    with about(path):
        for obj in objects:
            name = obj.key.rsplit("/", 1)[-1]
            if pattern and not fnmatch.fnmatchcase(name, pattern):
                continue
            if (low is not None and obj.size_bytes <= low) or (
                high is not None and obj.size_bytes >= high
            ):
                continue
            if (before and obj.updated_at >= before) or (after and obj.updated_at < after):
                continue
            app.output.result(obj, f"{remote.alias}/{remote.bucket}/{obj.key}")


@click.command()
@click.argument("path")
@pass_app
def du(app: App, path: str) -> None:
    """Disk usage: bytes and objects below ALIAS/BUCKET[/PREFIX], or per bucket of ALIAS.

    \b
    Examples:
      svc du local
      svc du local/photos/2026/
    """
    remote = require_remote(path, app.aliases, bucket=False)
    with about(path):
        if not remote.bucket:
            for info in app.client(remote.alias).buckets.list():
                usage = info.usage
                name = f"{remote.alias}/{info.name}"
                document = {"path": name, "size_bytes": usage.size_bytes}
                document["object_count"] = usage.object_count
                text = f"{format_size(usage.size_bytes)}\t{usage.object_count} objects\t{name}"
                app.output.result(document, text)
            return
        _, objects = _walk(app, path)
        size = count = 0
        for obj in objects:
            size += obj.size_bytes
            count += 1
    document = {"path": str(remote), "size_bytes": size, "object_count": count}
    app.output.result(document, f"{format_size(size)}\t{count} objects\t{remote}")


@click.command()
@click.argument("path")
@pass_app
def stat(app: App, path: str) -> None:
    """Details of an object, a bucket (ALIAS/BUCKET) or a server (ALIAS).

    \b
    Examples:
      svc stat local/photos/cat.jpg
      svc stat local/photos
      svc stat local --json
    """
    remote = require_remote(path, app.aliases, bucket=False)
    with about(path):
        if not remote.bucket:
            info = app.client(remote.alias).system_info()
            _fields(app, {"alias": remote.alias, **info})
            return
        bucket = app.bucket(remote)
        if not remote.key:
            _fields(app, bucket.info())
            return
        page = bucket.list_page(prefix=remote.key, limit=1)
    if not page.objects or page.objects[0].key != remote.key:
        raise CliError(path, "NoSuchKey", EXIT_NOT_FOUND)
    _fields(app, page.objects[0])


def _fields(app: App, document: object) -> None:
    """A result as ``name: value`` lines (text) or one JSON document."""
    if app.output.json:
        app.output.result(document)
        return
    flat = json.loads(to_json(document))
    width = max((len(name) for name in flat), default=0)
    for name, value in flat.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        app.output.line(f"{name + ':':<{width + 1}} {shown}")


def commands() -> list[click.Command]:
    return [ls, find, du, stat]
