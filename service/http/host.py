"""The ``Host`` header: checked once per request, and read as the server's own origin.

HTTP/1.1 requires exactly one ``Host`` (RFC 9112 section 3.2): a request without one, with
several, or with one that is not ``uri-host [":" port]`` (RFC 3986) is refused by the
connection with the contract's 400 (``host_problem``, used by ``service.http.protocol``).
HTTP/1.0 may leave it out. ``split_host`` reads an accepted value, for the cross-site check's
"own origin" (``service.http.cross_site``).

Pure; safe from any thread.
"""

from __future__ import annotations

import re

HOST_NAME = r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+;=%-]+"
"""An IP literal or a registered name (RFC 3986 ``IP-literal / reg-name``), not empty."""
_HOST_HEADER = re.compile(rf"(?P<host>{HOST_NAME})?(?::(?P<port>[0-9]*))?")


def host_problem(version: str, hosts: list[str]) -> str | None:
    """What is wrong with a request's ``Host`` headers, or None.

    >>> host_problem("HTTP/1.1", []), host_problem("HTTP/1.0", [])
    ('an HTTP/1.1 request must have a Host header', None)
    >>> host_problem("HTTP/1.1", ["a", "b"]), host_problem("HTTP/1.1", ["[::1]:9000"])
    ('a request must have one Host header', None)
    """
    if not hosts:
        return None if version == "HTTP/1.0" else "an HTTP/1.1 request must have a Host header"
    if len(hosts) > 1 or "," in hosts[0]:
        return "a request must have one Host header"
    if _HOST_HEADER.fullmatch(hosts[0]) is None:
        return "the Host header must be a host name or address, and a port"
    return None


def split_host(value: str) -> tuple[str, int | None] | None:
    """(host lowercased, port or None) of a ``Host`` value; None when it is not one.

    >>> split_host("Store.Example:8443"), split_host("[::1]"), split_host("a b")
    (('store.example', 8443), ('[::1]', None), None)
    """
    match = _HOST_HEADER.fullmatch(value.strip())
    if match is None or not match["host"]:
        return None
    port = match["port"]
    return match["host"].lower(), int(port) if port else None
