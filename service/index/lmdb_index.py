"""The object index in LMDB: the same interface as ``ObjectIndex``, off the Python heap.

Layout (one LMDB environment, named databases):

- ``versions``: ``bucket NUL key`` -> msgpack list of the key's versions, oldest first, each
  ``[version_id, payload_id, size, content_type, sha256, custom_metadata, created_at,
  updated_at, is_delete_marker]`` and, for a version with a retention or legal hold,
  ``retention_mode, retain_until, legal_hold`` after them (``service.meta.model.version_row``);
- ``visible``: ``bucket NUL key`` -> empty, for the keys whose latest version is not a
  delete marker (listings never step over deleted keys);
- ``usage``: bucket name -> its usage (object count, bytes), for every bucket;
- ``refs``: payload id -> how many records hold it (an empty value for one, the usual
  case; absent for none): the GC asks it whether a payload file is referenced;
- ``meta``: ``applied`` -> the journal sequence of the last event applied and a CRC-32 of
  that event (the "consistent index", written in the same transaction as the event's
  effects; the CRC tells this journal's record from another's), ``snapshot`` -> the
  sequence and crc32c (its file's own checksum) of the last journal snapshot written while
  the index was current (a start that resumes at a snapshot checks it), ``rest`` -> the
  rest of the state at that sequence (buckets, uploads, accounts, video jobs: small), as a
  snapshot without objects, rewritten only by batches that changed it, and ``format`` ->
  the layout (``FORMAT``; an index without it, or with another, is rebuilt).

Bucket names never hold NUL, so ``bucket NUL`` is an exact prefix, and keys order by their
UTF-8 bytes, which is the order of their code points: the order ``service.meta.listing``
pages in. An object listing walks the cursors in bytes (``service.index.lmdb_listing``); a
version listing reuses that module unchanged: a ``BucketView`` offers the two things it
asks of a container (``irange`` from a bound, ``[key]``) over an LMDB cursor.

Writes go into the batch's write transaction (``begin``/``commit``, one per journal batch)
or, outside a batch, into a transaction of their own. Reads inside a batch see its writes.

Usage and references are written by ``apply`` in the same transaction as the versions, so
a start reads them as they are (never recounts), and a process that only reads (a worker
of several serving processes: ``LmdbObjectIndex(path, readonly=True)``) finds everything it needs in
the environment: versions, listings, ``usage``/``usages``, ``applied`` and ``rest``.

Thread-safety: one writer at a time (the start's replay on a worker thread, then the
event-loop thread), each write transaction begun and committed on one thread; reads from
any thread open their own read transaction (an MVCC snapshot). The decoded-version cache is
the event-loop thread's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import Any

import lmdb

from service.index import lmdb_listing
from service.index.lmdb_rows import (
    KEY_LIMIT,
    USAGE,
    BucketView,
    RefsReader,
    StoredRows,
    entries,
    keys_from,
    lookup,
    pack_versions,
    prefix_of,
    put_usage,
    ref_count_of,
    store,
    unpack_versions,
)
from service.index.protocol import IndexUnreadableError
from service.meta import listing
from service.meta.model import ObjectPage, ObjectVersion, Usage, VersionPage
from service.meta.object_index import BucketImage, Versions, visible

CACHE_ENTRIES = 8192
"""Decoded versions of recently read keys kept (a hot GET skips LMDB and msgpack)."""
MAP_BYTES = 1 << 40
"""Address space reserved for the map (sparse on disk: only pages in use take space)."""
FORMAT = b"2"
"""What the index's layout is: 2 keeps usage and references (an index without it is rebuilt)."""
_FORMAT = b"format"
_APPLIED = b"applied"
_REST = b"rest"
_SNAPSHOT = b"snapshot"
_LATEST = b"latest_at"
_TIME = struct.Struct(">q")
_MARK = struct.Struct(">QI")
"""A sequence and a CRC-32: which journal record (or snapshot) the index was built from."""


