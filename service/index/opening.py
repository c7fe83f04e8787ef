"""Opening the persistent object index beside the journal, and when not to trust it.

The index (``service.index.lmdb_index``) lives in ``<data_dir>/index/`` and is opened
without syncs: the journal is the durable truth, and the index is a checkpoint of applying
it that a start may resume from or rebuild. That is safe after a process crash (SIGKILL,
OOM): committed transactions sit in the page cache, which outlives the process, and LMDB's
copy-on-write commits leave a consistent tree. It is not safe after an operating-system
crash or power loss: with syncs off, LMDB may have written a meta page before the pages it
points to. So while the index is open a marker file (``index.open``) holds the kernel's
boot id; a start that finds the marker with another boot id knows the machine went down
with the index open and rebuilds it. A clean stop syncs the index and removes the marker.

Other reasons to rebuild (``load_state``): the index cannot be opened, holds no committed
state, is older than the journal's snapshot (the records it would need are gone), is ahead
of the journal (it reached the disk and the journal's tail did not: balanced mode after a
power loss, or a journal restored from a backup), or was built from another journal: the
index keeps a CRC-32 of the last event it applied and of the last snapshot written from it,
and a start checks the one it resumes at against this journal (``IndexMismatchError``
when the record turns up different during the replay).

Thread-safety: called from the engine's start and stop, on one thread at a time.
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Mapping
from typing import Any

from fsseam.durable import make_dirs_durably
from fsseam.fs import FileSystem
from journal import Journal
from journal.framing import encode_event
from journal.snapshot import SnapshotReader
from service.index.lmdb_index import FORMAT
from service.index.protocol import IndexFactory, IndexUnreadableError, PersistentIndex
from service.meta import MetaState, encode_snapshot
from service.meta.frozen import FrozenState
from service.meta.model import ObjectVersion, Usage
from service.meta.refs import PayloadRefs
from service.meta.snapshot import SnapshotFormatError, VersionRows, decode_image, stream_image

log = logging.getLogger("service.engine")

INDEX_DIRNAME = "index"
MARKER_FILENAME = "index.open"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def boot_id(fs: FileSystem) -> str:
    """This boot of the kernel ("unknown" where there is no boot id: then every unclean
    stop counts as a machine restart)."""
    try:
        file = fs.open_read(BOOT_ID_PATH)
    except OSError:
        return "unknown"
    try:
        return file.read().decode().strip() or "unknown"
    finally:
        file.close()


def open_index(
    fs: FileSystem, data_dir: str, factory: IndexFactory
) -> tuple[PersistentIndex, str | None]:
    """Open the index (``factory``: LMDB on a real disk) and mark it open; the reason it
    was wiped (None: kept as it was)."""
    path = os.path.join(data_dir, INDEX_DIRNAME)
    marker = os.path.join(data_dir, MARKER_FILENAME)
    make_dirs_durably(fs, path)
    current = boot_id(fs)
    reason: str | None = None
    if fs.exists(marker):
        file = fs.open_read(marker)
        try:
            previous = file.read().decode(errors="replace").strip()
        finally:
            file.close()
        if previous != current or current == "unknown":
            reason = "the machine restarted while the index was open"
    try:
        index = factory(path)
    except IndexUnreadableError as exc:
        reason = f"the index could not be opened ({exc})"
        for name in fs.listdir(path):
            fs.unlink(os.path.join(path, name))
        index = factory(path)
    if reason is not None:
        index.wipe()
    if fs.exists(marker + ".tmp"):
        fs.unlink(marker + ".tmp")  # left by a crash between create and rename
    out = fs.create(marker + ".tmp")
    try:
        out.write(current.encode())
        out.fsync()  # the marker must be on disk before the index may change
    finally:
        out.close()
    fs.rename(marker + ".tmp", marker)
    fs.fsync_dir(data_dir)  # the marker's name, likewise
    return index, reason


def close_index(fs: FileSystem, data_dir: str, index: PersistentIndex) -> None:
    """Sync and close the index, then remove the marker: the next start may trust it."""
    index.sync()
    index.close()
    marker = os.path.join(data_dir, MARKER_FILENAME)
    if fs.exists(marker):
        fs.unlink(marker)
        fs.fsync_dir(data_dir)  # the marker's removal is what says "clean"


class IndexMismatchError(Exception):
    """The journal's record at the index's sequence is not the one the index applied."""


def event_crc(event: Mapping[str, Any]) -> int:
    """The CRC-32 of an event as the journal encodes it: which record the index applied."""
    return zlib.crc32(encode_event(dict(event)))


def rest_of(state: MetaState) -> bytes:
    """Everything of the state but its object versions, as the index keeps it."""
    return encode_snapshot(state.freeze(objects=False))


def load_state(
    index: PersistentIndex, reason: str | None, journal: Journal
) -> tuple[MetaState, int, int | None]:
    """The state to replay the journal onto: ``(state, sequence it is at, CRC-32 that the
    record at that sequence must have, or None when nothing is left to check)``. The index
    is rebuilt from the journal's snapshot (and the start logs why) unless it can be
    trusted (see the module docstring). Blocking."""
    last = journal.stats().last_sequence
    base = journal.snapshot.sequence if journal.snapshot else 0
    applied, crc = index.applied()
    rest = index.rest()
    if reason is None and rest is None and last > 0:
        reason = "the index holds no state"
    elif reason is None and rest is not None and index.format() != FORMAT:
        reason = "the index was written in an older layout"
    elif reason is None and applied > last:
        reason = f"the index (at {applied}) is ahead of the journal (at {last})"
    elif reason is None and applied < base:
        reason = f"the index (at {applied}) is older than the journal's snapshot ({base})"
    elif (
        reason is None
        and applied == base
        and journal.snapshot is not None
        and index.snapshot_mark() != (base, journal.snapshot.crc)
    ):
        reason = "the index was not built from this journal (its snapshot differs)"
    if reason is None and rest is not None:
        try:
            state = MetaState.reopen(decode_image(rest), index)
            state.locks.observe_time(index.latest_at())  # newer than the rest's, when so
        except SnapshotFormatError as exc:
            reason = f"the index is damaged ({exc})"
        else:
            log.info("index at sequence %d; replaying the journal after it", applied)
            return state, applied, crc if applied > base else None
    if reason is not None:
        log.warning("rebuilding the index from the journal: %s", reason)
    return rebuild(index, journal), base, None


REBUILD_BATCH = 10_000
"""Keys loaded from the snapshot per index transaction during a rebuild (what LMDB holds
of a write transaction's dirty pages in memory until it commits)."""


class _Loader:
    """Loads a snapshot's keys into an emptied index as they are read, counting each
    bucket's usage and each payload's references as ``MetaState.restore`` does."""

    def __init__(self, index: PersistentIndex) -> None:
        self._index = index
        self._refs = PayloadRefs(index)
        self.usage: dict[str, Usage] = {}
        self._loaded = 0

    def key(self, bucket: str, key: str, rows: VersionRows) -> None:
        if bucket not in self.usage:
            self.bucket(bucket)
        versions = tuple(ObjectVersion(bucket, key, *row) for row in rows)
        self._index.set_versions(bucket, key, (), versions)
        for version in versions:
            if version.payload_id is not None:
                self.usage[bucket] = self.usage[bucket].plus(version.size)
                self._refs.ref(version.payload_id)
        self._loaded += 1
        if self._loaded % REBUILD_BATCH == 0:
            # Neither a sequence nor the rest: until the last commit the index holds no
            # state, so a start that finds it half loaded rebuilds it (``load_state``).
            self._index.commit(0, 0)
            self._index.begin()

    def bucket(self, name: str) -> None:
        """Index a bucket of the snapshot (before its first key; once)."""
        self._index.add_bucket(name)
        self.usage[name] = Usage()

    def parts(self, image: FrozenState) -> None:
        """The references the open uploads' parts hold."""
        for parts in image.parts.values():
            for part in parts.values():
                self._refs.ref(part.payload_id)


def rebuild(index: PersistentIndex, journal: Journal) -> MetaState:
    """Empty the index and load the journal's snapshot into it, streamed: the snapshot's
    objects are read and loaded a key at a time, ``REBUILD_BATCH`` keys per transaction, so
    a rebuild takes the memory of one batch whatever the number of objects. The crc is
    checked once the snapshot has been read (``SnapshotDamagedError``; the index then holds
    no state, and the next attempt empties it again). Blocking."""
    snapshot = journal.snapshot
    index.wipe()
    index.begin()
    if snapshot is None:
        state = MetaState.restore(MetaState().freeze(), index)
        index.commit(0, 0, rest_of(state))
        return state
    loader = _Loader(index)
    reader = SnapshotReader(snapshot)
    try:
        try:
            image = stream_image(reader, loader.key)
        except SnapshotFormatError:
            reader.check()  # damage is why it did not decode: SnapshotDamagedError
            raise
        reader.check()
    except BaseException:
        if index.in_batch:
            index.commit(0, 0)  # what was loaded, with no state: never trusted
        raise
    finally:
        reader.close()
    for name in image.buckets:
        if name not in loader.usage:
            loader.bucket(name)  # a bucket without objects
        index.set_usage(name, loader.usage[name])
    loader.parts(image)
    state = MetaState.reopen(image, index)
    index.commit(snapshot.sequence, 0, rest_of(state), state.locks.latest_at)
    index.record_snapshot(snapshot.sequence, snapshot.crc)
    return state
