"""``svc alias set|ls|rm``: name a server and the key pair to use there."""

from __future__ import annotations

import sys

import click

from service.cli.app import App, pass_app
from service.cli.config import Alias
from service.cli.errors import EXIT_USAGE, CliError

__all__ = ["commands"]


@click.group(name="alias")
def alias_group() -> None:
    """Manage aliases (server URL + access key pair) in ~/.config/svc/config.json.

    The file is created with mode 0600. SVC_URL=http://ACCESS_KEY:SECRET_KEY@host:port
    defines the alias `env` without it.
    """


@alias_group.command(name="set")
@click.argument("name")
@click.argument("url")
@click.argument("access_key")
@click.argument("secret_key", required=False)
@pass_app
def alias_set(app: App, name: str, url: str, access_key: str, secret_key: str | None) -> None:
    """Add or replace alias NAME. Without SECRET_KEY it is asked for (hidden) on a terminal,
    or read as one line from stdin, so it stays out of shell history.

    \b
    Examples:
      svc alias set local http://127.0.0.1:9000 bk_ID sk_SECRET
      svc alias set local http://127.0.0.1:9000 bk_ID          # prompts
      echo "$SECRET" | svc alias set prod https://s3.example.org bk_ID
    """
    if secret_key is None:
        if sys.stdin.isatty():
            secret_key = click.prompt("Secret key", hide_input=True)
        else:
            secret_key = sys.stdin.readline().strip()
    if not secret_key:
        raise CliError(name, "no secret key given", EXIT_USAGE)
    alias = Alias(name, url.rstrip("/"), access_key, secret_key)
    app.aliases.set(alias)
    app.output.result({"status": "success", **alias.public()}, f"Added `{name}` ({alias.url}).")


@alias_group.command(name="ls")
@click.argument("name", required=False)
@pass_app
def alias_ls(app: App, name: str | None) -> None:
    """List aliases (never their secret keys).

    \b
    Examples:
      svc alias ls
      svc alias ls local --json
    """
    aliases = [app.aliases.get(name)] if name else app.aliases.all()
    rows = [(a.name, a.url, a.access_key) for a in aliases]
    app.output.table(("alias", "url", "access key"), rows, [a.public() for a in aliases])


@alias_group.command(name="rm")
@click.argument("name")
@pass_app
def alias_rm(app: App, name: str) -> None:
    """Remove alias NAME from the config file.

    \b
    Example:
      svc alias rm old-server
    """
    app.aliases.remove(name)
    app.output.result({"status": "success", "alias": name}, f"Removed `{name}`.")


def commands() -> list[click.Command]:
    return [alias_group]
