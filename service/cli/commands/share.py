"""``svc share get|put``: presigned URLs that work without credentials until they expire."""

from __future__ import annotations

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_USAGE, CliError, about
from service.cli.output import timestamp
from service.cli.paths import require_remote
from service.cli.sizes import parse_duration

__all__ = ["commands"]

MAX_EXPIRY = 604_800  # the contract's limit: 7 days


@click.group(name="share")
def share_group() -> None:
    """Print a presigned URL for one object (GET to download, PUT to upload)."""


def _expiry(text: str) -> int:
    seconds = parse_duration(text)
    if not 1 <= seconds <= MAX_EXPIRY:
        raise CliError(text, "the expiry must be from 1 s to 7 days", EXIT_USAGE)
    return seconds


def _share(app: App, path: str, method: str, expire: str, content_type: str | None) -> None:
    remote = require_remote(path, app.aliases, key=True)
    seconds = _expiry(expire)
    with about(path):
        bucket = app.bucket(remote)
        if method == "PUT":
            url = bucket.presign_put(remote.key, seconds, content_type=content_type)
        else:
            url = bucket.presign_get(remote.key, seconds)
    text = url.url
    if not app.output.tty:
        app.output.result(url, text)
        return
    hint = f"curl -T FILE '{url.url}'" if method == "PUT" else f"curl -o FILE '{url.url}'"
    if method == "PUT" and content_type:
        hint = f"curl -T FILE -H 'Content-Type: {content_type}' '{url.url}'"
    app.output.result(url, f"{text}\n(expires {timestamp(url.expires_at)} UTC; try: {hint})")


@share_group.command(name="get")
@click.argument("path")
@click.option(
    "--expire", default="7d", show_default=True, help="Lifetime, e.g. 3600, 15m, 12h, 7d."
)
@pass_app
def share_get(app: App, path: str, expire: str) -> None:
    """A URL that downloads ALIAS/BUCKET/KEY with no credentials.

    \b
    Examples:
      svc share get local/photos/cat.jpg
      svc share get --expire 1h local/reports/q3.pdf
    """
    _share(app, path, "GET", expire, None)


@share_group.command(name="put")
@click.argument("path")
@click.option(
    "--expire", default="7d", show_default=True, help="Lifetime, e.g. 3600, 15m, 12h, 7d."
)
@click.option("--content-type", help="The type the upload must declare (signed into the URL).")
@pass_app
def share_put(app: App, path: str, expire: str, content_type: str | None) -> None:
    """A URL that uploads ALIAS/BUCKET/KEY with no credentials (curl -T FILE URL).

    \b
    Examples:
      svc share put --expire 15m local/inbox/report.pdf
    """
    _share(app, path, "PUT", expire, content_type)


def commands() -> list[click.Command]:
    return [share_group]
