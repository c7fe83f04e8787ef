"""``svc admin user|key|bucket|audit|replication ...``: users, access keys, bucket settings,
the audit log and the replication status (admins)."""

from __future__ import annotations

import sys

import click

from service.cli.app import App, pass_app
from service.cli.errors import EXIT_USAGE, CliError, about
from service.cli.output import timestamp
from service.cli.paths import require_remote
from service.cli.sizes import format_size, parse_size
from service.client import AccessKey, User

__all__ = ["commands"]


@click.group(name="admin")
def admin_group() -> None:
    """Administer a server: users, access keys, bucket settings, the audit log."""


@admin_group.group(name="user")
def user_group() -> None:
    """Users: ls, add, info, enable, disable, rm."""


@admin_group.group(name="key")
def key_group() -> None:
    """Access keys: ls, add, revoke, rm."""


@admin_group.group(name="bucket")
def bucket_group() -> None:
    """Bucket settings: info, set (quota, versioning, tags)."""


def _alias(app: App, name: str) -> str:
    name = name.rstrip("/")
    if not app.aliases.has(name):
        raise CliError(name, "NoSuchAlias (add it with `svc alias set`)", EXIT_USAGE)
    return name


def _users(app: App, users: list[User]) -> None:
    rows = [(u.user_id, u.username, u.role, u.status, timestamp(u.created_at)) for u in users]
    app.output.table(("user id", "username", "role", "status", "created"), rows, users)


def _keys(app: App, keys: list[AccessKey]) -> None:
    rows = [
        (k.access_key_id, k.user_id, k.name or "", k.status, timestamp(k.last_used_at))
        for k in keys
    ]
    app.output.table(("access key", "user id", "name", "status", "last used"), rows, keys)


@user_group.command(name="ls")
@click.argument("alias")
@pass_app
def user_ls(app: App, alias: str) -> None:
    """List the users of ALIAS.  Example: svc admin user ls local"""
    with about(alias):
        _users(app, app.client(_alias(app, alias)).users.list())


@user_group.command(name="add")
@click.argument("alias")
@click.argument("username")
@click.option("--role", type=click.Choice(["user", "admin"]), default="user", show_default=True)
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin.")
@pass_app
def user_add(app: App, alias: str, username: str, role: str, password_stdin: bool) -> None:
    """Create user USERNAME on ALIAS; the password is asked for (or read from stdin).

    \b
    Examples:
      svc admin user add local alice --role admin
      echo "$PASSWORD" | svc admin user add local bob --password-stdin
    """
    if password_stdin or not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise CliError(username, "no password given", EXIT_USAGE)
    with about(username):
        user = app.client(_alias(app, alias)).users.create(username, password, role=role)
    _users(app, [user])


@user_group.command(name="info")
@click.argument("alias")
@click.argument("user_id")
@pass_app
def user_info(app: App, alias: str, user_id: str) -> None:
    """Show user USER_ID."""
    with about(user_id):
        _users(app, [app.client(_alias(app, alias)).users.get(user_id)])


def _set_status(app: App, alias: str, user_id: str, status: str) -> None:
    with about(user_id):
        _users(app, [app.client(_alias(app, alias)).users.update(user_id, status=status)])


@user_group.command(name="enable")
@click.argument("alias")
@click.argument("user_id")
@pass_app
def user_enable(app: App, alias: str, user_id: str) -> None:
    """Let user USER_ID sign in again."""
    _set_status(app, alias, user_id, "active")


@user_group.command(name="disable")
@click.argument("alias")
@click.argument("user_id")
@pass_app
def user_disable(app: App, alias: str, user_id: str) -> None:
    """Disable user USER_ID: their keys, tokens and presigned URLs stop working."""
    _set_status(app, alias, user_id, "disabled")


@user_group.command(name="rm")
@click.argument("alias")
@click.argument("user_id")
@pass_app
def user_rm(app: App, alias: str, user_id: str) -> None:
    """Delete user USER_ID."""
    with about(user_id):
        app.client(_alias(app, alias)).users.delete(user_id)
    app.output.result({"status": "removed", "user_id": user_id}, f"Removed user `{user_id}`.")


