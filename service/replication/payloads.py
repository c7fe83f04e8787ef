"""A standby's copies of the primary's payloads: written, verified, durable, then referenced.

The standby's promise is that a record is applied only once every byte it points to is on
the standby's own disk: each payload is written into a staging file (its SHA-256 computed
as it is written), its size and SHA-256 compared with what the record (or snapshot) says,
and renamed into place, with the PUT's own steps (``PayloadStore.create_staging`` and
``promote_checked``); then the whole batch is made durable together, as the primary's strict
small PUTs are (one ``syncfs`` of the data's file system, ``service.storage.groupsync``,
where the OS has one; in balanced mode ``PayloadIntegrity.sync_payloads``; per file in strict
mode without a ``syncfs``). Only then may the batch's records be appended. A part written in
place on the primary goes into the standby's own upload file at the same offset.

Where the bytes come from: a small payload (``wire.INLINE_MAX_BYTES``) arrives inside the
records answer that references it; the others come by the bulk payloads route, many to a
request and ``FETCH_CONNECTIONS`` requests at a time, streamed (through a ``PayloadSource``,
``service.replication.source``, so the crash matrix drives the same code without HTTP). One
request and two fsyncs per payload left the standby applying tens of small records a second
under load.

A payload already in place is not fetched again once its bytes verify (size and SHA-256):
it was written by these steps (ids are never reused), perhaps by an attempt that a crash
stopped before its batch's sync, which is what lets a bootstrap or a follower resume
without copying again what it has. A sync that fails removes the batch's new files (their
bytes are not known durable), so the retry writes them again.

A payload the primary no longer holds (a later record released it, or it was lost there)
is quarantined here, as a restore does a payload the archive marks lost: the record still
applies, the version answers as a quarantined one would, and a later record that released
it removes it.

Crash points: ``standby.payloads_written`` (a batch's payloads in place, not yet synced),
``standby.payloads_stored`` (durable, its records not yet appended).

Thread-safety: ``fetch`` blocks (HTTP and disk): run it on the engine's executor, one call
at a time per fetcher; it runs its requests on threads of its own (the payload store and
the source (an ``HttpSource``) take concurrent calls, as a primary's concurrent PUTs do).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from fsseam import crashpoints
from service.archive.refs import PayloadRef
from service.engine.core import Engine
from service.replication.wire import BULK_MAX_IDS, NOT_HELD
from service.storage.direct import parse_direct_id
from service.storage.payloads import DigestMismatch

log = logging.getLogger("service.replication")

FETCH_CONNECTIONS = 4
"""Bulk payload requests in flight at once."""
REQUEST_BYTES = 32 << 20
"""A bulk request asks for about this many bytes at most (a larger payload goes alone)."""


Chunks = Iterable[bytes | memoryview]
"""A payload's bytes as they arrive (views of a connection's reads, ``source``)."""


class ReplicationError(Exception):
    """The primary's answer cannot be used (a status, a payload that fails its SHA-256);
    the follower retries after a pause."""


class PayloadSource(Protocol):
    """Where payload bytes come from (``service.replication.source``: the primary's bulk
    payloads route, or an in-process primary in the crash matrix)."""

    def payloads(self, group: list[PayloadRef]) -> Iterator[tuple[str, int, Chunks]]:
        """``(id, size, chunks)`` of each payload of ``group`` as it arrives; ``size`` is
        ``NOT_HELD`` (and no chunks) for one the primary no longer holds. Each entry's
        chunks are read before the next entry is asked for."""
        ...


@dataclass
class Fetched:
    """What one ``fetch`` did."""

    payloads: int = 0
    bytes: int = 0
    lost: list[str] = field(default_factory=list)
    placed: list[str] = field(default_factory=list)
    """The payloads written by this call (made durable by it, or by its caller)."""


class PayloadFetcher:
    """Copies payloads from the primary into this data dir (module docstring)."""

    def __init__(
        self, engine: Engine, source: PayloadSource, connections: int = FETCH_CONNECTIONS
    ) -> None:
        """``connections``: bulk requests in flight at once (1: one after another, in order,
        as the crash matrix needs to replay the same file operations every time)."""
        self._engine = engine
        self._source = source
        self._connections = connections
        store = engine.store
        self._each_synced = engine.config.durability == "strict" and store.fs_sync is None
        """Strict without a ``syncfs``: each file fsynced as a PUT's (nothing shares one)."""

    def missing(self, refs: Iterable[PayloadRef]) -> list[PayloadRef]:
        """The refs whose payloads are not in place here with their bytes (each id once)."""
        seen: set[str] = set()
        out = []
        for ref in refs:
            if ref.payload_id in seen:
                continue
            seen.add(ref.payload_id)
            if not self._engine.store.verify(ref.payload_id, ref.size, ref.sha256):
                out.append(ref)
        return out

    def fetch(
        self,
        refs: Iterable[PayloadRef],
        inline: Mapping[str, bytes] | None = None,
        sync: bool = True,
    ) -> Fetched:
        """Place every payload of ``refs`` not in place yet: from ``inline`` (bytes by id)
        when there, else fetched. ``sync``: durable on return; else the caller makes
        ``placed`` durable (``durable_by_caller``) before any record may name them."""
        done = Fetched()
        missing = self.missing(refs)
        given = inline or {}
        groups = _requests([ref for ref in missing if ref.payload_id not in given])
        if self._connections <= 1:
            # In order: the inline payloads, then each request (the crash matrix's replays).
            self._place_inline(missing, given, done)
            outcomes = [each for group in groups for each in self._fetch_group(group)]
        else:
            # Leaving the block waits for every request, so none is still writing when an
            # error (the first to fail) reaches the caller; what was placed stays (verified,
            # and made durable by the retry's sync).
            with ThreadPoolExecutor(
                min(self._connections, max(1, len(groups))), thread_name_prefix="standby-fetch"
            ) as requests:
                running = requests.map(self._fetch_group, groups)
                self._place_inline(missing, given, done)
                outcomes = [each for group in running for each in group]
        for ref, stored in outcomes:
            if stored:
                done.placed.append(ref.payload_id)
            else:
                done.lost.append(ref.payload_id)
        done.payloads = len(done.placed)
        sizes = {ref.payload_id: ref.size for ref in missing}
        done.bytes = sum(sizes[each] for each in done.placed)
        crashpoints.hit("standby.payloads_written")
        if sync:
            try:
                self._sync(done.placed)
            except OSError as exc:
                self._remove(done.placed)
                raise ReplicationError(f"syncing the copied payloads failed: {exc}") from exc
            self.stored(done)
        return done

    def _place_inline(
        self, missing: list[PayloadRef], given: Mapping[str, bytes], done: Fetched
    ) -> None:
        for ref in missing:
            if ref.payload_id in given:
                self._write(ref, iter((given[ref.payload_id],)))
                done.placed.append(ref.payload_id)

    def syncs_the_file_system(self) -> bool:
        """Whether one sync makes every placed payload durable (strict with a ``syncfs``):
        then ``fetch(sync=False)`` and ``sync_all`` may cover many batches at once."""
        return self._engine.config.durability == "strict" and self._engine.store.fs_sync is not None

    def sync_all(self) -> None:
        """``syncs_the_file_system``: every payload placed so far durable (``OSError`` if
        the sync failed; ``forget`` what it was to cover)."""
        fs_sync = self._engine.store.fs_sync
        assert fs_sync is not None
        fs_sync.sync()

    def durable_by_caller(self) -> bool:
        """Whether ``fetch(sync=False)`` may leave the sync to the engine's shared
        ``syncfs`` (``Engine.payload_sync``: strict, with a ``syncfs``)."""
        return self._engine.payload_sync is not None

    def stored(self, done: Fetched) -> None:
        """The batch's payloads are durable: quarantine the lost ones."""
        for payload_id in done.lost:
            log.warning("payload %s is no longer on the primary: quarantined here", payload_id)
            self._engine.integrity.quarantine(payload_id)
        crashpoints.hit("standby.payloads_stored")

    def forget(self, placed: list[str]) -> None:
        """A batch whose sync failed: its files are not known durable (remove them)."""
        self._remove(placed)

    def _sync(self, placed: list[str]) -> None:
        if not placed or self._each_synced:
            return  # each file and its directory fsynced as it was placed
        if self._engine.config.durability == "strict":
            self.sync_all()  # the whole batch's files and renames durable at once
        else:
            # Balanced: the payloads must be on disk before a record may name them here.
            self._engine.integrity.sync_payloads(placed)

    def _remove(self, payload_ids: list[str]) -> None:
        with contextlib.suppress(OSError):
            self._engine.store.remove(payload_ids)  # a direct part's goes with its upload

    def _fetch_group(self, group: list[PayloadRef]) -> list[tuple[PayloadRef, bool]]:
        """One bulk request: each payload written as it streams; (ref, held) for each."""
        wanted = {ref.payload_id: ref for ref in group}
        out: list[tuple[PayloadRef, bool]] = []
        for name, size, chunks in self._source.payloads(group):
            ref = wanted.pop(name, None)
            if ref is None:
                raise ReplicationError(f"the primary sent payload {name}, not asked for")
            if size == NOT_HELD:
                out.append((ref, False))
                continue
            if size != ref.size:
                raise ReplicationError(f"payload {name}: {size} bytes, not {ref.size}")
            self._write(ref, chunks)
            out.append((ref, True))
        if wanted:
            raise ReplicationError(f"the primary's answer lacks {len(wanted)} payloads")
        return out

    def _write(self, ref: PayloadRef, chunks: Chunks) -> None:
        located = parse_direct_id(ref.payload_id)
        if located is None:
            self._store(ref, chunks)
        else:
            self._store_direct(ref, located, chunks)

    def _store(self, ref: PayloadRef, chunks: Chunks) -> None:
        store = self._engine.store
        synced = self._each_synced
        staging = store.create_staging(synced=synced)  # hashed as written
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
            # Renamed into place only once its SHA-256 matches (durable with its batch).
            store.promote_checked(staged, ref.payload_id, ref.sha256, synced=synced)
        except DigestMismatch:
            raise ReplicationError(f"payload {ref.payload_id} fails its SHA-256") from None

    def _store_direct(self, ref: PayloadRef, located: tuple[str, int, int], chunks: Chunks) -> None:
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


def _requests(refs: list[PayloadRef]) -> list[list[PayloadRef]]:
    """``refs`` in bulk requests of at most ``BULK_MAX_IDS`` ids and about
    ``REQUEST_BYTES``, spread so that ``FETCH_CONNECTIONS`` requests share the work."""
    if not refs:
        return []
    total = sum(ref.size for ref in refs)
    share = max(1, min(REQUEST_BYTES, total // FETCH_CONNECTIONS + 1))
    count = max(1, min(BULK_MAX_IDS, -(-len(refs) // FETCH_CONNECTIONS)))
    groups: list[list[PayloadRef]] = [[]]
    size = 0
    for ref in refs:
        if groups[-1] and (len(groups[-1]) >= count or size + ref.size > share):
            groups.append([])
            size = 0
        groups[-1].append(ref)
        size += ref.size
    return groups
