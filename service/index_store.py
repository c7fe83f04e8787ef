"""Opening the persistent object index beside the journal, and when not to trust it.

WORK IN PROGRESS (issue 12, branch ``index-wip``).

The index (``service.meta.lmdb_index``) lives in ``<data_dir>/index/`` and is opened
without syncs: the journal is the durable truth, and the index is a checkpoint of applying
it that a start may resume from or rebuild. That is safe after a process crash (SIGKILL,
OOM): committed transactions sit in the page cache, which outlives the process, and LMDB's
copy-on-write commits leave a consistent tree. It is not safe after an operating-system
crash or power loss: with syncs off, LMDB may have written a meta page before the pages it
points to. So while the index is open a marker file (``index.open``) holds the kernel's
boot id; a start that finds the marker with another boot id knows the machine went down
with the index open and rebuilds it. A clean stop syncs the index and removes the marker.

Other reasons to rebuild (the engine decides, ``service.engine``): the index cannot be
opened, holds no committed state, is older than the journal's snapshot (the records it
would need are gone), or is ahead of the journal (it reached the disk and the journal's
tail did not: balanced mode after a power loss, or a journal restored from a backup).

Thread-safety: called from the engine's start and stop, on one thread at a time.
"""

from __future__ import annotations

import os

import lmdb

from fsseam.fs import FileSystem, make_dirs_durably
from service.meta.lmdb_index import LmdbObjectIndex

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


def open_index(fs: FileSystem, data_dir: str) -> tuple[LmdbObjectIndex, str | None]:
    """Open the index and mark it open; the reason it was wiped (None: kept as it was)."""
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
        index = LmdbObjectIndex(path)
    except lmdb.Error as exc:
        reason = f"the index could not be opened ({exc})"
        for name in fs.listdir(path):
            fs.unlink(os.path.join(path, name))
        index = LmdbObjectIndex(path)
    if reason is not None:
        index.wipe()
    out = fs.create(marker + ".tmp")
    try:
        out.write(current.encode())
        out.fsync()  # the marker must be on disk before the index may change
    finally:
        out.close()
    fs.rename(marker + ".tmp", marker)
    fs.fsync_dir(data_dir)  # the marker's name, likewise
    return index, reason


def close_index(fs: FileSystem, data_dir: str, index: LmdbObjectIndex) -> None:
    """Sync and close the index, then remove the marker: the next start may trust it."""
    index.sync()
    index.close()
    marker = os.path.join(data_dir, MARKER_FILENAME)
    if fs.exists(marker):
        fs.unlink(marker)
        fs.fsync_dir(data_dir)  # the marker's removal is what says "clean"
