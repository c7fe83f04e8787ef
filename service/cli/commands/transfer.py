"""``svc cp``, ``mv`` and ``mirror``: the command-line face of ``service.cli.transfer``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from service.cli.app import App, pass_app
from service.cli.paths import parse_location
from service.cli.sizes import parse_size
from service.cli.transfer.endpoints import resolve
from service.cli.transfer.engine import Options, Transfer
from service.cli.transfer.progress import NullProgress
from service.cli.transfer.resume import ResumeStore

__all__ = ["commands"]


def _tuning(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options every transfer shares."""
    for option in reversed(
        [
            click.option(
                "--jobs",
                type=click.IntRange(1, 64),
                default=8,
                show_default=True,
                help="Files in flight at once.",
            ),
            click.option(
                "--parts",
                type=click.IntRange(1, 32),
                default=None,
                help="Parallel parts per large file (default: the server's advice).",
            ),
            click.option(
                "--part-size",
                metavar="SIZE",
                help="Multipart part size (default: 32MiB, or the server's advice if larger).",
            ),
            click.option(
                "--multipart-threshold",
                metavar="SIZE",
                default="64MiB",
                show_default=True,
                help="Files this large or larger go up in parallel parts, resumably.",
            ),
            click.option(
                "--no-batch",
                is_flag=True,
                help="Send every file with its own request (default: files under 1 MiB go "
                "up many to a request, for servers and proxies that refuse batch uploads).",
            ),
        ]
    ):
        function = option(function)
    return function


def _run(
    app: App,
    source_text: str,
    target_text: str,
    *,
    recursive: bool,
    contents: bool,
    label: str,
    tuning: dict[str, Any],
    **options: Any,
) -> int:
    source = parse_location(source_text, app.aliases)
    target = parse_location(target_text, app.aliases)
    source_end, target_end = resolve(
        source,
        source_text,
        target,
        target_text,
        recursive=recursive,
        contents=contents,
        bucket_for=app.bucket,
    )
    part_size = tuning["part_size"]
    settings = Options(
        jobs=tuning["jobs"],
        parallel_parts=tuning["parts"],
        part_size=parse_size(part_size) if part_size else None,
        multipart_threshold=parse_size(tuning["multipart_threshold"]),
        batch=not tuning["no_batch"],
        **options,
    )
    show = app.output.tty and sys.stderr.isatty() and not app.output.json
    if show:
        from service.cli.transfer.bar import BarProgress  # rich, only on a terminal

        progress: NullProgress = BarProgress(label)
    else:
        progress = NullProgress()
    store = ResumeStore(app.config_dir / "uploads")
    return Transfer(source_end, target_end, settings, app.output, store, progress).run()


@click.command()
@click.argument("source")
@click.argument("target")
@click.option("-r", "--recursive", is_flag=True, help="Copy directories and prefixes.")
@_tuning
@pass_app
def cp(app: App, /, source: str, target: str, recursive: bool, **tuning: Any) -> int:
    """Copy SOURCE to TARGET: local to remote, remote to local, or remote to remote.

    Files the target already holds with the same size and SHA-256 are skipped, so running
    an interrupted copy again finishes it; a large file's unfinished multipart upload goes
    on from the parts already stored. A directory without a trailing / is copied as
    itself, with one as its contents.

    \b
    Examples:
      svc cp cat.jpg local/photos/
      svc cp -r ~/Pictures local/photos/          # makes photos/Pictures/...
      svc cp -r ~/Pictures/ local/photos/2026/    # the contents of Pictures
      svc cp local/photos/cat.jpg ./cat.jpg
      svc cp -r local/photos/2026/ backup/photos/2026/
    """
    return _run(app, source, target, recursive=recursive, contents=False, label="cp", tuning=tuning)


@click.command()
@click.argument("source")
@click.argument("target")
@click.option("-r", "--recursive", is_flag=True, help="Move directories and prefixes.")
@_tuning
@pass_app
def mv(app: App, /, source: str, target: str, recursive: bool, **tuning: Any) -> int:
    """Move SOURCE to TARGET: copy (as cp), then remove each source file or object once the
    target holds it.

    \b
    Examples:
      svc mv report.pdf local/docs/
      svc mv -r local/inbox/ local/archive/2026/
    """
    return _run(
        app,
        source,
        target,
        recursive=recursive,
        contents=False,
        label="mv",
        tuning=tuning,
        move=True,
    )


@click.command()
@click.argument("source")
@click.argument("target")
@click.option("--remove", is_flag=True, help="Delete target files the source does not have.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip paths matching GLOB.")
@_tuning
@pass_app
def mirror(
    app: App, /, source: str, target: str, remove: bool, exclude: tuple[str, ...], **tuning: Any
) -> int:
    """Make TARGET hold what SOURCE holds: copy only what differs by size and SHA-256.

    Both trees are walked as sorted streams and compared key by key, so memory stays
    bounded for any number of files. --exclude matches the relative path or the file name
    (repeatable); excluded target files are never removed.

    \b
    Examples:
      svc mirror ./site local/www
      svc mirror --remove --exclude '*.tmp' --exclude '.git/*' ./project local/backup/project
      svc mirror local/photos ./photos-copy
    """
    return _run(
        app,
        source,
        target,
        recursive=True,
        contents=True,
        label="mirror",
        tuning=tuning,
        remove=remove,
        excludes=exclude,
    )


def commands() -> list[click.Command]:
    return [cp, mv, mirror]
