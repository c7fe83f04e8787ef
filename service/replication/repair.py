"""The scrub's repair from the other side: a rotten payload put back from a verified copy.

With a standby, every payload exists twice. When the scrub on either side quarantines one
(``service.upkeep.scrub``), it asks the other side for its copy through the same route the
standby copies payloads with, ``GET /api/v1/replication/payloads/{id}``
(``service.replication.wire``):

- a standby asks its primary, with ``SERVICE_FOLLOW_CREDENTIALS`` (``RepairFromPrimary``);
- a primary asks each standby that follows it, at the URL the standby names in
  ``X-Standby-Url`` with every request of the feed, with the credentials that standby
  presented there (an admin key of the primary, which the standby's own copy of the users
  accepts too; ``RepairFromStandbys``). A standby's wildcard listen address is taken as the
  address its requests come from. The primary thus needs no setting and holds no secret of
  its own for this: it sends a standby's credentials back to the URL that standby named.

The copy is used only once its size and SHA-256 match the record
(``service.storage.repair.place_repaired``: staged, verified, fsynced, renamed). A side that
quarantined the payload too answers 404; a copy that is rotten there, but not yet found by
that side's scrub, fails the check: either way the payload stays quarantined and listed as
corrupt, and the log says why. A part written in place (a direct id) is not repaired.

May import what ``service.replication`` may. ``repair`` runs its HTTP and disk work on the
engine's executor.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from service.engine.core import Engine
from service.replication.bootstrap import HTTP_TIMEOUT, PrimaryLink
from service.replication.feed import CONNECTED_SECONDS, ReplicationFeed
from service.replication.wire import PAYLOADS_PATH
from service.storage.direct import is_direct_id
from service.storage.repair import CopyRefused, place_repaired

log = logging.getLogger("service.replication")

WILDCARDS = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class Repair:
    """What a repair did: ``source`` names the side it came from, or ``problem`` says why
    the payload stays quarantined."""

    source: str | None
    problem: str | None = None


def standby_url(named: str, remote_ip: str) -> str | None:
    """The URL a standby named (``X-Standby-Url``), its wildcard host replaced by the
    address its request came from; None if it named none that can be used.

    >>> standby_url("http://0.0.0.0:9001", "10.0.0.7")
    'http://10.0.0.7:9001'
    >>> standby_url("https://standby.example:443/", "10.0.0.7")
    'https://standby.example:443'
    >>> standby_url("ftp://x", "10.0.0.7") is None, standby_url("", "10.0.0.7") is None
    (True, True)
    """
    try:
        parts = urlsplit(named.strip())
        hostname, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or hostname is None:
        return None
    if hostname in WILDCARDS:
        try:
            address = ipaddress.ip_address(remote_ip)
        except ValueError:
            return None
        hostname = f"[{address}]" if address.version == 6 else str(address)
    elif ":" in hostname:
        hostname = f"[{hostname}]"
    netloc = hostname if port is None else f"{hostname}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def fetch_and_place(
    engine: Engine,
    client: httpx.Client,
    payload_id: str,
    size: int,
    sha256: str,
) -> str | None:
    """Fetch ``payload_id`` through ``client`` and put it back once verified; None when it
    is, else why not (blocking)."""
    try:
        with client.stream("GET", f"{PAYLOADS_PATH}/{payload_id}") as answer:
            if answer.status_code == 404:
                return "its copy there is gone or quarantined too"
            if answer.status_code != 200:
                return f"it answered {answer.status_code}"
            place_repaired(
                engine.fs, engine.store.layout, payload_id, size, sha256, answer.iter_bytes()
            )
    except CopyRefused as exc:
        return f"its copy is not the one written ({exc})"
    except httpx.HTTPError as exc:
        return f"it cannot be reached ({type(exc).__name__})"
    return None


class RepairFromPrimary:
    """A standby's repairs: from its primary's copy."""

    def __init__(self, engine: Engine, primary: PrimaryLink) -> None:
        self._engine = engine
        self._primary = primary

    async def repair(self, payload_id: str, size: int, sha256: str) -> Repair:
        if is_direct_id(payload_id):
            return Repair(None, "a part written in place is not repaired")
        problem = await self._engine.run_blocking(self._fetch, payload_id, size, sha256)
        if problem is not None:
            return Repair(None, f"the primary {self._primary.url}: {problem}")
        return Repair("primary")

    def _fetch(self, payload_id: str, size: int, sha256: str) -> str | None:
        with self._primary.sync_client() as client:
            return fetch_and_place(self._engine, client, payload_id, size, sha256)


class RepairFromStandbys:
    """A primary's repairs: from the copy of a standby that follows it (the first whose
    copy proves good)."""

    def __init__(self, engine: Engine, feed: ReplicationFeed) -> None:
        self._engine = engine
        self._feed = feed

    async def repair(self, payload_id: str, size: int, sha256: str) -> Repair:
        if is_direct_id(payload_id):
            return Repair(None, "a part written in place is not repaired")
        problems = []
        for slot in sorted(self._feed.slots.values(), key=lambda each: -each.last_seen):
            if slot.url is None or slot.authorization is None:
                problems.append(f"standby {slot.standby_id} named no address")
                continue
            if not self._connected(slot.last_seen):
                problems.append(f"standby {slot.standby_id} is not connected")
                continue
            problem = await self._engine.run_blocking(
                self._fetch, slot.url, slot.authorization, payload_id, size, sha256
            )
            if problem is None:
                return Repair(f"standby:{slot.standby_id}")
            problems.append(f"standby {slot.standby_id} at {slot.url}: {problem}")
        return Repair(None, "; ".join(problems) or "no standby follows this primary")

    @staticmethod
    def _connected(last_seen: float) -> bool:
        return time.monotonic() - last_seen <= CONNECTED_SECONDS

    def _fetch(
        self, url: str, authorization: str, payload_id: str, size: int, sha256: str
    ) -> str | None:
        headers = {"Authorization": authorization}
        with httpx.Client(base_url=url, headers=headers, timeout=HTTP_TIMEOUT) as client:
            return fetch_and_place(self._engine, client, payload_id, size, sha256)
