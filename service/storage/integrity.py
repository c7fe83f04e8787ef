"""What makes balanced durability safe after a power loss: syncs, a marker, a quarantine.

In ``balanced`` durability payload files are never fsynced on the write path, yet journal
records naming them become durable (a segment roll or a snapshot fsyncs the log). After a
power loss such a record may name a payload whose bytes never reached the disk. Three rules
keep that from ever serving wrong bytes:

1. Before a snapshot is written, every payload referenced by a record since the previous
   snapshot is fsynced (``sync_payloads``), with the directories above it. So everything a
   snapshot covers is on disk, and only records after the newest snapshot can name a
   payload that is not.
2. While a server that may leave unsynced payloads runs, a marker file exists
   (``mark_unsynced``); a clean stop removes it after its final snapshot. Finding it at
   start means the last run ended uncleanly.
3. Every few seconds a checkpoint fsyncs the payloads named since the previous one and
   records, in the marker (fsynced), the sequence they reach. After an unclean start the
   engine verifies (size and SHA-256) every payload referenced by a record replayed after
   that checkpoint (and the snapshot), and moves each one that fails into the quarantine
   (``quarantine``). The quarantine is durable (a directory of ids), so a later clean start
   still refuses to serve those bytes; reads of a quarantined payload answer an integrity
   error instead. The GC drops quarantine entries once nothing references them.

"Fsynced" in rules 1 and 3: where the OS has a trustworthy ``syncfs(2)``, one sync of the
data's file system stands in for the fsync of each payload and directory (a checkpoint
under load names thousands of payloads; see ``docs/durability.md``).

Every file operation goes through the ``fsseam.fs.FileSystem`` seam. Methods block: call
them from executor threads. Thread-safety: no state of its own besides immutable paths;
concurrent calls touch different files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

from fsseam import crashpoints
from fsseam.fs import FileSystem, FsSync
from service.storage import direct, layout
from service.storage.layout import Layout

INTEGRITY_CRASH_POINTS = ("storage.quarantined",)
"""The crash points this module passes."""


class PayloadIntegrity:
    """The marker, payload syncs and the quarantine of one data root."""

    def __init__(self, fs: FileSystem, paths: Layout, fs_sync: FsSync | None = None) -> None:
        """``fs_sync``: a handle on the data's file system (``FileSystem.open_syncfs``),
        which ``sync_payloads`` then uses instead of an fsync per payload."""
        self._fs = fs
        self._layout = paths
        self._fs_sync = fs_sync

    # -- the unclean-shutdown marker -----------------------------------------------------

    def unsynced_checkpoint(self) -> int | None:
        """None when the last run ended cleanly; else the checkpoint it recorded: every
        payload named by a record up to that sequence is on disk (0: none recorded)."""
        marker = self._layout.unsynced_marker
        try:
            file = self._fs.open_read(marker)
        except FileNotFoundError:
            return None
        try:
            text = file.read().decode(errors="replace").strip()
        finally:
            file.close()
        return int(text) if text.isdigit() else 0

    def mark_unsynced(self, checkpoint: int = 0) -> None:
        """Create or replace the marker, durably, holding ``checkpoint`` (the sequence up
        to which every payload named by a record is on disk), before any payload is
        written without an fsync."""
        marker = self._layout.unsynced_marker
        temp = marker + ".tmp"
        if self._fs.exists(temp):
            self._fs.unlink(temp)  # left by a crash mid-write
        file = self._fs.create(temp)
        try:
            file.write(str(checkpoint).encode())
            file.fsync()
        finally:
            file.close()
        self._fs.rename(temp, marker)
        # The marker must be on disk before the first unsynced payload can be lost.
        self._fs.fsync_dir(self._layout.root)

    def clear_unsynced_mark(self) -> None:
        """Remove the marker, durably: every referenced payload is on disk now."""
        with contextlib.suppress(FileNotFoundError):
            self._fs.unlink(self._layout.unsynced_marker)
        # A marker resurrected by a crash would only cost a needless verification, but a
        # clean stop should leave a clean disk.
        self._fs.fsync_dir(self._layout.root)

    # -- syncing -------------------------------------------------------------------------

    def sync_payloads(self, payload_ids: Iterable[str]) -> int:
        """Fsync each payload still present and every directory above it; return how many
        (released ones are skipped). A direct part's id fsyncs its upload's file (once) and
        the assembly directory. With a file-system handle, the whole file system is synced
        once instead: one flush for every payload written in the last few seconds (the
        count is then every id given)."""
        if self._fs_sync is not None:
            given = sum(1 for _ in payload_ids)
            try:
                self._fs_sync.sync()
                return given
            except OSError:
                # The error was reported once, to this handle, and may have dropped pages
                # of any file: never trust a later syncfs with them. An fsync of each file
                # checks that file's own error state, so the caller's retry goes that way.
                self._fs_sync = None
                raise
        directories: dict[str, None] = {}
        synced = 0
        upload_files: dict[str, None] = {}
        for payload_id in payload_ids:
            located = direct.parse_direct_id(payload_id)
            if located is not None:
                upload_files[direct.direct_path(self._layout.assembly_dir, located[0])] = None
                continue
            try:
                # Written without an fsync (balanced); a snapshot is about to rely on it.
                self._fs.fsync_file(self._layout.payload_path(payload_id))
            except FileNotFoundError:
                continue
            synced += 1
            first, leaf = self._layout.fan_out_dirs(payload_id)
            directories[leaf] = None
            directories[first] = None
        for path in upload_files:
            try:
                self._fs.fsync_file(path)
            except FileNotFoundError:
                continue
            synced += 1
            directories[self._layout.assembly_dir] = None
        if directories:
            directories[self._layout.payloads_dir] = None
            directories[self._layout.root] = None
        for directory in directories:
            self._fs.fsync_dir(directory)  # the file's name, and each directory's own name
        return synced

    # -- the quarantine ------------------------------------------------------------------

    def quarantine(self, payload_id: str) -> None:
        """Move a payload that failed verification aside, durably; it is never served.

        A payload whose file is gone altogether leaves an empty entry: the name alone
        records the verdict; so does a direct part (its bytes share their upload's file).
        """
        directory = self._layout.quarantine_dir
        if not self._fs.exists(directory):
            self._fs.mkdir(directory)
            self._fs.fsync_dir(self._layout.root)  # the quarantine's own entry
        if direct.is_direct_id(payload_id):
            with contextlib.suppress(FileExistsError):
                self._fs.create(os.path.join(directory, payload_id)).close()
            crashpoints.hit("storage.quarantined")
            self._fs.fsync_dir(directory)
            return
        source = self._layout.payload_path(payload_id)
        target = os.path.join(directory, payload_id)
        try:
            self._fs.rename(source, target)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                self._fs.create(target).close()
        # A crash mid-move can leave the file linked under both names, and rename() between
        # two links of one file does nothing (POSIX): drop the old name explicitly.
        with contextlib.suppress(FileNotFoundError):
            self._fs.unlink(source)
        crashpoints.hit("storage.quarantined")
        # The verdict must outlive a crash, or the bad bytes would be served again.
        self._fs.fsync_dir(directory)
        # And the payload's old name must not come back beside it.
        with contextlib.suppress(FileNotFoundError):
            self._fs.fsync_dir(self._layout.payload_dir(payload_id))

    def finish_quarantine(self, payload_ids: Iterable[str]) -> int:
        """Complete moves a crash interrupted: a quarantined id whose payload file came
        back beside its entry is moved again. Return how many were."""
        moved = 0
        for payload_id in payload_ids:
            if direct.is_direct_id(payload_id):
                continue  # nothing to move
            if self._fs.exists(self._layout.payload_path(payload_id)):
                self.quarantine(payload_id)
                moved += 1
        return moved

    def quarantined_ids(self) -> set[str]:
        """Ids in the quarantine (empty when there is none)."""
        try:
            names = self._fs.listdir(self._layout.quarantine_dir)
        except FileNotFoundError:
            return set()
        return {name for name in names if _is_entry_name(name)}

    def release_quarantined(self, payload_ids: Iterable[str]) -> int:
        """Drop quarantine entries nothing references any more; return how many."""
        removed = 0
        for payload_id in payload_ids:
            if not _is_entry_name(payload_id):
                raise ValueError(f"not a payload id: {payload_id!r}")
            try:
                self._fs.unlink(os.path.join(self._layout.quarantine_dir, payload_id))
            except FileNotFoundError:
                continue
            removed += 1
        return removed


def _is_entry_name(name: str) -> bool:
    """A payload id or a direct part id (both safe as file names)."""
    return layout.is_valid_payload_id(name) or direct.is_direct_id(name)