class LmdbObjectIndex:
    """Object versions of every bucket in an LMDB environment at ``path``."""

    def __init__(self, path: str, *, sync: bool = False, readonly: bool = False) -> None:
        """``readonly``: a reader beside the writing process (several may open it at once;
        LMDB's lock file coordinates them); it never begins a batch."""
        try:
            self.env = lmdb.open(
                path,
                map_size=MAP_BYTES,
                max_dbs=8,
                sync=sync,
                metasync=sync,
                readahead=False,
                readonly=readonly,
            )
            create = not readonly
            self._versions = self.env.open_db(b"versions", create=create)
            self._visible = self.env.open_db(b"visible", create=create)
            self._usage = self.env.open_db(b"usage", create=create)
            self._refs = self.env.open_db(b"refs", create=create)
            self._meta = self.env.open_db(b"meta", create=create)
        except lmdb.Error as exc:
            raise IndexUnreadableError(str(exc)) from exc
        self._batch: Any = None
        self._cache: dict[tuple[str, str], Versions] = {}
        self._usage_pending: dict[str, Usage | None] = {}
        """Usages the open batch changed, written into it once at ``commit`` (a batch of
        2,048 objects in one bucket changes its usage 2,048 times)."""

    # -- transactions -------------------------------------------------------------------

    def begin(self) -> None:
        """Open the write transaction of one journal batch."""
        assert self._batch is None, "a batch is already open"
        self._batch = self.env.begin(write=True)

    @property
    def in_batch(self) -> bool:
        return self._batch is not None

    def commit(
        self, sequence: int, crc: int, rest: bytes | None = None, latest_at: int | None = None
    ) -> None:
        """Record ``sequence`` (whose event has CRC-32 ``crc``) as applied, ``rest`` if the
        batch changed it and the newest event time ``latest_at``, and commit the batch with
        them, atomically."""
        txn, self._batch = self._batch, None
        for bucket, usage in self._usage_pending.items():
            put_usage(txn, self._usage, bucket, usage)
        self._usage_pending.clear()
        txn.put(_APPLIED, _MARK.pack(sequence, crc), db=self._meta)
        if rest is not None:
            txn.put(_REST, rest, db=self._meta)
        if latest_at is not None:
            txn.put(_LATEST, _TIME.pack(latest_at), db=self._meta)
        txn.commit()

    def latest_at(self) -> int:
        """The newest event time committed with a batch (ms; 0: none)."""
        with self.env.begin() as txn:
            raw = txn.get(_LATEST, db=self._meta)
        return 0 if raw is None else int(_TIME.unpack(raw)[0])

    def rest(self) -> bytes | None:
        """The rest of the state as of ``applied`` (None: never committed)."""
        with self.env.begin() as txn:
            raw = txn.get(_REST, db=self._meta)
        return None if raw is None else bytes(raw)

    def drop_cache(self) -> None:
        """Forget the decoded versions (another process wrote the index since they were read)."""
        self._cache.clear()

    def wipe(self) -> None:
        """Forget everything (before a rebuild)."""
        self._cache.clear()
        self._usage_pending.clear()
        with self.env.begin(write=True) as txn:
            for db in (self._versions, self._visible, self._usage, self._refs, self._meta):
                txn.drop(db, delete=False)
            txn.put(_FORMAT, FORMAT, db=self._meta)

    def format(self) -> bytes | None:
        """The layout the index was built with (None: before formats were recorded)."""
        with self.env.begin() as txn:
            raw = txn.get(_FORMAT, db=self._meta)
        return None if raw is None else bytes(raw)

    def sync(self) -> None:
        """Make every committed transaction durable (the store is opened without syncs)."""
        self.env.sync(True)

    def applied(self) -> tuple[int, int]:
        """The sequence and CRC-32 of the last event the index holds the effects of
        ((0, 0): none)."""
        return self._mark(_APPLIED)

    def record_snapshot(self, sequence: int, crc: int) -> None:
        """Note that the journal's snapshot at ``sequence`` (CRC-32 ``crc``) was written from
        this index's state."""
        with self.env.begin(write=True) as txn:
            txn.put(_SNAPSHOT, _MARK.pack(sequence, crc), db=self._meta)

    def snapshot_mark(self) -> tuple[int, int]:
        """The (sequence, CRC-32) of the last snapshot noted ((0, 0): none)."""
        return self._mark(_SNAPSHOT)

    def _mark(self, name: bytes) -> tuple[int, int]:
        with self.env.begin() as txn:
            raw = txn.get(name, db=self._meta)
        if raw is None:
            return 0, 0
        sequence, crc = _MARK.unpack(raw)
        return int(sequence), int(crc)

    def clear_stale_readers(self) -> int:
        """Free the reader slots of processes that died inside a read transaction (a worker
        SIGKILLed mid-read), which would otherwise pin old pages: the file would only grow.
        How many were freed."""
        return int(self.env.reader_check())

    def close(self) -> None:
        if self._batch is not None:
            self._batch.abort()
            self._batch = None
        self._usage_pending.clear()
        self.env.close()

    def _write(self) -> Any:
        return self._batch if self._batch is not None else self.env.begin(write=True)

    def _done(self, txn: Any) -> None:
        if txn is not self._batch:
            txn.commit()

    def _read(self) -> Any:
        return self._batch if self._batch is not None else self.env.begin()

    # -- the ObjectIndex interface ------------------------------------------------------

    def add_bucket(
        self, bucket: str, versions_by_key: Mapping[str, Versions] | None = None
    ) -> None:
        txn = self._write()
        for key, versions in (versions_by_key or {}).items():
            self._put(txn, bucket, key, (), versions)
        self._done(txn)

    def drop_bucket(self, bucket: str) -> Iterator[ObjectVersion]:
        self._cache.clear()
        prefix = prefix_of(bucket)
        txn = self._write()
        dropped: list[ObjectVersion] = []
        for full, data in entries(txn, self._versions, prefix, prefix):
            dropped.extend(unpack_versions(bucket, full[len(prefix) :].decode(), data))
        for db in (self._versions, self._visible):
            cursor = txn.cursor(db=db)
            positioned = cursor.set_range(prefix)
            while positioned and cursor.key().startswith(prefix):
                positioned = cursor.delete()
        self._done(txn)
        return iter(dropped)

    def holds_any(self, bucket: str) -> bool:
        prefix = prefix_of(bucket)
        txn = self._read()
        try:
            cursor = txn.cursor(db=self._versions)
            return bool(cursor.set_range(prefix) and cursor.key().startswith(prefix))
        finally:
            self._end_read(txn)

    def versions(self, bucket: str, key: str) -> Versions:
        cached = self._cache.get((bucket, key))
        if cached is not None:
            return cached
        txn = self._read()
        try:
            data = lookup(txn, self._versions, prefix_of(bucket) + key.encode())
        finally:
            self._end_read(txn)
        versions = () if data is None else unpack_versions(bucket, key, data)
        if len(self._cache) >= CACHE_ENTRIES:
            del self._cache[next(iter(self._cache))]  # the oldest entry
        self._cache[bucket, key] = versions
        return versions

    def set_versions(self, bucket: str, key: str, before: Versions, after: Versions) -> None:
        txn = self._write()
        self._put(txn, bucket, key, before, after)
        self._done(txn)

    def reader(self) -> StoredRows:
        """The committed versions as of now, for a snapshot encoded on another thread."""
        assert self._batch is None, "a reader sees committed batches only"
        return StoredRows(self.env.begin(), self._versions)

    def image(self) -> dict[str, BucketImage]:
        """Every bucket's keys and versions (buckets with no key are absent)."""
        result: dict[str, BucketImage] = {}
        txn = self._read()
        try:
            for full, data in entries(txn, self._versions, b"", b""):
                bucket_raw, _, key_raw = full.partition(b"\0")
                bucket, key = bucket_raw.decode(), key_raw.decode()
                keys, versions = result.setdefault(bucket, ([], {}))
                keys.append(key)
                versions[key] = unpack_versions(bucket, key, data)
        finally:
            self._end_read(txn)
        return result

    def list_objects(
        self, bucket: str, prefix: str, delimiter: str | None, limit: int, start_after: str | None
    ) -> ObjectPage:
        txn = self._read()
        versions = self._versions

        def versions_of(full: bytes) -> bytes:
            data = txn.get(full, db=versions) if len(full) <= KEY_LIMIT else None
            if data is None:  # a long key, in a node
                data = lookup(txn, versions, full)
            assert data is not None, "a visible key has versions"
            return data

        try:
            return lmdb_listing.list_objects(
                lambda start, within: keys_from(txn, self._visible, start, within),
                versions_of,
                bucket,
                prefix,
                delimiter,
                limit,
                start_after,
            )
        finally:
            self._end_read(txn)

    def list_versions(
        self, bucket: str, prefix: str, limit: int, start_after: tuple[str, int] | None
    ) -> VersionPage:
        txn = self._read()
        try:
            view = BucketView(txn, self._versions, bucket)
            return listing.list_versions(view, prefix, limit, start_after)
        finally:
            self._end_read(txn)

    # -- counters -----------------------------------------------------------------------

    def usage(self, bucket: str) -> Usage:
        """The bucket's usage as of the last committed batch (or the open one's writes)."""
        if bucket in self._usage_pending:
            return self._usage_pending[bucket] or Usage()
        txn = self._read()
        try:
            raw = txn.get(bucket.encode(), db=self._usage)
        finally:
            self._end_read(txn)
        return Usage() if raw is None else Usage(*USAGE.unpack(raw))

    def set_usage(self, bucket: str, usage: Usage | None) -> None:
        if self._batch is not None:
            self._usage_pending[bucket] = usage
            return
        with self.env.begin(write=True) as txn:
            put_usage(txn, self._usage, bucket, usage)

    def usages(self) -> dict[str, Usage]:
        """Every bucket's usage."""
        txn = self._read()
        try:
            cursor = txn.cursor(db=self._usage)
            stored = {
                bytes(name).decode(): Usage(*USAGE.unpack(raw))
                for name, raw in cursor.iternext(keys=True, values=True)
            }
        finally:
            self._end_read(txn)
        for bucket, usage in self._usage_pending.items():
            if usage is None:
                stored.pop(bucket, None)
            else:
                stored[bucket] = usage
        return stored

    def ref_count(self, payload_id: str) -> int:
        """How many records hold the payload (loop thread: sees the open batch)."""
        txn = self._read()
        try:
            raw = txn.get(payload_id.encode(), db=self._refs)
        finally:
            self._end_read(txn)
        return ref_count_of(raw)

    def set_ref_count(self, payload_id: str, count: int) -> None:
        txn = self._write()
        if count > 0:
            txn.put(payload_id.encode(), b"" if count == 1 else str(count).encode(), db=self._refs)
        else:
            txn.delete(payload_id.encode(), db=self._refs)
        self._done(txn)

    def referenced(self) -> Iterator[str]:
        """Every payload id held, from one read transaction."""
        with self.env.begin() as txn:
            for raw in txn.cursor(db=self._refs).iternext(keys=True, values=False):
                yield bytes(raw).decode()

    def holder(self) -> RefsReader:
        """Whether a payload is held, as of the last committed batch, for as long as the
        GC pass that asks takes (one read transaction: an MVCC snapshot); for any thread."""
        return RefsReader(self.env.begin(), self._refs)

    # -- helpers ------------------------------------------------------------------------

    def _end_read(self, txn: Any) -> None:
        if txn is not self._batch:
            txn.abort()

    def _put(self, txn: Any, bucket: str, key: str, before: Versions, after: Versions) -> None:
        self._cache.pop((bucket, key), None)
        full = prefix_of(bucket) + key.encode()
        store(txn, self._versions, full, pack_versions(after) if after else None)
        was, now = visible(before), visible(after)
        if was and not now:
            store(txn, self._visible, full, None)
        elif now and not was:
            store(txn, self._visible, full, b"")
