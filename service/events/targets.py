"""Where a webhook may deliver: the guard against server-side request forgery (SSRF).

A bucket owner chooses a webhook's URL, and the server POSTs to it from inside the
operator's network; unguarded, an owner could make the server reach a cloud metadata service
(169.254.169.254), an admin port on loopback or a host on the private network. So, as a
mature store does, delivery goes only to public (globally routable) addresses, unless the
operator names networks that are allowed as well: ``SERVICE_WEBHOOK_ALLOWED_NETWORKS``, a
comma-separated list of CIDR networks or addresses (``10.0.0.0/8,::1``), or ``*`` for any
address. Everything else that is not global is refused: loopback, private, link-local,
shared (100.64/10), unspecified, reserved, multicast, and IPv6 forms of these (an
IPv4-mapped address is judged as the IPv4 address).

Two checks:

- when the webhooks are configured, a URL whose host is an address (or ``localhost``) that
  is refused answers 400, so a mistake shows at once;
- at every delivery the host name is resolved again (a name can change to point inside),
  every address it resolves to must be allowed, and the request is sent to the checked
  address itself (the URL's host replaced by it, ``Host`` and the TLS server name kept), so
  a second, different answer of the resolver cannot slip in between check and connect.
  Redirects are never followed (a 3xx is a failed attempt).

Thread-safety: a policy is immutable; ``pin`` resolves on the event loop's resolver executor.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any

import httpx

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

LOCALHOST_NAMES = ("localhost", ".localhost")


class TargetRefused(Exception):
    """The URL's host is, or resolves to, an address webhooks may not reach."""


def _judged(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """The networks webhooks may reach beyond the public ones (``any_address``: all)."""

    allowed: tuple[Network, ...] = ()
    any_address: bool = False

    @classmethod
    def parse(cls, text: str) -> TargetPolicy:
        """The policy of the setting's text; ValueError naming a bad entry."""
        entries = [entry.strip() for entry in text.split(",") if entry.strip()]
        if entries == ["*"]:
            return cls(any_address=True)
        networks: list[Network] = []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(f"{entry!r} is not a network (CIDR) or an address") from None
        return cls(tuple(networks))

    def allows(self, address: Address) -> bool:
        """Whether a webhook may connect to ``address``."""
        if self.any_address:
            return True
        judged = _judged(address)
        if any(judged in network or address in network for network in self.allowed):
            return True
        return judged.is_global and not judged.is_multicast

    def literal_problem(self, url: str) -> str | None:
        """Why the URL's host, when it is an address or ``localhost``, is refused (None when
        it is allowed or a name that can only be judged when resolved)."""
        host = (httpx.URL(url).host or "").lower().rstrip(".")
        if host == LOCALHOST_NAMES[0] or host.endswith(LOCALHOST_NAMES[1]):
            host = "127.0.0.1"
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return None
        return None if self.allows(address) else _refusal(address)

    async def pin(self, url: str) -> Pinned:
        """Resolve the URL's host now and check every address; the request to send to the
        first one. TargetRefused when one is refused or the name does not resolve."""
        parsed = httpx.URL(url)
        host = parsed.raw_host.decode("ascii")
        try:
            addresses: list[Address] = [ipaddress.ip_address(host)]
        except ValueError:
            addresses = await _resolve(
                host, parsed.port or (443 if parsed.scheme == "https" else 80)
            )
        if not addresses:
            raise TargetRefused(f"{host!r} resolves to no address")
        for address in addresses:
            if not self.allows(address):
                raise TargetRefused(_refusal(address, host))
        extensions: dict[str, Any] = {}
        if parsed.scheme == "https":
            extensions["sni_hostname"] = host
        return Pinned(
            url=parsed.copy_with(host=str(addresses[0])),
            host_header=parsed.netloc.decode("ascii"),
            extensions=extensions,
        )


async def _resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to now (the loop's resolver runs it off the loop)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise TargetRefused(f"cannot resolve {host!r}: {exc}") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


@dataclass(frozen=True, slots=True)
class Pinned:
    """A delivery bound to a checked address."""

    url: httpx.URL
    host_header: str
    extensions: dict[str, Any]


def _refusal(address: Address, name: str | None = None) -> str:
    shown = f"{name!r} resolves to {address}" if name else f"{address}"
    return f"{shown}, not a public address (see SERVICE_WEBHOOK_ALLOWED_NETWORKS)"
