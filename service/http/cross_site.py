"""Cross-site writes: a page on another site must not drive a browser's stored credentials.

The API reads no cookies, but a browser may still hold credentials a page of another site
could make it send (HTTP Basic typed into the browser's own dialog, a client certificate),
and a "simple" cross-site POST needs no preflight. So a state-changing request (POST, PUT,
PATCH, DELETE) is refused with 403 AccessDenied, before its credentials are even looked at,
when:

- its ``Origin`` is neither the server's own nor allowed by ``SERVICE_CORS_ORIGINS``
  (``Origin: null``, sent by sandboxed pages and ``file:`` documents, is nobody's own); or
- it has no ``Origin`` but says ``Sec-Fetch-Site: cross-site``.

The server's own origin (docs/security.md "Cross-site writes"): the origin of the ``Host``
the request was sent to, with either scheme (a TLS-terminating proxy in front hides ours; the
port must match, a ``Host`` without one matching the scheme's default), and the origin of
``SERVICE_PUBLIC_URL`` when it is set (scheme, host and port exactly), for proxies that
rewrite ``Host``. Clients other than browsers send neither header and are unaffected.
Presigned requests are exempt, on the routes that take them: their URL is the credential,
and no stored credential is used.

Pure; safe from any thread.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from tornado.httputil import HTTPServerRequest

from service.common.api_errors import ApiError
from service.http.host import HOST_NAME, split_host
from service.limits.cors import CorsPolicy

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_PORTS = {"http": 80, "https": 443}
_ORIGIN = re.compile(
    rf"(?P<scheme>https?)://(?P<host>{HOST_NAME})(?::(?P<port>[0-9]{{1,5}}))?", re.IGNORECASE
)


def _origin_parts(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a serialized origin, or None when it is not an http(s) one.

    >>> _origin_parts("HTTPS://Store.Example.com"), _origin_parts("http://[::1]:9000")
    (('https', 'store.example.com', 443), ('http', '[::1]', 9000))
    >>> _origin_parts("null"), _origin_parts("http://a.example/path")
    (None, None)
    """
    match = _ORIGIN.fullmatch(origin.strip())
    if match is None:
        return None
    scheme = match["scheme"].lower()
    port = int(match["port"]) if match["port"] else DEFAULT_PORTS[scheme]
    return scheme, match["host"].lower(), port


def is_own_origin(origin: str, host: str | None, public_url: str | None) -> bool:
    """Whether ``origin`` is the server's own for a request sent to ``host`` (see the
    module docstring).

    >>> is_own_origin("http://127.0.0.1:9000", "127.0.0.1:9000", None)
    True
    >>> is_own_origin("https://store.example", "store.example", None)
    True
    >>> is_own_origin("https://store.example:8443", "store.example", None)
    False
    >>> is_own_origin("https://cdn.example", "127.0.0.1:9000", "https://cdn.example/base")
    True
    """
    parts = _origin_parts(origin)
    if parts is None:
        return False
    scheme, name, port = parts
    target = split_host(host) if host is not None else None
    if target is not None and target == (name, None if port == DEFAULT_PORTS[scheme] else port):
        return True
    if target is not None and target == (name, port):
        return True
    if public_url:
        public = urlsplit(public_url)
        public_scheme = public.scheme.lower()
        if public_scheme in DEFAULT_PORTS and public.hostname:
            public_host = public.netloc.rsplit("@", 1)[-1].lower()
            public_parts = _origin_parts(f"{public_scheme}://{public_host}")
            return public_parts == parts
    return False


def cross_site_refusal(
    request: HTTPServerRequest, cors: CorsPolicy, public_url: str | None, presigned: bool
) -> ApiError | None:
    """The 403 for a cross-site write, or None when ``request`` may go on."""
    if request.method not in STATE_CHANGING or presigned:
        return None
    headers = request.headers
    origin = headers.get("Origin")
    if origin is not None:
        if is_own_origin(origin, headers.get("Host"), public_url):
            return None
        if cors.allow(origin) is not None:
            return None
        return ApiError(
            "AccessDenied",
            f"writes from the origin {origin[:100]!r} are refused: it is not this server's "
            "nor allowed by SERVICE_CORS_ORIGINS",
        )
    if headers.get("Sec-Fetch-Site", "").strip().lower() == "cross-site":
        return ApiError(
            "AccessDenied", "cross-site writes are refused (Sec-Fetch-Site: cross-site)"
        )
    return None
