"""``svc retention get|set PATH`` and ``svc legal-hold on|off PATH``: object lock of one
version (the current one, or ``--version-id``) in a bucket created with object lock."""

from __future__ import annotations

import datetime

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_USAGE, CliError, about
from service.cli.output import timestamp
from service.cli.paths import require_remote
from service.cli.sizes import parse_duration
from service.client import ObjectRetention

__all__ = ["commands"]

VERSION = click.option("--version-id", help="This version (default: the current one).")


@click.group(name="retention")
def retention_group() -> None:
    """A version's retention: get, set (governance or compliance, until a time)."""


@click.group(name="legal-hold")
def legal_hold_group() -> None:
    """A version's legal hold: on (until turned off), off."""


def _show(app: App, retention: ObjectRetention) -> None:
    if retention.mode is None:
        text = f"{retention.version_id}\tno retention"
    else:
        until = timestamp(retention.retain_until)
        text = f"{retention.version_id}\t{retention.mode}\tuntil {until} UTC"
    app.output.result(retention, text)


@retention_group.command(name="get")
@click.argument("path")
@VERSION
@pass_app
def retention_get(app: App, path: str, version_id: str | None) -> None:
    """Show the retention of ALIAS/BUCKET/KEY.  Example: svc retention get local/backups/db.tar"""
    remote = require_remote(path, app.aliases, key=True)
    with about(path):
        _show(app, app.bucket(remote).get_retention(remote.key, version_id=version_id))


def _until(until: str | None, keep_for: str | None) -> datetime.datetime:
    if (until is None) == (keep_for is None):
        raise CliError("retention", "give one of --until TIME and --for DURATION", EXIT_USAGE)
    if keep_for is not None:
        return datetime.datetime.now(datetime.UTC) + datetime.timedelta(
            seconds=parse_duration(keep_for)
        )
    assert until is not None
    try:
        moment = datetime.datetime.fromisoformat(until)
    except ValueError:
        raise CliError(until, "not a time (example: 2030-01-31T00:00:00Z)", EXIT_USAGE) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


@retention_group.command(name="set")
@click.argument("path")
@click.option("--mode", type=click.Choice(["governance", "compliance"]))
@click.option("--until", help="The end of the retention (RFC 3339; UTC if no zone).")
@click.option("--for", "keep_for", metavar="DURATION", help="Or from now: 30d, 12h, 3600.")
@click.option(
    "--clear",
    is_flag=True,
    help="Remove the retention (only once it ended, or a governance one with --bypass-governance).",
)
@click.option("--bypass-governance", is_flag=True, help="Admins: shorten or remove governance.")
@VERSION
@pass_app
def retention_set(
    app: App,
    path: str,
    mode: str | None,
    until: str | None,
    keep_for: str | None,
    clear: bool,
    bypass_governance: bool,
    version_id: str | None,
) -> None:
    """Set, lengthen, shorten or remove the retention of ALIAS/BUCKET/KEY.

    \b
    Examples:
      svc retention set local/backups/db.tar --mode compliance --for 30d
      svc retention set local/backups/db.tar --mode governance --until 2030-01-31T00:00:00Z
      svc retention set local/backups/db.tar --clear --bypass-governance
    """
    remote = require_remote(path, app.aliases, key=True)
    if clear == (mode is not None):
        raise CliError(path, "give --mode (with --until or --for), or --clear", EXIT_USAGE)
    retain_until = None if clear else _until(until, keep_for)
    with about(path):
        retention = app.bucket(remote).set_retention(
            remote.key,
            mode,
            retain_until,
            version_id=version_id,
            bypass_governance=bypass_governance,
        )
    _show(app, retention)


def _hold(app: App, path: str, on: bool, version_id: str | None) -> None:
    remote = require_remote(path, app.aliases, key=True)
    with about(path):
        hold = app.bucket(remote).set_legal_hold(remote.key, on, version_id=version_id)
    app.output.result(hold, f"{hold.version_id}\tlegal hold {'on' if hold.on else 'off'}")


@legal_hold_group.command(name="on")
@click.argument("path")
@VERSION
@pass_app
def legal_hold_on(app: App, path: str, version_id: str | None) -> None:
    """Put ALIAS/BUCKET/KEY under legal hold: no one can delete it until it is turned off."""
    _hold(app, path, True, version_id)


@legal_hold_group.command(name="off")
@click.argument("path")
@VERSION
@pass_app
def legal_hold_off(app: App, path: str, version_id: str | None) -> None:
    """Release the legal hold of ALIAS/BUCKET/KEY."""
    _hold(app, path, False, version_id)


def commands() -> list[click.Command]:
    return [retention_group, legal_hold_group]
