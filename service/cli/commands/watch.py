"""``svc watch``: print a bucket's events as they happen (the client's ``events()`` stream)."""

from __future__ import annotations

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_ERROR, CliError, about
from service.cli.output import timestamp
from service.cli.paths import require_remote
from service.client import MethodNotAllowedError, NotFoundError

__all__ = ["commands"]


@click.command()
@click.argument("path")
@click.option(
    "--since",
    type=click.IntRange(min=0),
    metavar="SEQUENCE",
    help="Replay events after this sequence first.",
)
@click.option("--event", "types", multiple=True, metavar="TYPE", help="Only these types.")
@pass_app
def watch(app: App, path: str, since: int | None, types: tuple[str, ...]) -> None:
    """Print the events of ALIAS/BUCKET[/PREFIX] as they happen, until Ctrl-C.

    \b
    Examples:
      svc watch local/photos
      svc watch --json --event object.created local/uploads/incoming/ | jq -r .key
    """
    remote = require_remote(path, app.aliases)
    client = app.client(remote.alias, timeout=None)  # an idle stream is not a failure
    try:
        for event in client.bucket(remote.bucket).events(since=since):
            if remote.key and not event.key.startswith(remote.key):
                continue
            if types and event.type not in types:
                continue
            name = f"{remote.alias}/{remote.bucket}/{event.key}"
            text = f"[{timestamp(event.time)}] {event.type:<28} {name}"
            size = f" ({event.size_bytes} bytes)" if event.size_bytes else ""
            app.output.result(event, text + size)
    except (NotFoundError, MethodNotAllowedError) as error:
        if error.code in ("NoSuchBucket",):
            with about(path):
                raise
        raise CliError(
            path,
            f"events are not supported by this server (HTTP {error.status} on the events endpoint)",
            EXIT_ERROR,
        ) from error
    except Exception:
        with about(path):
            raise


def commands() -> list[click.Command]:
    return [watch]
