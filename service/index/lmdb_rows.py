"""The rows of the LMDB object index: how a bucket's keys, their versions, usage and
references are laid out in bytes (``service.index.lmdb_index`` has the layout's overview and
the index itself).

Keys are ``bucket NUL key`` in UTF-8, which order as their code points; a key longer than
``KEY_LIMIT`` bytes lives in a node (``split_key``). Versions are one msgpack list per key
(``pack_versions``); a reference count is empty for one holder (``ref_count_of``). The
readers below walk a read transaction: ``BucketView`` as ``service.meta.listing`` reads a
sorted container, ``StoredRows`` for a snapshot encoded from rows as stored, ``RefsReader``
for the GC.

Thread-safety: pure helpers over a transaction the caller owns.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import msgpack

from service.meta.model import ObjectVersion, Usage, version_row
from service.meta.object_index import Versions

USAGE = struct.Struct(">QQ")
"""A bucket's usage: object count and bytes."""
KEY_LIMIT = 480
"""Bytes of ``bucket NUL key`` an LMDB key holds (LMDB's own limit is 511)."""
_NODE = b"\xff"
"""Ends the LMDB key of a node: never in UTF-8, so no plain key ends with it."""


def prefix_of(bucket: str) -> bytes:
    return bucket.encode() + b"\0"


def split_key(full: bytes) -> tuple[bytes, bytes | None]:
    """The LMDB key of ``bucket NUL key`` and, for a key past ``KEY_LIMIT``, its remainder.

    Every key longer than the limit lives in a node keyed by its first ``KEY_LIMIT`` bytes
    and 0xff: a msgpack map of remainders to values. The node sorts where its keys do: after
    every key that is a prefix of them, before every key above their common first bytes.
    """
    if len(full) <= KEY_LIMIT:
        return full, None
    return full[:KEY_LIMIT] + _NODE, full[KEY_LIMIT:]


def entries(txn: Any, db: Any, start: bytes, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``(bucket NUL key, value)`` from ``start`` on while they begin with ``prefix``, in
    byte order, nodes expanded."""
    cursor = txn.cursor(db=db)
    if not cursor.set_range(split_key(start)[0]):
        return
    head = prefix[:KEY_LIMIT]  # what a node's LMDB key holds of a longer prefix
    for raw in cursor.iternext(keys=True, values=False):
        if not raw.startswith(head):
            return
        if not raw.endswith(_NODE):
            if raw >= start and raw.startswith(prefix):
                yield raw, cursor.value()
            continue
        node = msgpack.unpackb(cursor.value())
        for remainder in sorted(node):
            full = raw[:-1] + remainder
            if full >= start and full.startswith(prefix):
                yield full, node[remainder]


def keys_from(txn: Any, db: Any, start: bytes, prefix: bytes) -> Iterator[bytes]:
    """``_entries`` without the values (for ``visible``, whose values are empty)."""
    cursor = txn.cursor(db=db)
    if not cursor.set_range(split_key(start)[0]):
        return
    head = prefix[:KEY_LIMIT]
    for raw in cursor.iternext(keys=True, values=False):
        if not raw.startswith(head):
            return
        if not raw.endswith(_NODE):
            if len(prefix) <= KEY_LIMIT or raw.startswith(prefix):
                yield raw  # a plain key is never below ``start`` (set_range)
            continue
        for remainder in sorted(msgpack.unpackb(cursor.value())):
            full = raw[:-1] + remainder
            if full >= start and full.startswith(prefix):
                yield full


def lookup(txn: Any, db: Any, full: bytes) -> bytes | None:
    raw, remainder = split_key(full)
    data = txn.get(raw, db=db)
    if remainder is None or data is None:
        return data  # type: ignore[no-any-return]
    value: bytes | None = msgpack.unpackb(data).get(remainder)
    return value


def store(txn: Any, db: Any, full: bytes, value: bytes | None) -> None:
    """Put (or, for None, delete) the value of ``bucket NUL key``."""
    raw, remainder = split_key(full)
    if remainder is None:
        if value is not None:
            txn.put(raw, value, db=db)
        else:
            txn.delete(raw, db=db)
        return
    data = txn.get(raw, db=db)
    node = {} if data is None else msgpack.unpackb(data)
    if value is not None:
        node[remainder] = value
    else:
        node.pop(remainder, None)
    if node:
        txn.put(raw, msgpack.packb(node), db=db)
    else:
        txn.delete(raw, db=db)


def ref_count_of(raw: bytes | None) -> int:
    """A reference count as ``refs`` stores it (empty: one)."""
    if raw is None:
        return 0
    return int(bytes(raw)) if raw else 1


def put_usage(txn: Any, db: Any, bucket: str, usage: Usage | None) -> None:
    if usage is None:
        txn.delete(bucket.encode(), db=db)
    else:
        txn.put(bucket.encode(), USAGE.pack(usage.object_count, usage.size_bytes), db=db)


def pack_versions(versions: Versions) -> bytes:
    data: bytes = msgpack.packb([version_row(v) for v in versions])
    return data


def unpack_versions(bucket: str, key: str, data: bytes) -> Versions:
    return tuple(
        ObjectVersion(bucket, key, *fields) for fields in msgpack.unpackb(data, use_list=False)
    )


class BucketView:
    """One bucket of one database, as ``listing`` reads a SortedList/SortedDict."""

    def __init__(self, txn: Any, db: Any, bucket: str) -> None:
        self._txn, self._db, self._bucket = txn, db, bucket
        self._prefix = prefix_of(bucket)

    def irange(self, minimum: str, inclusive: tuple[bool, bool]) -> Iterator[str]:
        start = self._prefix + minimum.encode()
        for full, _ in entries(self._txn, self._db, start, self._prefix):
            if full == start and not inclusive[0]:
                continue
            yield full[len(self._prefix) :].decode()

    def __getitem__(self, key: str) -> Versions:
        data = lookup(self._txn, self._db, self._prefix + key.encode())
        if data is None:
            raise KeyError(key)
        return unpack_versions(self._bucket, key, data)


class StoredRows:
    """A read transaction over the versions: each bucket's keys with their versions as
    stored (msgpack arrays of snapshot rows), for ``encode_snapshot`` to copy as they are.
    Use from one thread at a time; ``close`` when done."""

    def __init__(self, txn: Any, db: Any) -> None:
        self._txn, self._db = txn, db

    def count(self, bucket: str) -> int:
        prefix = prefix_of(bucket)
        return sum(1 for _ in entries(self._txn, self._db, prefix, prefix))

    def rows(self, bucket: str) -> Iterator[tuple[str, bytes]]:
        prefix = prefix_of(bucket)
        for full, data in entries(self._txn, self._db, prefix, prefix):
            yield full[len(prefix) :].decode(), bytes(data)

    def close(self) -> None:
        self._txn.abort()


class RefsReader:
    """``refs`` in one read transaction: whether a payload id is held. ``close`` when done."""

    def __init__(self, txn: Any, db: Any) -> None:
        self._txn, self._db = txn, db

    def __call__(self, payload_id: str) -> bool:
        return self._txn.get(payload_id.encode(), db=self._db) is not None

    def close(self) -> None:
        self._txn.abort()
