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

Every spelling of an address counts, read as the C library reads it when the socket layer
connects (``parse_host``): a host is IDNA-encoded first (so fullwidth or superscript digits
and ideographic full stops become ASCII ones), then ``inet_aton``'s forms are addresses
(``127.1``, ``2130706433``, ``0x7f.1``, ``0177.0.0.1`` and their mixtures). An IPv6 address
that stands for an IPv4 one is judged by it: IPv4-mapped (``::ffff:a.b.c.d``),
IPv4-compatible (``::a.b.c.d``) and NAT64 (``64:ff9b::a.b.c.d``) connect to that IPv4
address; 6to4 (``2002::/16``) and Teredo (``2001::/32``, its client address the inverted
last 32 bits) carry IPv4 addresses that must be allowed too; local-use NAT64
(``64:ff9b:1::/48``) is never public.

Two checks:

- when the webhooks are configured, a URL whose host is an address (or ``localhost``) that
  is refused answers 400, so a mistake shows at once; so does a host that is no host (the
  socket layer could not use it);
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
from typing import Any, Final
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

LOCALHOST_NAMES = ("localhost", ".localhost")


NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
"""RFC 6052's well-known prefix: the last 32 bits are the IPv4 address connected to."""
NAT64_LOCAL: Final = ipaddress.IPv6Network("64:ff9b:1::/48")
"""RFC 8215's local-use prefix: translated inside one network, never public."""
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_DECIMAL = frozenset("0123456789")
_OCTAL = frozenset("01234567")
_HEX = frozenset("0123456789abcdef")


class TargetRefused(Exception):
    """The URL's host is, or resolves to, an address webhooks may not reach."""


def ascii_host(host: str) -> str:
    """``host`` (as a URL gives it; IPv6 without brackets) as the socket layer sends it to
    the resolver: IDNA-encoded and lowercased. ValueError when it is no host.

    >>> ascii_host("\uff11\uff12\uff17.0.0.1"), ascii_host("Hooks.Example")
    ('127.0.0.1', 'hooks.example')
    """
    if ":" in host:
        return host.lower()
    try:
        encoded = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError(f"{host!r} is not a host name") from None
    if not encoded or not _HOST_CHARS.issuperset(encoded):
        raise ValueError(f"{host!r} is not a host name")
    return encoded


def parse_host(host: str) -> Address | None:
    """The address the C library connects to for ``host``, or None when ``host`` is a name
    to resolve. ValueError when it is no host.

    >>> [str(parse_host(h)) for h in ("127.1", "0x7f.1", "0177.0.0.1", "2130706433")]
    ['127.0.0.1', '127.0.0.1', '127.0.0.1', '127.0.0.1']
    >>> parse_host("08.1.1.1") is None, parse_host("hooks.example") is None
    (True, True)
    """
    name = ascii_host(host)
    if ":" in name:
        try:
            return ipaddress.IPv6Address(name.split("%", 1)[0])  # a zone id names no host
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv6 address") from None
    return _inet_aton(name)


def _inet_aton(text: str) -> ipaddress.IPv4Address | None:
    """glibc's ``inet_aton``: 1 to 4 dot-separated numbers, each decimal, octal (leading
    0) or hex (0x), the last one filling the bytes the others left."""
    parts = text.split(".")
    if len(parts) > 4:
        return None
    values = [_c_number(part) for part in parts]
    if any(value is None for value in values):
        return None
    *head, last = [value for value in values if value is not None]
    if any(value > 0xFF for value in head) or last >> (8 * (4 - len(head))):
        return None
    number = sum(value << (8 * (3 - index)) for index, value in enumerate(head)) + last
    return ipaddress.IPv4Address(number)


def _c_number(part: str) -> int | None:
    """One part as ``strtoul(part, &end, 0)`` reads it, None unless it reads all of it."""
    if part[:2] == "0x":
        digits, base, allowed = part[2:], 16, _HEX
    elif part[:1] == "0":
        digits, base, allowed = part, 8, _OCTAL
    else:
        digits, base, allowed = part, 10, _DECIMAL
    if not digits or not allowed.issuperset(digits):
        return None
    value = int(digits, base)
    return value if value <= 0xFFFFFFFF else None


