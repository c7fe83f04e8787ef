"""What a start prints once it serves: where to point a browser, curl and svc, and where the
credentials are.

Printed by the one process that knows the service is ready: ``service.server`` with one
serving process, the supervisor (``service.procs.supervisor``) with several. The first start's
generated secrets are printed before it, once, by ``service.ops.first_run``; the banner says
on every start where they are kept, never the secrets themselves.

Imports: the configuration, the credentials file's name and the file-system seam (one
``exists``).
"""

from __future__ import annotations

import ipaddress
import os

from fsseam.fs import FileSystem
from service.auth import ADMIN_USERNAME, CREDENTIALS_FILENAME
from service.config import Config

_EVERY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def base_url(config: Config) -> str:
    """Where a browser on this machine reaches the server (``SERVICE_PUBLIC_URL`` if set).

    >>> from dataclasses import replace
    >>> base_url(replace(Config(), host="0.0.0.0", port=9000))
    'http://127.0.0.1:9000'
    >>> base_url(replace(Config(), host="::", port=80))
    'http://[::1]:80'
    """
    if config.public_url:
        return config.public_url.rstrip("/")
    host = _EVERY_ADDRESS.get(config.host, config.host)
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass  # a host name
    return f"http://{host}:{config.port}"


def startup_banner(config: Config, fs: FileSystem, detail: str = "") -> str:
    """The lines printed once the service serves; ``detail`` is added to the first one."""
    base = base_url(config)
    credentials = os.path.join(config.data_dir, CREDENTIALS_FILENAME)
    if fs.exists(credentials):
        where = f"{credentials} (written at the first start; mode 0600)"
    else:
        where = (
            "the SERVICE_ROOT_ACCESS_KEY, SERVICE_ROOT_SECRET_KEY and SERVICE_ADMIN_PASSWORD "
            "set at the first start"
        )
    return "\n".join(
        [
            f"service listening on http://{config.host}:{config.port} "
            f"(data dir {config.data_dir}, durability {config.durability}{detail})",
            f"  console:     {base}/console/ (user {ADMIN_USERNAME})",
            f"  credentials: {where}",
            f"  API:         {base}/api/v1/docs (docs/api.md)",
        ]
    )
