"""Client configuration: the connection string, credentials, timeouts and retry settings.

``ClientConfig`` is a frozen dataclass built once per client by ``resolve_config`` from either
a connection string (``http://bk_ID:sk_SECRET@host:port``) or keyword options. It knows how
to print itself without the secret (``safe_uri``) and which httpx options it implies, so the
sync and async clients build their pools from the same place. Pure; immutable, so safe to
share between threads.
"""

from __future__ import annotations

import dataclasses
import ssl
import urllib.parse
from typing import Any

import httpx

from service.client._flow import RetryPolicy

__all__ = ["ClientConfig", "parse_connection_string", "resolve_config"]

MASK = "****"
USER_AGENT = "service-client/1"


@dataclasses.dataclass(frozen=True)
class ConnectionParts:
    """What a connection string holds: the base URL without credentials, and the key pair."""

    base_url: str
    access_key: str | None
    secret_key: str | None


@dataclasses.dataclass(frozen=True, repr=False)
class ClientConfig:
    """Everything a client needs to reach the service.

    ``base_url`` has no credentials and no trailing slash. At most one of the access key pair
    and ``token`` is set; with neither, only public endpoints (``/health``) work.
    """

    base_url: str
    access_key: str | None = None
    secret_key: str | None = None
    token: str | None = None
    timeout: float | None = 60.0
    connect_timeout: float | None = 10.0
    max_connections: int = 32
    verify: bool | ssl.SSLContext = True
    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)

    @property
    def uri(self) -> str:
        """The connection string, secret included: pass it to another client or process."""
        return self._uri(self.secret_key)

    @property
    def safe_uri(self) -> str:
        """The connection string with the secret shown as ``****``: safe for logs."""
        return self._uri(MASK if self.secret_key is not None else None)

    def _uri(self, secret: str | None) -> str:
        if self.access_key is None:
            return self.base_url
        scheme, rest = self.base_url.split("://", 1)
        user = urllib.parse.quote(self.access_key, safe="")
        userinfo = user if secret is None else f"{user}:{_quote_secret(secret)}"
        return f"{scheme}://{userinfo}@{rest}"

    def __repr__(self) -> str:
        return f"ClientConfig({self.safe_uri!r})"

    def httpx_options(self) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client`` / ``httpx.AsyncClient``: one pool per client,
        keep-alive connections reused across requests and threads."""
        auth: httpx.Auth | None = None
        if self.access_key is not None and self.secret_key is not None:
            auth = httpx.BasicAuth(self.access_key, self.secret_key)
        headers = {"User-Agent": USER_AGENT}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        return {
            "base_url": self.base_url,
            "auth": auth,
            "headers": headers,
            "timeout": httpx.Timeout(self.timeout, connect=self.connect_timeout),
            "limits": httpx.Limits(
                max_connections=self.max_connections,
                max_keepalive_connections=self.max_connections,
            ),
            "verify": self._tls(),
            "follow_redirects": False,
        }

    def _tls(self) -> bool | ssl.SSLContext:
        """What httpx gets as ``verify``. Requests go only to ``base_url`` (no redirects are
        followed), so a plain ``http://`` client never makes a TLS connection; httpx's
        default would still load the CA bundle when the client is made (0.07-0.18 s, paid
        by every ``svc`` run). Such a client gets a context that verifies but trusts no
        certificate: free to make, and it fails closed should it ever be used."""
        if self.verify is True and self.base_url.startswith("http://"):
            return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        return self.verify


def _quote_secret(secret: str) -> str:
    return secret if secret == MASK else urllib.parse.quote(secret, safe="")


def parse_connection_string(text: str) -> ConnectionParts:
    """Split ``scheme://[key[:secret]@]host[:port][/path]`` into base URL and credentials.

    The user and password parts are percent-decoded; a path is kept (a service mounted below
    a prefix behind a proxy); a query or fragment is refused because nothing could use it.

    >>> parse_connection_string("http://bk_ID:sk_SECRET@127.0.0.1:9000")
    ConnectionParts(base_url='http://127.0.0.1:9000', access_key='bk_ID', secret_key='sk_SECRET')
    >>> parse_connection_string("https://[::1]:8443/store/").base_url
    'https://[::1]:8443/store'
    """
    parts = urllib.parse.urlsplit(text.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError("connection string must start with http:// or https://")
    if parts.query or parts.fragment:
        raise ValueError("connection string must not have a query or fragment")
    host = parts.hostname
    if not host:
        raise ValueError("connection string has no host")
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"connection string has an invalid port: {exc}") from None
    netloc = host if port is None else f"{host}:{port}"
    access_key = _unquote_or_none(parts.username)
    secret_key = _unquote_or_none(parts.password)
    if (access_key is None) != (secret_key is None):
        raise ValueError("connection string needs both the access key id and the secret")
    base_url = f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"
    return ConnectionParts(base_url, access_key, secret_key)


def _unquote_or_none(value: str | None) -> str | None:
    return urllib.parse.unquote(value) if value else None


def resolve_config(
    connection: str | None,
    *,
    base_url: str | None,
    access_key: str | None,
    secret_key: str | None,
    token: str | None,
    timeout: float | None,
    connect_timeout: float | None,
    max_connections: int,
    verify: bool | ssl.SSLContext,
    retry: RetryPolicy,
) -> ClientConfig:
    """The one configuration both clients use, from a connection string or keyword options.

    Keyword credentials override those in the connection string; mixing a key pair with a
    bearer token is refused because it would be ambiguous which identity acts.
    """
    if connection is not None and base_url is not None:
        raise ValueError("pass either a connection string or base_url, not both")
    source = connection if connection is not None else base_url
    if source is None:
        raise ValueError("pass a connection string or base_url")
    parsed = parse_connection_string(source)
    access_key = access_key if access_key is not None else parsed.access_key
    secret_key = secret_key if secret_key is not None else parsed.secret_key
    if (access_key is None) != (secret_key is None):
        raise ValueError("an access key needs its secret key (and the other way round)")
    if token is not None and access_key is not None:
        raise ValueError("use either an access key pair or a bearer token, not both")
    if max_connections < 1:
        raise ValueError("max_connections must be at least 1")
    return ClientConfig(
        base_url=parsed.base_url,
        access_key=access_key,
        secret_key=secret_key,
        token=token,
        timeout=timeout,
        connect_timeout=connect_timeout,
        max_connections=max_connections,
        verify=verify,
        retry=retry,
    )