def _translated(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address connects to: mapped, compatible or NAT64."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if int(address) >> 32 == 0 or address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _tunnelled(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries through a tunnel: 6to4, Teredo."""
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo  # (server, client), the client's bits already inverted
    return ()


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
        """Whether a webhook may connect to ``address`` (see the module docstring)."""
        if self.any_address:
            return True
        if isinstance(address, ipaddress.IPv6Address):
            inner = _translated(address)
            if inner is not None:
                return self._listed(address) or self._allows_one(inner)
            if not all(self._allows_one(carried) for carried in _tunnelled(address)):
                return False
            if address in NAT64_LOCAL:
                return self._listed(address)
        return self._allows_one(address)

    def _listed(self, address: Address) -> bool:
        return any(address in network for network in self.allowed)

    def _allows_one(self, address: Address) -> bool:
        return self._listed(address) or (address.is_global and not address.is_multicast)

    def literal_problem(self, url: str) -> str | None:
        """Why the URL cannot be a webhook's target as configured: its host is an address
        (any spelling, or ``localhost``) that is refused, or is no host. None when it is
        allowed or a name that can only be judged when resolved. Never raises."""
        try:
            target = _Target.of(url)
            name = target.ascii_host.rstrip(".")  # a trailing dot may still reach it
            if name == LOCALHOST_NAMES[0] or name.endswith(LOCALHOST_NAMES[1]):
                address: Address | None = ipaddress.IPv4Address("127.0.0.1")
            else:
                address = parse_host(name) if name else None
            target.url_for(ipaddress.IPv4Address("192.0.2.1"))  # the sender can build it
        except ValueError as exc:
            return f"an unusable host ({exc})"
        if address is None or self.allows(address):
            return None
        return _refusal(address, target.host if name != str(address) else None)

    def check_answers(self, host: str, addresses: list[Address], verb: str = "resolves to") -> None:
        """TargetRefused unless every address ``host`` stands for (the resolver's answers,
        or the one it spells) is allowed."""
        if not addresses:
            raise TargetRefused(f"{host!r} resolves to no address")
        for address in addresses:
            if not self.allows(address):
                raise TargetRefused(_refusal(address, host, verb))

    async def pin(self, url: str) -> Pinned:
        """Resolve the URL's host now and check every address; the request to send to the
        first one. TargetRefused when one is refused, the name does not resolve or the URL
        cannot be sent."""
        try:
            target = _Target.of(url)
            literal = parse_host(target.host)
        except ValueError as exc:
            raise TargetRefused(f"an unusable host ({exc})") from None
        if literal is not None:
            self.check_answers(target.host, [literal], verb="is")
            addresses: list[Address] = [literal]
        else:
            addresses = await _resolve(target.ascii_host, target.port or target.default_port)
            self.check_answers(target.host, addresses)
        extensions: dict[str, Any] = {}
        if target.scheme == "https":
            extensions["sni_hostname"] = str(literal) if literal else target.ascii_host
        try:
            pinned = target.url_for(addresses[0])
        except ValueError as exc:
            raise TargetRefused(f"the URL cannot be sent ({exc})") from None
        return Pinned(url=pinned, host_header=target.host_header, extensions=extensions)


@dataclass(frozen=True, slots=True)
class _Target:
    """A webhook URL taken apart, to be sent to a checked address instead of its host."""

    scheme: str
    host: str
    ascii_host: str
    port: int | None
    userinfo: str
    parts: SplitResult

    @classmethod
    def of(cls, url: str) -> _Target:
        """ValueError when the URL has no usable host or port."""
        parts = urlsplit(url)
        host = parts.hostname
        if not host:
            raise ValueError("no host")
        userinfo, _, _ = parts.netloc.rpartition("@")
        return cls(parts.scheme, host, ascii_host(host), parts.port, userinfo, parts)

    @property
    def default_port(self) -> int:
        return 443 if self.scheme == "https" else 80

    @property
    def host_header(self) -> str:
        shown = f"[{self.ascii_host}]" if ":" in self.ascii_host else self.ascii_host
        return shown if self.port is None else f"{shown}:{self.port}"

    def url_for(self, address: Address) -> httpx.URL:
        """The URL with its host replaced by ``address`` (ValueError if httpx refuses it)."""
        shown = f"[{address}]" if address.version == 6 else str(address)
        netloc = shown if self.port is None else f"{shown}:{self.port}"
        if self.userinfo:
            netloc = f"{self.userinfo}@{netloc}"
        try:
            return httpx.URL(urlunsplit(self.parts._replace(netloc=netloc)))
        except httpx.InvalidURL as exc:
            raise ValueError(str(exc)) from None


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


def _refusal(address: Address, name: str | None = None, verb: str = "is") -> str:
    shown = f"{name!r} {verb} {address}" if name else f"{address}"
    return f"{shown}, not a public address (see SERVICE_WEBHOOK_ALLOWED_NETWORKS)"
