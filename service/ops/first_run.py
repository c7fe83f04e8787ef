"""First start: create user ``admin`` and the root access key, and tell the operator.

Runs once, when the replayed state has no users. Credentials come from the environment
(``SERVICE_ROOT_ACCESS_KEY``/``SERVICE_ROOT_SECRET_KEY``/``SERVICE_ADMIN_PASSWORD``) or are
generated, written to ``<data_dir>/credentials.json`` (mode 0600) and printed once.
"""

from __future__ import annotations

import secrets
import sys
from typing import TextIO

from service.auth import (
    ADMIN_USERNAME,
    BootstrapCredentials,
    digest_secret,
    hash_password,
    resolve_bootstrap,
    write_credentials_file,
)
from service.common.timefmt import now_ms
from service.config import Config
from service.engine.core import Engine
from service.meta import records
from service.ops.buckets import outcome_error


def new_user_id() -> str:
    return "u_" + secrets.token_hex(8)


def bootstrap_credentials(config: Config) -> BootstrapCredentials:
    """The first start's credentials, from the settings or generated.

    Raises ``BootstrapError`` naming a bad setting. ``python -m service`` calls it before it
    starts anything, so a malformed key or password is one line and exit 2, as any other
    bad setting, on every start (not only the first one, when it would be used)."""
    return resolve_bootstrap(
        {
            "SERVICE_ROOT_ACCESS_KEY": config.root_access_key,
            "SERVICE_ROOT_SECRET_KEY": config.root_secret_key,
            "SERVICE_ADMIN_PASSWORD": config.admin_password,
        }
    )


async def bootstrap_if_empty(engine: Engine, config: Config, out: TextIO = sys.stdout) -> None:
    """Create the admin user and root key on a fresh data dir; a no-op afterwards."""
    if engine.state.list_users():
        return
    credentials = bootstrap_credentials(config)
    password_hash = await hash_password(credentials.admin_password, engine.executor)
    user_id = new_user_id()
    at = now_ms()
    for event in (
        records.user_created(
            user_id=user_id,
            username=ADMIN_USERNAME,
            password_hash=password_hash,
            role="admin",
            at=at,
        ),
        records.access_key_created(
            access_key_id=credentials.access_key_id,
            user_id=user_id,
            name="root",
            secret_digest=digest_secret(credentials.secret_key),
            at=at,
        ),
    ):
        outcome = await engine.commit(event)
        if not outcome.ok:
            raise outcome_error(outcome)
    if credentials.generated:
        path = await engine.run_blocking(
            write_credentials_file, engine.fs, config.data_dir, credentials.generated_payload()
        )
        print(f"First start: generated credentials written to {path} (mode 0600).", file=out)
        if credentials.key_generated:
            print(f"  access key: {credentials.access_key_id}", file=out)
            print(f"  secret key: {credentials.secret_key}", file=out)
        if credentials.password_generated:
            print(f"  admin password: {credentials.admin_password}", file=out)
    # The secret is printed once only (above): the curl line either lets curl prompt for
    # it or reads the operator's own variable, so it never lands in the log a second time.
    user = credentials.access_key_id
    if not credentials.key_generated:
        user += ":$SERVICE_ROOT_SECRET_KEY"
    base = f"http://{config.host}:{config.port}"
    print(f"Try: curl -u {user} {base}/api/v1/buckets", file=out)
    if credentials.key_generated:
        print("  (curl asks for the secret key)", file=out)
    secret = "" if credentials.key_generated else ' "$SERVICE_ROOT_SECRET_KEY"'
    print(f"Or:  svc alias set local {base} {credentials.access_key_id}{secret}", file=out)
    if credentials.key_generated:
        print("  (svc asks for the secret key)", file=out)
    out.flush()
