"""Index benchmark: LMDB against SQLite (WAL) as the persistent metadata index (issue 12).

Both stores hold the same rows: one per object version, keyed by ``bucket NUL key`` and
valued by the msgpack'd record the engine would keep (payload id and SHA-256 as raw bytes,
size, content type, metadata, times), about 70 bytes. Keys are ``dNNNN/fNNNN.jpg``: N
objects in ``sqrt(N)`` "directories", so a delimiter listing has work to skip.

``run()`` measures, per store, at N objects (1,000,000 in the full profile):

- populate: rows/s loading N rows in key order, 10,000 per transaction;
- apply: rows/s writing new keys in transactions of 1, 16 and 256 rows (the journal's group
  commit hands the engine one batch per fsync; the store itself is not synced per batch,
  since the journal is the durable truth: LMDB ``sync=False``, SQLite ``synchronous=OFF``);
- point lookups/s: get + decode of random existing keys, one thread;
- a 1,000-key listing page: prefix ``dNNNN/`` with delimiter ``/`` in the middle of the
  bucket, and a delimiter-only page at the root (1,000 common prefixes, each found by
  seeking past the previous one);
- bytes per object on disk (pages in use, not the sparse map size).

Run with ``python -m bench --only index``. Takes about a minute in the full profile.

Thread-safety: a script.
"""

from __future__ import annotations

import math
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import lmdb
import msgpack

from bench import Profile, Row, scratch_dir

SIZES = {"full": 1_000_000, "quick": 200_000, "smoke": 2_000}
LOAD_BATCH = 10_000
APPLY_BATCHES = (1, 16, 256)
APPLY_SECONDS = {"full": 1.0, "quick": 0.5, "smoke": 0.05}
LOOKUPS = {"full": 200_000, "quick": 50_000, "smoke": 500}
PAGE = 1000
MAP_BYTES = 64 << 30
"""LMDB's address-space reservation (sparse: only pages in use take disk)."""


def object_key(index: int, width: int) -> str:
    """The ``index``-th key in order: ``dDDDD/fFFFF.jpg`` with ``width`` files per directory."""
    return f"d{index // width:04d}/f{index % width:04d}.jpg"


def record(index: int) -> bytes:
    """The msgpack'd version record the engine would store for one object."""
    rng = random.Random(index)
    return msgpack.packb(
        [
            None,  # version id (null version)
            rng.randbytes(16),  # payload id
            4096 + index % 977,  # size
            "image/jpeg",
            rng.randbytes(32),  # sha256
            {},  # custom metadata
            1_790_000_000_000 + index,  # created_at
            1_790_000_000_000 + index,  # updated_at
        ]
    )


def encode(bucket: str, key: str) -> bytes:
    return bucket.encode() + b"\0" + key.encode()


class Store(Protocol):
    name: str

    def load(self, rows: Iterator[tuple[bytes, bytes]]) -> None: ...
    def apply(self, rows: list[tuple[bytes, bytes]]) -> None: ...
    def get(self, key: bytes) -> bytes | None: ...
    def page(self, prefix: bytes, delimiter: bytes | None, limit: int) -> int: ...
    def disk_bytes(self) -> int: ...
    def close(self) -> None: ...