@key_group.command(name="ls")
@click.argument("alias")
@pass_app
def key_ls(app: App, alias: str) -> None:
    """List access keys (never their secrets).  Example: svc admin key ls local"""
    with about(alias):
        _keys(app, app.client(_alias(app, alias)).access_keys.list())


@key_group.command(name="add")
@click.argument("alias")
@click.option("--user", "user_id", help="For this user (default: yourself).")
@click.option("--name", help="A label for the key.")
@pass_app
def key_add(app: App, alias: str, user_id: str | None, name: str | None) -> None:
    """Create an access key; its secret is shown this once.

    \b
    Example:
      svc admin key add local --user u_123 --name ci
    """
    with about(alias):
        key = app.client(_alias(app, alias)).access_keys.create(user_id=user_id, name=name)
    document = {
        "access_key_id": key.access_key_id,
        "secret_key": key.secret_key,
        "user_id": key.user_id,
        "name": key.name,
    }
    app.output.result(document, f"access key: {key.access_key_id}\nsecret key: {key.secret_key}")


@key_group.command(name="revoke")
@click.argument("alias")
@click.argument("access_key_id")
@pass_app
def key_revoke(app: App, alias: str, access_key_id: str) -> None:
    """Revoke a key: it and the URLs it signed stop working."""
    with about(access_key_id):
        _keys(app, [app.client(_alias(app, alias)).access_keys.revoke(access_key_id)])


@key_group.command(name="rm")
@click.argument("alias")
@click.argument("access_key_id")
@pass_app
def key_rm(app: App, alias: str, access_key_id: str) -> None:
    """Delete a key."""
    with about(access_key_id):
        app.client(_alias(app, alias)).access_keys.delete(access_key_id)
    document = {"status": "removed", "access_key_id": access_key_id}
    app.output.result(document, f"Removed key `{access_key_id}`.")


@bucket_group.command(name="info")
@click.argument("path")
@pass_app
def bucket_info(app: App, path: str) -> None:
    """Settings and usage of ALIAS/BUCKET."""
    remote = require_remote(path, app.aliases)
    with about(path):
        bucket = app.bucket(remote).info()
    quota = format_size(bucket.quota_bytes) if bucket.quota_bytes is not None else "none"
    tags = ",".join(f"{k}={v}" for k, v in sorted(bucket.tags.items())) or "-"
    text = (
        f"{bucket.name}\towner={bucket.owner}\tversioning="
        f"{'on' if bucket.versioning_enabled else 'off'}\tquota={quota}\ttags={tags}\t"
        f"{bucket.usage.object_count} objects\t{format_size(bucket.usage.size_bytes)}"
    )
    app.output.result(bucket, text)


@bucket_group.command(name="set")
@click.argument("path")
@click.option("--quota", metavar="SIZE|none", help="Byte limit (e.g. 10GiB), or none.")
@click.option("--versioning", type=click.Choice(["on", "off"]))
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Replaces all tags.")
@pass_app
def bucket_set(
    app: App, path: str, quota: str | None, versioning: str | None, tags: tuple[str, ...]
) -> None:
    """Change settings of ALIAS/BUCKET.

    \b
    Examples:
      svc admin bucket set local/photos --quota 50GiB --versioning on
      svc admin bucket set local/photos --quota none --tag team=web --tag tier=hot
    """
    remote = require_remote(path, app.aliases)
    changes: dict[str, object] = {}
    if quota is not None:
        changes["quota_bytes"] = None if quota.lower() == "none" else parse_size(quota)
    if versioning is not None:
        changes["versioning_enabled"] = versioning == "on"
    if tags:
        pairs = [tag.partition("=") for tag in tags]
        if any(not sep or not name for name, sep, _ in pairs):
            raise CliError(path, "--tag expects KEY=VALUE", EXIT_USAGE)
        changes["tags"] = {name: value for name, _, value in pairs}
    if not changes:
        raise CliError(path, "nothing to change (give --quota, --versioning or --tag)", EXIT_USAGE)
    with about(path):
        bucket = app.bucket(remote).update(**changes)  # type: ignore[arg-type]
    app.output.result(bucket, f"Updated `{remote}`.")


