"""A standby's copies of the primary's payloads: fetched, verified, durable, then referenced.

The standby's promise is that a record is applied only once every byte it points to is on
the standby's own disk: a payload is streamed from the primary into a staging file, its size
and SHA-256 compared with what the record (or snapshot) says, fsynced, and renamed into
place, with the PUT's own steps (``PayloadStore.create_staging`` and ``promote_checked``).
A part written in place on the primary goes into the standby's own upload file at the same
offset. A payload already in place is not fetched again: it got there only through these
steps (ids are never reused), which is what lets a bootstrap or a follower resume after a
crash without copying again what it has (in balanced durability, once its bytes check out:
``PayloadFetcher._has``).

A payload the primary no longer holds (404: a later record released it, or it was lost
there) is quarantined here, as a restore does a payload the archive marks lost: the record
still applies, the version answers as a quarantined one would, and a later record that
released it removes it.

Crash point: ``standby.payloads_stored`` (a batch's payloads durable, its records not yet
appended).

Payloads are fetched ``FETCH_CONNECTIONS`` at a time: one request and its fsyncs after
another left the standby applying tens of small records a second under a primary's write load
(each copy waits for a busy primary's answer, then for its own disk), while the copies are
independent until the batch's records are appended, which waits for all of them.

Thread-safety: ``fetch`` blocks (HTTP and disk): run it on the engine's executor, one call
at a time per fetcher; it runs its copies on threads of its own (the payload store and the
source (an ``HttpSource``) take concurrent calls, as a primary's concurrent PUTs do).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from fsseam import crashpoints
from service.archive.refs import PayloadRef
from service.engine.core import Engine
from service.storage.direct import parse_direct_id
from service.storage.payloads import DigestMismatch

log = logging.getLogger("service.replication")

FETCH_CONNECTIONS = 8
"""Payload copies in flight at once (requests to the primary, each with its own fsyncs)."""


class ReplicationError(Exception):
    """The primary's answer cannot be used (a status, a payload that fails its SHA-256);
    the follower retries after a pause."""


class PayloadSource(Protocol):
    """Where payload bytes come from (``service.replication.source``: the primary over
    HTTP, or an in-process one in the crash matrix)."""

    def payload(self, payload_id: str) -> AbstractContextManager[Iterable[bytes] | None]:
        """The payload's bytes, or None when the primary no longer holds it."""
        ...


@dataclass
class Fetched:
    """What one ``fetch`` did."""

    payloads: int = 0
    bytes: int = 0
    lost: list[str] = field(default_factory=list)


class PayloadFetcher:
    """Copies payloads from the primary into this data dir (module docstring)."""

    def __init__(
        self, engine: Engine, source: PayloadSource, connections: int = FETCH_CONNECTIONS
    ) -> None:
        """``connections``: copies in flight at once (1: one after another, in order, as
        the crash matrix needs to replay the same file operations every time)."""
        self._engine = engine
        self._source = source
        self._connections = connections

    def missing(self, refs: Iterable[PayloadRef]) -> list[PayloadRef]:
        """The refs whose payloads are not in place here (each id once)."""
        seen: set[str] = set()
        out = []
        for ref in refs:
            if ref.payload_id in seen:
                continue
            seen.add(ref.payload_id)
            if not self._has(ref):
                out.append(ref)
        return out

    def _has(self, ref: PayloadRef) -> bool:
        """Strict: a payload's name is there only once its bytes were fsynced. Balanced:
        its bytes are synced with its batch's, after the rename, so a power cut before that
        may keep the name and tear the bytes (the crash matrix's ``standby_bootstrap`` found
        a resumed bootstrap keeping such copies): the copy is read and checked."""
        store = self._engine.store
        strict = self._engine.config.durability == "strict"
        if parse_direct_id(ref.payload_id) is not None or not strict:
            return store.verify(ref.payload_id, ref.size, ref.sha256)
        return self._engine.fs.exists(store.layout.payload_path(ref.payload_id))

    def fetch(self, refs: Iterable[PayloadRef]) -> Fetched:
        """Fetch every payload of ``refs`` not in place yet; durable on return."""
        done = Fetched()
        placed: list[str] = []
        missing = self.missing(refs)
        if len(missing) > 1 and self._connections > 1:
            # Leaving the block waits for every copy, so none is still writing when an error
            # (the first copy's to fail, raised by ``list``) reaches the caller.
            with ThreadPoolExecutor(
                min(self._connections, len(missing)), thread_name_prefix="standby-fetch"
            ) as copies:
                outcomes = list(copies.map(self._fetch_one, missing))
        else:
            outcomes = [self._fetch_one(ref) for ref in missing]
        for ref, stored in zip(missing, outcomes, strict=True):
            if stored:
                placed.append(ref.payload_id)
                done.payloads += 1
                done.bytes += ref.size
            else:
                done.lost.append(ref.payload_id)
        if placed and self._engine.config.durability != "strict":
            # Balanced: the payloads must be on disk before a record may name them here.
            self._engine.integrity.sync_payloads(placed)
        for payload_id in done.lost:
            log.warning("payload %s is no longer on the primary: quarantined here", payload_id)
            self._engine.integrity.quarantine(payload_id)
        crashpoints.hit("standby.payloads_stored")
        return done

    def _fetch_one(self, ref: PayloadRef) -> bool:
        """Copy one payload; False when the primary no longer holds it."""
        with self._source.payload(ref.payload_id) as chunks:
            if chunks is None:
                return False
            located = parse_direct_id(ref.payload_id)
            if located is None:
                self._store(ref, chunks)
            else:
                self._store_direct(ref, located, chunks)
        return True

    def _store(self, ref: PayloadRef, chunks: Iterable[bytes]) -> None:
        store = self._engine.store
        staging = store.create_staging()  # strict: fsynced when finished, as a PUT's body
        try:
            for chunk in chunks:
                staging.write(chunk)
            staged = staging.finish()
        except BaseException:
            staging.discard()
            raise
        if staged.size != ref.size:
            store.discard_staged(staged)
            raise ReplicationError(f"payload {ref.payload_id}: {staged.size} bytes, not {ref.size}")
        try:
            # Renamed into place (and its directory fsynced) only once its SHA-256 matches.
            store.promote_checked(staged, ref.payload_id, ref.sha256)
        except DigestMismatch:
            raise ReplicationError(f"payload {ref.payload_id} fails its SHA-256") from None

    def _store_direct(
        self, ref: PayloadRef, located: tuple[str, int, int], chunks: Iterable[bytes]
    ) -> None:
        upload_id, offset, size = located
        writer = self._engine.store.open_direct_part(upload_id, offset, size)
        try:
            for chunk in chunks:
                writer.write(chunk)
            staged = writer.finish()  # strict: the upload's file fsynced
        except BaseException:
            writer.discard()
            raise
        if staged.size != ref.size or staged.sha256 != ref.sha256.lower():
            raise ReplicationError(f"part {ref.payload_id} fails its size or SHA-256")