def _after(prefix: bytes) -> bytes:
    """The first key past every key that starts with ``prefix`` (prefix ends below 0xff)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


class LmdbStore:
    name = "LMDB"

    def __init__(self, path: str) -> None:
        self.env = lmdb.open(
            path, map_size=MAP_BYTES, sync=False, metasync=False, readahead=False, max_dbs=4
        )
        self.db = self.env.open_db(b"objects")

    def load(self, rows: Iterator[tuple[bytes, bytes]]) -> None:
        batch: list[tuple[bytes, bytes]] = []
        for row in rows:
            batch.append(row)
            if len(batch) == LOAD_BATCH:
                self._put(batch, append=True)
                batch = []
        if batch:
            self._put(batch, append=True)

    def _put(self, rows: list[tuple[bytes, bytes]], *, append: bool = False) -> None:
        with self.env.begin(write=True, db=self.db) as txn:
            txn.cursor().putmulti(rows, append=append)

    def apply(self, rows: list[tuple[bytes, bytes]]) -> None:
        self._put(rows)

    def get(self, key: bytes) -> bytes | None:
        with self.env.begin(db=self.db, buffers=False) as txn:
            value: bytes | None = txn.get(key)
            return value

    def page(self, prefix: bytes, delimiter: bytes | None, limit: int) -> int:
        """Entries (keys and common prefixes) of one listing page; decodes each record."""
        found = 0
        with self.env.begin(db=self.db) as txn:
            cursor = txn.cursor()
            positioned = cursor.set_range(prefix)
            while positioned and found < limit:
                key = cursor.key()
                if not key.startswith(prefix):
                    break
                if delimiter is not None:
                    cut = key.find(delimiter, len(prefix))
                    if cut >= 0:
                        found += 1
                        positioned = cursor.set_range(_after(key[: cut + 1]))
                        continue
                msgpack.unpackb(cursor.value())
                found += 1
                positioned = cursor.next()
        return found

    def disk_bytes(self) -> int:
        info = self.env.info()
        return int((info["last_pgno"] + 1) * self.env.stat()["psize"])

    def close(self) -> None:
        self.env.close()


class SqliteStore:
    name = "SQLite (WAL)"

    def __init__(self, path: str) -> None:
        self.path = os.path.join(path, "index.sqlite")
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("PRAGMA cache_size=-65536")
        self.db.execute("CREATE TABLE objects (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")

    def load(self, rows: Iterator[tuple[bytes, bytes]]) -> None:
        batch: list[tuple[bytes, bytes]] = []
        for row in rows:
            batch.append(row)
            if len(batch) == LOAD_BATCH:
                self.apply(batch)
                batch = []
        if batch:
            self.apply(batch)

    def apply(self, rows: list[tuple[bytes, bytes]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT OR REPLACE INTO objects VALUES (?, ?)", rows)
        self.db.execute("COMMIT")

    def get(self, key: bytes) -> bytes | None:
        row = self.db.execute("SELECT v FROM objects WHERE k = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def page(self, prefix: bytes, delimiter: bytes | None, limit: int) -> int:
        found = 0
        low, high = prefix, _after(prefix)
        while found < limit:
            rows = self.db.execute(
                "SELECT k, v FROM objects WHERE k >= ? AND k < ? ORDER BY k LIMIT ?",
                (low, high, limit - found),
            )
            first = found
            for key, value in rows:  # a lazy cursor: a break leaves the rest unread
                if delimiter is not None:
                    cut = key.find(delimiter, len(prefix))
                    if cut >= 0:
                        found += 1
                        low = _after(key[: cut + 1])
                        break
                msgpack.unpackb(value)
                found += 1
                low = key + b"\0"
            if found == first:
                break
        return found

    def disk_bytes(self) -> int:
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        free = self.db.execute("PRAGMA freelist_count").fetchone()[0]
        size = self.db.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def close(self) -> None:
        self.db.close()


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.inf


def _timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure(store: Store, count: int, profile: str) -> dict[str, float]:
    """Every figure of one store at ``count`` objects."""
    width = max(1, math.isqrt(count))
    bucket = "photos"
    figures: dict[str, float] = {}
    rows = ((encode(bucket, object_key(i, width)), record(i)) for i in range(count))
    figures["populate rows/s"] = _rate(count, _timed(lambda: store.load(rows)))
    figures["bytes/object"] = store.disk_bytes() / count
    rng = random.Random(7)
    keys = [
        encode(bucket, object_key(rng.randrange(count), width)) for _ in range(LOOKUPS[profile])
    ]

    def lookups() -> None:
        for key in keys:
            value = store.get(key)
            assert value is not None
            msgpack.unpackb(value)

    figures["lookups/s"] = _rate(len(keys), _timed(lookups))
    middle = encode(bucket, f"d{(count // width) // 2:04d}/")
    pages = 20
    seconds = _timed(lambda: [store.page(middle, b"/", PAGE) for _ in range(pages)])
    figures["page prefix+delimiter ms"] = seconds / pages * 1000
    root = encode(bucket, "")
    seconds = _timed(lambda: [store.page(root, b"/", PAGE) for _ in range(pages)])
    figures["page delimiter only ms"] = seconds / pages * 1000
    fresh = count
    value = record(0)  # built once: the figure is the store's, not msgpack's
    for size in APPLY_BATCHES:
        written = 0
        deadline = time.perf_counter() + APPLY_SECONDS[profile]
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            store.apply([(encode("fresh", f"k{fresh + i:09d}"), value) for i in range(size)])
            fresh += size
            written += size
        figures[f"apply rows/s, {size}/txn"] = _rate(written, time.perf_counter() - started)
    return figures


def run(profile: Profile) -> list[Row]:
    count = SIZES.get(profile.name, SIZES["quick"])
    results: dict[str, dict[str, float]] = {}
    for factory in (LmdbStore, SqliteStore):
        with scratch_dir("index-") as path:
            store = factory(path)
            try:
                results[store.name] = measure(store, count, profile.name)
            finally:
                store.close()
    lmdb_figures, sqlite_figures = results["LMDB"], results["SQLite (WAL)"]
    return [
        {
            "measurement": f"{name}, {count:,} objects",
            "LMDB": lmdb_figures[name],
            "SQLite WAL": sqlite_figures[name],
            "LMDB / SQLite": lmdb_figures[name] / sqlite_figures[name],
        }
        for name in lmdb_figures
    ]