@admin_group.command(name="audit")
@click.argument("alias")
@click.option("--verify", is_flag=True, help="Check the hash chain instead of listing.")
@click.option("--since", default=0, type=click.IntRange(min=0), help="After this sequence.")
@click.option("--limit", default=100, type=click.IntRange(min=1), show_default=True)
@click.option("--bucket", help="Only records of this bucket.")
@click.option("--user", "user_id", help="Only records of this user id.")
@pass_app
def audit(
    app: App,
    alias: str,
    verify: bool,
    since: int,
    limit: int,
    bucket: str | None,
    user_id: str | None,
) -> None:
    """The audit log of ALIAS: who did what, refusals included (admins).

    \b
    Examples:
      svc admin audit local --bucket photos --limit 20
      svc admin audit local --verify
    """
    client = app.client(_alias(app, alias))
    if verify:
        with about(alias):
            outcome = client.verify_audit()
        if outcome.ok:
            text = (
                f"ok: {outcome.records} records, {outcome.first_sequence} to "
                f"{outcome.last_sequence}, the chain holds"
            )
            app.output.result(outcome, text)
            return
        app.output.result(outcome, None)
        raise CliError(
            alias, f"AuditChainBroken: record {outcome.first_bad_sequence} fails verification", 1
        )
    records = []
    with about(alias):
        for record in client.audit_records(since=since, bucket=bucket, user_id=user_id):
            records.append(record)
            if len(records) >= limit:
                break
    rows = [
        (
            str(r.sequence),
            timestamp(r.time),
            r.principal.get("user_id") or "-",
            r.action,
            str(r.status),
            "/".join(part for part in (r.bucket, r.key) if part) or r.path,
        )
        for r in records
    ]
    columns = ("seq", "time", "user", "action", "status", "target")
    app.output.table(columns, rows, records)


@admin_group.group(name="replication")
def replication_group() -> None:
    """Replication: status, promote."""


@replication_group.command(name="status")
@click.argument("alias")
@pass_app
def replication_status(app: App, alias: str) -> None:
    """The replication role of ALIAS, its position and lag, its standbys (admins).

    \b
    Examples:
      svc admin replication status local
      svc admin replication status standby --json
    """
    client = app.client(_alias(app, alias))
    with about(alias):
        status = client.replication_status()
    lag = status["lag"]
    lines = [
        f"role: {status['role']} (mode {status['mode']}, epoch {status['epoch']})",
        f"last sequence: {status['last_sequence']}, applied: {status['applied_sequence']}",
        f"lag: {lag['records']} records, {lag['seconds']} s, {lag['bytes']} bytes",
    ]
    if status.get("primary_url"):
        lines.append(f"primary: {status['primary_url']}")
    if status.get("last_error"):
        lines.append(f"last error: {status['last_error']}")
    for standby in status["standbys"]:
        lines.append(
            f"standby {standby['id']} at {standby['address']}: confirmed "
            f"{standby['confirmed_sequence']}, {standby['lag']['records']} records behind"
        )
    archive = status.get("archive")
    if archive:
        lines.append(f"archive: {archive['target']} at {archive['archived_sequence']}")
    app.output.result(status, "\n".join(lines))


@replication_group.command(name="promote")
@click.argument("alias")
@pass_app
def replication_promote(app: App, alias: str) -> None:
    """Make the standby ALIAS the primary of the next epoch (admins).

    It stops following, begins its epoch and serves writes at once; repoint clients to it
    (docs/replication.md, "Failover"). A primary refuses (InvalidState).

    \b
    Examples:
      svc admin replication promote standby
    """
    client = app.client(_alias(app, alias))
    with about(alias):
        status = client.replication_promote()
    app.output.result(
        status,
        f"{alias} is the primary of epoch {status['epoch']} "
        f"(last sequence {status['last_sequence']})",
    )


def commands() -> list[click.Command]:
    return [admin_group]
