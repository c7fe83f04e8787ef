"""Aliases: names for a server URL and an access key pair, kept in the user's config dir.

The file is ``$XDG_CONFIG_HOME/svc/config.json`` (else ``~/.config/svc/config.json``), created
with mode 0600 inside a 0700 directory because it holds secret keys; it is replaced atomically
(temporary file, fsync, rename), so a crash never leaves half a file. ``SVC_URL``
(``http://bk_ID:sk_SECRET@host:port``) defines the alias ``env`` without touching the file.

Also here: the directory where ``cp``/``mirror`` keep multipart upload ids for a resume.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from service.cli.errors import EXIT_NOT_FOUND, EXIT_USAGE, CliError

__all__ = [
    "ENV_ALIAS",
    "Alias",
    "AliasStore",
    "config_dir",
]

ENV_ALIAS = "env"
ALIAS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/svc``, else ``$HOME/.config/svc``."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(
        os.environ.get("HOME") or os.path.expanduser("~"), ".config"
    )
    return Path(base) / "svc"


@dataclass(frozen=True)
class Alias:
    """One server and the key pair to use there."""

    name: str
    url: str
    access_key: str
    secret_key: str

    def public(self) -> dict[str, str]:
        """What ``alias ls`` shows: never the secret."""
        return {"alias": self.name, "url": self.url, "access_key": self.access_key}


def _port(parts: SplitResult, subject: str) -> int | None:
    """The URL's port; a usage error naming ``subject`` when it is not one (``:99999``)."""
    try:
        return parts.port
    except ValueError as error:
        raise CliError(subject, f"InvalidURL: {error}", EXIT_USAGE) from error


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(url, "InvalidURL: expected http://host:port or https://host", EXIT_USAGE)
    _port(parts, url)
    return url.rstrip("/")


def alias_from_env(value: str) -> Alias:
    """The ``env`` alias from ``SVC_URL=http://bk_ID:sk_SECRET@host:port``."""
    parts = urlsplit(value)
    if not parts.username or not parts.password or not parts.hostname:
        raise CliError("SVC_URL", "expected http://ACCESS_KEY:SECRET_KEY@host:port", EXIT_USAGE)
    port = _port(parts, "SVC_URL")
    netloc = parts.hostname if port is None else f"{parts.hostname}:{port}"
    if ":" in parts.hostname:
        netloc = f"[{parts.hostname}]" + ("" if port is None else f":{port}")
    return Alias(
        ENV_ALIAS,
        check_url(f"{parts.scheme}://{netloc}"),
        unquote(parts.username),
        unquote(parts.password),
    )


class AliasStore:
    """The aliases of the config file plus ``env``; reads the file once, writes on change."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or config_dir()
        self.path = self.directory / "config.json"
        self._data: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._data is None:
            try:
                text = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                text = "{}"
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise CliError(str(self.path), f"not valid JSON ({exc})") from exc
            if not isinstance(data, dict) or not isinstance(data.get("aliases", {}), dict):
                raise CliError(str(self.path), "not an svc config file")
            data.setdefault("version", 1)
            data.setdefault("aliases", {})
            self._data = data
        return self._data

    def names(self) -> list[str]:
        names = set(self._load()["aliases"])
        if os.environ.get("SVC_URL"):
            names.add(ENV_ALIAS)
        return sorted(names)

    def has(self, name: str) -> bool:
        return name in self.names()

    def get(self, name: str) -> Alias:
        if name == ENV_ALIAS and os.environ.get("SVC_URL"):
            return alias_from_env(os.environ["SVC_URL"])
        entry = self._load()["aliases"].get(name)
        if not isinstance(entry, dict):
            raise CliError(name, "NoSuchAlias (add it with `svc alias set`)", EXIT_NOT_FOUND)
        try:
            return Alias(name, entry["url"], entry["access_key"], entry["secret_key"])
        except KeyError as exc:
            raise CliError(str(self.path), f"alias {name} lacks {exc.args[0]}") from exc

    def all(self) -> list[Alias]:
        return [self.get(name) for name in self.names()]

    def set(self, alias: Alias) -> None:
        if not ALIAS_NAME.fullmatch(alias.name):
            raise CliError(alias.name, "InvalidAliasName: letters, digits, _ . -", EXIT_USAGE)
        data = self._load()
        data["aliases"][alias.name] = {
            "url": check_url(alias.url),
            "access_key": alias.access_key,
            "secret_key": alias.secret_key,
        }
        self._save(data)

    def remove(self, name: str) -> None:
        data = self._load()
        if name not in data["aliases"]:
            raise CliError(name, "NoSuchAlias", EXIT_NOT_FOUND)
        del data["aliases"][name]
        self._save(data)

    def _save(self, data: dict[str, Any]) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".config-", suffix=".tmp")
        try:
            os.fchmod(fd, 0o600)  # secrets inside: owner only, before a byte is written
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(data, file, indent=2, sort_keys=True)
                file.write("\n")
                file.flush()
                os.fsync(file.fileno())  # the new file is whole before it takes the name
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
