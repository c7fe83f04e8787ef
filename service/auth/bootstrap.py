"""First-start credentials: the ``admin`` user's password and the root access key.

At the first start with an empty data dir the server creates user ``admin`` and one access
key. ``SERVICE_ROOT_ACCESS_KEY`` and ``SERVICE_ROOT_SECRET_KEY`` (both or neither) and
``SERVICE_ADMIN_PASSWORD`` choose them; whatever is not chosen is generated, and the caller
then writes the generated values once to ``<data_dir>/credentials.json`` (owner-only) with
``write_credentials_file`` and prints them once. Chosen values are checked here so a typo
fails at startup with a message naming the variable, never echoing its value.

Thread-safety: ``resolve_bootstrap`` is pure; ``write_credentials_file`` is blocking I/O
(call it at startup or from an executor).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from fsseam.fs import FileSystem
from service.auth.auth_errors import BootstrapError
from service.auth.keys import generate_access_key, is_access_key_id, is_secret_key
from service.auth.passwords import validate_password
from service.auth.private_file import write_private_file

ADMIN_USERNAME = "admin"
CREDENTIALS_FILENAME = "credentials.json"
ROOT_ACCESS_KEY_ENV = "SERVICE_ROOT_ACCESS_KEY"
ROOT_SECRET_KEY_ENV = "SERVICE_ROOT_SECRET_KEY"
ADMIN_PASSWORD_ENV = "SERVICE_ADMIN_PASSWORD"
_GENERATED_PASSWORD_BYTES = 18
"""24 base64url characters, 144 random bits."""


@dataclass(frozen=True, slots=True)
class BootstrapCredentials:
    """The admin password and root access key to create, and which of them were generated."""

    admin_password: str
    access_key_id: str
    secret_key: str
    password_generated: bool
    key_generated: bool

    @property
    def generated(self) -> bool:
        """Whether anything was generated, so credentials.json must be written and shown."""
        return self.password_generated or self.key_generated

    def generated_payload(self) -> dict[str, str]:
        """The credentials.json content: names, plus only the secrets the operator lacks."""
        payload = {"username": ADMIN_USERNAME, "access_key_id": self.access_key_id}
        if self.password_generated:
            payload["admin_password"] = self.admin_password
        if self.key_generated:
            payload["secret_key"] = self.secret_key
        return payload


def resolve_bootstrap(env: Mapping[str, str | None]) -> BootstrapCredentials:
    """The bootstrap credentials from ``env`` (``os.environ`` or the config's values).

    An empty or None value counts as unset. Raises ``BootstrapError`` for a key id not
    shaped ``bk_...``, a secret not shaped ``sk_...`` (see ``keys.is_secret_key``), only one
    of the two key variables set, or a password that fails ``validate_password``.
    """
    key_id = env.get(ROOT_ACCESS_KEY_ENV) or None
    secret = env.get(ROOT_SECRET_KEY_ENV) or None
    password = env.get(ADMIN_PASSWORD_ENV) or None
    if (key_id is None) != (secret is None):
        raise BootstrapError(
            f"set both {ROOT_ACCESS_KEY_ENV} and {ROOT_SECRET_KEY_ENV}, or neither"
        )
    if key_id is not None and not is_access_key_id(key_id):
        raise BootstrapError(
            f"{ROOT_ACCESS_KEY_ENV} must be 'bk_' followed by 3 to 128 of A-Z a-z 0-9 . _ ~ -"
        )
    if secret is not None and not is_secret_key(secret):
        raise BootstrapError(
            f"{ROOT_SECRET_KEY_ENV} must be 'sk_' followed by 8 to 256 of A-Z a-z 0-9 . _ ~ -"
        )
    if password is not None and (problem := validate_password(password)) is not None:
        raise BootstrapError(f"{ADMIN_PASSWORD_ENV}: {problem}")
    if key_id is None or secret is None:
        key_id, secret = generate_access_key()
        key_generated = True
    else:
        key_generated = False
    return BootstrapCredentials(
        admin_password=password or secrets.token_urlsafe(_GENERATED_PASSWORD_BYTES),
        access_key_id=key_id,
        secret_key=secret,
        password_generated=password is None,
        key_generated=key_generated,
    )


def write_credentials_file(fs: FileSystem, data_dir: str, payload: Mapping[str, object]) -> str:
    """Write ``payload`` as JSON to ``<data_dir>/credentials.json`` (mode 0600); its path."""
    path = os.path.join(data_dir, CREDENTIALS_FILENAME)
    text = json.dumps(dict(payload), indent=2, sort_keys=True) + "\n"
    write_private_file(fs, path, text.encode("utf-8"))
    return path
