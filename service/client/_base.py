"""What ``ServiceClient`` and ``AsyncServiceClient`` share before any I/O: their options.

``ClientBase.__init__`` is the one place the constructor's options are read and checked, so
the two clients accept exactly the same arguments. Instances are configured once and never
change; safe to read from any thread.
"""

from __future__ import annotations

import ssl

from service.client._config import ClientConfig, resolve_config
from service.client._flow import RetryPolicy

__all__ = ["ClientBase"]


class ClientBase:
    """Options common to both clients (see ``ServiceClient`` for each one's meaning)."""

    def __init__(
        self,
        connection: str | None = None,
        *,
        base_url: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        token: str | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        retries: int = 2,
        part_retries: int = 6,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
        max_connections: int = 32,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        self._config: ClientConfig = resolve_config(
            connection,
            base_url=base_url,
            access_key=access_key,
            secret_key=secret_key,
            token=token,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_connections=max_connections,
            verify=verify,
            retry=RetryPolicy(
                retries=retries,
                part_retries=part_retries,
                backoff=backoff,
                max_backoff=max_backoff,
            ),
        )
        self._setup()

    def _setup(self) -> None:
        """Build the driver and sub-clients from ``self._config`` (each client's own)."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """The service's URL without credentials, e.g. ``http://127.0.0.1:9000``."""
        return self._config.base_url

    @property
    def uri(self) -> str:
        """The connection string, secret included (``http://bk_ID:sk_SECRET@host:port``)."""
        return self._config.uri

    @property
    def safe_uri(self) -> str:
        """The connection string with the secret masked (``http://bk_ID:****@host:port``)."""
        return self._config.safe_uri

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.safe_uri!r})"
