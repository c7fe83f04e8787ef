"""``svc mb`` and ``svc rb``: make and remove buckets."""

from __future__ import annotations

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_USAGE, CliError, about
from service.cli.paths import require_remote
from service.cli.sizes import parse_size

__all__ = ["commands"]


@click.command()
@click.argument("path")
@click.option("--versioning", is_flag=True, help="Keep every version of each object.")
@click.option("--quota", metavar="SIZE", help="Refuse writes past SIZE bytes (e.g. 10GiB).")
@pass_app
def mb(app: App, path: str, versioning: bool, quota: str | None) -> None:
    """Make bucket ALIAS/BUCKET.

    \b
    Examples:
      svc mb local/photos
      svc mb --versioning --quota 10GiB local/backups
    """
    remote = require_remote(path, app.aliases)
    if remote.key:
        raise CliError(path, "a bucket name has no /: expected ALIAS/BUCKET", EXIT_USAGE)
    quota_bytes = parse_size(quota) if quota else None
    with about(path):
        bucket = app.client(remote.alias).buckets.create(
            remote.bucket, quota_bytes=quota_bytes, versioning_enabled=versioning or None
        )
    app.output.result(bucket, f"Bucket created `{remote}`.")


@click.command()
@click.argument("path")
@click.option("--force", is_flag=True, help="Also delete every object (and version) in it.")
@pass_app
def rb(app: App, path: str, force: bool) -> None:
    """Remove bucket ALIAS/BUCKET (it must be empty unless --force).

    \b
    Examples:
      svc rb local/scratch
      svc rb --force local/old-logs
    """
    remote = require_remote(path, app.aliases)
    if remote.key:
        raise CliError(path, "a bucket name has no /: expected ALIAS/BUCKET", EXIT_USAGE)
    with about(path):
        app.client(remote.alias).buckets.delete(remote.bucket, force=force)
    app.output.result({"status": "success", "bucket": remote.bucket}, f"Removed `{remote}`.")


def commands() -> list[click.Command]:
    return [mb, rb]
