"""``svc watch``: print a bucket's events as they happen (Server-Sent Events)."""

from __future__ import annotations

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_ERROR, CliError, about
from service.cli.events import stream_events
from service.cli.paths import require_remote
from service.client import MethodNotAllowedError, NotFoundError

__all__ = ["commands"]


@click.command()
@click.argument("path")
@click.option("--since", metavar="SEQUENCE", help="Replay events after this sequence first.")
@click.option("--event", "types", multiple=True, metavar="TYPE", help="Only these types.")
@pass_app
def watch(app: App, path: str, since: str | None, types: tuple[str, ...]) -> None:
    """Print the events of ALIAS/BUCKET[/PREFIX] as they happen, until Ctrl-C.

    \b
    Examples:
      svc watch local/photos
      svc watch --json --event object.created local/uploads/incoming/ | jq -r .key
    """
    remote = require_remote(path, app.aliases)
    client = app.client(remote.alias, timeout=None)  # an idle stream is not a failure
    try:
        for event in stream_events(client, remote.bucket, since=since):
            key = str(event.get("key", ""))
            if remote.key and not key.startswith(remote.key):
                continue
            kind = str(event.get("type", "event"))
            if types and kind not in types:
                continue
            size = event.get("size_bytes")
            text = f"[{event.get('time', '-')}] {kind:<28} {remote.alias}/{remote.bucket}/{key}"
            app.output.result(event, text + (f" ({size} bytes)" if size else ""))
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
