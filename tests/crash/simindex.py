"""A simulated persistent index for the simulated disk: LMDB's durability, in one file.

LMDB cannot map a simulated file, so the crash tests run the engine with this index
instead (``Engine(index_factory=...)``). It keeps the versions, usage and references in an
in-memory ``ObjectIndex`` and, at every committed transaction, writes its whole image to
``<dir>/sim.index`` through the simulated file system the way LMDB opened with
``sync=False, metasync=False`` writes its pages: a new file renamed over the old one, with no
fsync. Only ``sync`` (a clean stop) fsyncs the file and the directory. So the durable image a
crash leaves is exactly what the last sync made durable, plus whatever unsynced writes the
crash image keeps: the index may come back lost (no file), stale (an older image), current,
ahead of the journal (the index's writes kept, the journal's tail lost), or torn (the file
cannot be read: the start wipes and rebuilds it, as for a damaged LMDB environment).

Images are small (the crash tests hold a few objects), so rewriting the whole image per
transaction costs nothing here; a real store writes only the pages it changed.

Thread-safety: as ``LmdbObjectIndex``: one writer; ``reader`` hands out private copies.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import msgpack

from fsseam.fs import FileSystem
from service.index.lmdb_index import FORMAT
from service.index.lmdb_rows import pack_versions, unpack_versions
from service.index.protocol import IndexUnreadableError
from service.meta.model import Usage
from service.meta.object_index import ObjectIndex

FILENAME = "sim.index"


class SimRows:
    """Stored rows of a copy of the versions (what a read transaction would see)."""

    def __init__(self, rows: dict[str, list[tuple[str, bytes]]]) -> None:
        self._rows = rows

    def count(self, bucket: str) -> int:
        return len(self._rows.get(bucket, []))

    def rows(self, bucket: str) -> Iterator[tuple[str, bytes]]:
        return iter(self._rows.get(bucket, []))

    def close(self) -> None:
        self._rows = {}


class SimIndex(ObjectIndex):
    """An ``ObjectIndex`` persisted to one simulated file per commit; see the docstring."""

    def __init__(self, fs: FileSystem, directory: str) -> None:
        super().__init__()
        self._fs = fs
        self._path = os.path.join(directory, FILENAME)
        self._meta: dict[str, Any] = {}
        self._batch = False
        if fs.exists(self._path):
            self._load()

    # -- persistence --------------------------------------------------------------------

    def _load(self) -> None:
        file = self._fs.open_read(self._path)
        try:
            data = file.read()
        finally:
            file.close()
        try:
            doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
            meta = doc["meta"]
            for bucket, rows in doc["versions"].items():
                self.add_bucket(
                    bucket, {key: unpack_versions(bucket, key, raw) for key, raw in rows}
                )
            usage = {bucket: Usage(*pair) for bucket, pair in doc["usage"].items()}
            refs = dict(doc["refs"])
        except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
            raise IndexUnreadableError(f"{self._path}: {exc!r}") from exc
        self._meta, self._usage, self._refs = meta, usage, refs

    def _persist(self) -> None:
        """Write the image as LMDB commits a transaction without syncs: nothing is fsynced."""
        doc = {
            "meta": self._meta,
            "versions": {
                bucket: [[key, pack_versions(versions)] for key, versions in keys.items()]
                for bucket, keys in self._versions.items()
            },
            "usage": {b: [u.object_count, u.size_bytes] for b, u in self._usage.items()},
            "refs": self._refs,
        }
        temp = self._path + ".tmp"
        if self._fs.exists(temp):
            self._fs.unlink(temp)
        file = self._fs.create(temp)
        try:
            file.write(msgpack.packb(doc, use_bin_type=True))
        finally:
            file.close()
        self._fs.rename(temp, self._path)

    def sync(self) -> None:
        if not self._fs.exists(self._path):
            self._persist()
        self._fs.fsync_file(self._path)
        self._fs.fsync_dir(os.path.dirname(self._path))

    # -- transactions and marks -----------------------------------------------------------

    def begin(self) -> None:
        assert not self._batch, "a batch is already open"
        self._batch = True

    @property
    def in_batch(self) -> bool:
        return self._batch

    def commit(
        self, sequence: int, crc: int, rest: bytes | None = None, latest_at: int | None = None
    ) -> None:
        self._batch = False
        self._meta["applied"] = [sequence, crc]
        if rest is not None:
            self._meta["rest"] = rest
        if latest_at is not None:
            self._meta["latest_at"] = latest_at
        self._persist()

    def latest_at(self) -> int:
        return int(self._meta.get("latest_at", 0))

    def rest(self) -> bytes | None:
        rest: bytes | None = self._meta.get("rest")
        return rest

    def wipe(self) -> None:
        self._versions.clear()
        self._visible.clear()
        self._usage.clear()
        self._refs.clear()
        self._meta = {"format": FORMAT}
        self._persist()

    def format(self) -> bytes | None:
        value: bytes | None = self._meta.get("format")
        return value

    def applied(self) -> tuple[int, int]:
        sequence, crc = self._meta.get("applied", (0, 0))
        return int(sequence), int(crc)

    def record_snapshot(self, sequence: int, crc: int) -> None:
        self._meta["snapshot"] = [sequence, crc]
        self._persist()

    def snapshot_mark(self) -> tuple[int, int]:
        sequence, crc = self._meta.get("snapshot", (0, 0))
        return int(sequence), int(crc)

    def reader(self) -> SimRows:
        assert not self._batch, "a reader sees committed batches only"
        return SimRows(
            {
                bucket: [(key, pack_versions(versions)) for key, versions in keys.items()]
                for bucket, keys in self._versions.items()
            }
        )

    def clear_stale_readers(self) -> int:
        return 0  # readers of the simulated index live in this process

    def close(self) -> None:
        self._batch = False


def sim_index_factory(fs: FileSystem) -> Any:
    """``Engine(index_factory=...)`` for a machine on ``fs``."""

    def open_index(directory: str) -> SimIndex:
        return SimIndex(fs, directory)

    return open_index
