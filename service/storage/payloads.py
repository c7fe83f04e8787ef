"""The payload store: the only code that creates, promotes, reads and deletes payload files.

A PUT stages its body (``create_staging`` -> ``StagingFile``), the store promotes the sealed
file under a fresh payload id with an atomic rename, and only then does the engine commit
the metadata that references the id. So a crash at any point leaves either nothing visible
or an unreferenced payload file, which ``collect_garbage`` removes once it is older than the
grace period (younger ones may belong to a PUT between promote and commit).

In ``strict`` durability every step that a later step depends on is made durable first: the
staged data before the rename, the rename (and any fan-out directory it needed) before the
journal commit. In ``balanced`` durability the OS writes back when it likes.

Every file operation goes through the ``fsseam.fs.FileSystem`` seam. All methods block;
call them from executor threads. They are safe to call concurrently: the only shared
mutable state is the set of fan-out directories known to exist, guarded by a lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from fsseam import crashpoints
from fsseam.fs import FileSystem, FsSync, ReadableFile
from journal.model import Durability
from service.storage import direct, layout
from service.storage.assembly import Assembly
from service.storage.dirsync import DirectorySync, GroupedIds
from service.storage.layout import Layout
from service.storage.staging import WRITEBACK_BYTES, StagedPayload, StagingFile

STORAGE_CRASH_POINTS = (
    "put.staging_created",
    "put.chunk_written",
    "put.body_complete",
    "put.after_data_fsync",
    "put.after_rename",
    "put.after_dir_fsync",
    "put.after_group_sync",
    "multipart.mid_join",
    "multipart.assembly_appended",
    "multipart.assembly_rewound",
    "multipart.direct_written",
    "multipart.direct_copied",
    "multipart.direct_sealed",
    "gc.batch",
    "staging.sweep",
)
"""The names this package passes to ``fsseam.crashpoints.hit``, in PUT order first."""

JOIN_BUFFER_BYTES = 8 * 1024 * 1024
"""Window of a multipart join: big enough that syscalls are noise, small enough to ignore."""
JOIN_WINDOWS = 2
"""Windows a join circulates: one being hashed on a helper thread while the next is read
and its span copied by the kernel (``StagingFile.append_pipelined``), so memory is two
windows per join."""
VERIFY_BUFFER_BYTES = 1024 * 1024
GC_BATCH = 256
"""Files unlinked between two directory fsyncs (and two ``gc.batch`` crash points)."""


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DigestMismatch(ValueError):
    """A body's SHA-256 is not the one its request declared; nothing was written."""

    def __init__(self, actual: str) -> None:
        super().__init__("the body's SHA-256 does not match the declared one")
        self.actual = actual


@dataclass(frozen=True, slots=True)
class GcResult:
    """What one garbage-collection pass did."""

    removed: int
    """Files deleted: unreferenced payloads and junk names, all older than the grace period."""
    kept_young: int
    """Unreferenced files spared because they are younger than the grace period."""
    scanned: int
    """Files looked at in the payload tree."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """A file found in the payload tree; ``payload_id`` is None for a name that is no id."""

    path: str
    payload_id: str | None


class PayloadStore:
    """Payload files of one data root; see the module docstring."""

    def __init__(
        self,
        root: str,
        *,
        fs: FileSystem,
        durability: Durability,
        clock: Callable[[], float] = time.time,
        writeback_bytes: int = WRITEBACK_BYTES,
    ) -> None:
        """Create the staging and payload directories if missing (blocking, at startup).

        ``writeback_bytes``: in strict mode, a staging file starts writeback each time this
        much more was written (0: never; see ``service.storage.staging``).
        """
        if durability not in ("strict", "balanced"):
            raise ValueError(f"unknown durability {durability!r}")
        self._fs = fs
        self._layout = Layout(root)
        self._strict = durability == "strict"
        self._clock = clock
        self._writeback_bytes = writeback_bytes
        self._dir_lock = threading.Lock()
        self._ready_dirs: set[str] = set()
        self._ids = GroupedIds()
        self.dir_sync = DirectorySync(fs.fsync_dir)
        """Directory fsyncs of concurrent promotes, shared (``service.storage.dirsync``)."""
        self.file_sync = DirectorySync(fs.fsync_file)
        """File fsyncs of parts written together into one upload's file, shared alike."""
        fs.mkdir(self._layout.staging_dir)
        fs.mkdir(self._layout.payloads_dir)
        fs.mkdir(self._layout.assembly_dir)
        if self._strict:
            # A payload renamed into payloads/ must not vanish with the directory itself.
            fs.fsync_dir(root)
        self.fs_sync: FsSync | None = fs.open_syncfs(root)
        """Where the OS has a trustworthy ``syncfs``: a handle on the data's file system,
        opened before any payload is written, that strict small PUTs share
        (``service.storage.groupsync``) and balanced checkpoints use
        (``service.storage.integrity``). Its owner closes it (``Engine.stop``)."""
        self.run_id = f"{os.getpid()}-{secrets.token_hex(4)}"
        """Names this store's assembly files: ``<pid>-<random>`` (``sweep_assemblies``)."""
        self.sweep_assemblies()

    @property
    def layout(self) -> Layout:
        return self._layout

    @staticmethod
    def new_payload_id() -> str:
        return layout.new_payload_id()

    def next_payload_id(self) -> str:
        """A fresh payload id for a promote: ids handed out close together share their leaf
        directory, so concurrent strict promotes share its fsync (``dirsync``)."""
        return self._ids.next()

    # -- writing ----------------------------------------------------------------------

    def create_staging(self, *, synced: bool = True) -> StagingFile:
        """A new, empty staging file for a PUT body (``synced=False``: sealed without an
        fsync even in strict mode, for a caller that syncs the file system afterwards)."""
        staging = self._new_staging(crash_points=True, strict=self._strict and synced)
        crashpoints.hit("put.staging_created")
        return staging

    def promote(self, staged: StagedPayload, payload_id: str, *, synced: bool = True) -> None:
        """Rename a sealed staging file into place as ``payload_id``.

        Readers see either no payload or the whole of it. In strict mode the directory
        entry is durable on return, so the journal may reference the id, unless ``synced``
        is False: then the caller makes it durable (a shared ``syncfs``) before it commits.
        """
        target = self._layout.payload_path(payload_id)
        directory = self._ensure_payload_dir(payload_id)
        # Atomic: the payload appears whole, under a name no one references yet.
        self._fs.rename(staged.path, target)
        crashpoints.hit("put.after_rename")
        if self._strict and synced:
            # The rename must survive a crash before the journal records the id; one fsync
            # started after it serves every promote into the directory meanwhile.
            self.dir_sync.sync(directory)
        crashpoints.hit("put.after_dir_fsync")

    def store_small(
        self,
        data: bytes,
        payload_id: str,
        expected_sha256: str | None = None,
        *,
        synced: bool = True,
    ) -> StagedPayload:
        """A whole small body as payload ``payload_id``: stage, hash, seal and promote it in
        one call (one executor hop for a small PUT), through the same steps and crash points
        as a streamed body. Returns what was stored (its ``path`` is the staging name it had).
        ``synced=False`` skips the strict fsyncs of the file and of its directory: the caller
        syncs the file system (``fs_sync``, shared by a group) before it commits.

        Raises ``DigestMismatch`` (the staged body removed, nothing promoted) when the
        body's SHA-256 is not ``expected_sha256``. On an ``OSError`` nothing is left behind
        (staging file or payload) before the error propagates.
        """
        staging = self.create_staging(synced=synced)
        try:
            staging.write(data)
            staged = staging.finish()
        except OSError:
            staging.discard()
            raise
        return self.promote_checked(staged, payload_id, expected_sha256, synced=synced)

    def promote_checked(
        self,
        staged: StagedPayload,
        payload_id: str,
        expected_sha256: str | None = None,
        *,
        synced: bool = True,
    ) -> StagedPayload:
        """``promote`` a finished staging file after checking its SHA-256 (``store_small``'s
        last steps, shared with a batch's streamed members). ``DigestMismatch`` or an
        ``OSError`` leaves neither the staging file nor the payload behind."""
        if expected_sha256 is not None and staged.sha256 != expected_sha256:
            with contextlib.suppress(OSError):
                self.discard_staged(staged)
            raise DigestMismatch(staged.sha256)
        try:
            self.promote(staged, payload_id, synced=synced)
        except OSError:
            with contextlib.suppress(OSError):
                self.discard_staged(staged)
            with contextlib.suppress(OSError):
                self.remove([payload_id])
            raise
        return staged

    def create_assembly(self, upload_id: str) -> Assembly:
        """A new, empty assembly for ``upload_id`` (``service.storage.assembly``)."""
        path = self._layout.assembly_path(self.run_id, upload_id)
        staging = StagingFile(
            self._fs,
            self._fs.create(path),
            strict=self._strict,
            crash_points=False,
            writeback_bytes=self._writeback_bytes,
        )
        return Assembly(staging, self.append_payload)

    # -- parts written in place (``service.storage.direct``) ------------------------------

    def direct_file(self, upload_id: str) -> str:
        return direct.direct_path(self._layout.assembly_dir, upload_id)

    def open_direct_part(self, upload_id: str, offset: int, limit: int) -> direct.RegionWriter:
        """A writer of at most ``limit`` bytes at ``offset`` of the upload's file, which is
        created on first use (durably in strict mode: a restart must find it)."""
        path = self.direct_file(upload_id)
        created = not self._fs.exists(path)
        file = self._fs.open_append(path)
        if created and self._strict:
            try:
                self._fs.fsync_dir(self._layout.assembly_dir)
            except OSError:
                file.close()
                raise
        sync = self.file_sync.sync if self._strict else None
        return direct.RegionWriter(file, upload_id, offset, limit, sync)

    def seal_direct(self, upload_id: str, plan: direct.SealPlan) -> StagedPayload:
        """The upload's file as a sealed staging body (``direct.seal``)."""
        copies = [(self._layout.payload_path(p), offset) for p, offset in plan.copies]
        return direct.seal(
            self._fs,
            self.direct_file(upload_id),
            self._layout.new_staging_path(),
            direct.SealPlan(copies, plan.hashed_end, plan.digest, plan.end),
            strict=self._strict,
        )

    def hash_direct(self, upload_id: str, digest: hashlib._Hash, offset: int, size: int) -> None:
        """Fold a region of the upload's file into ``digest`` (read back)."""
        direct.hash_region(self._fs, self.direct_file(upload_id), digest, offset, size)

    def remove_direct(self, upload_id: str) -> bool:
        """Remove the upload's file (its upload is closed); whether there was one."""
        try:
            self._fs.unlink(self.direct_file(upload_id))
        except FileNotFoundError:
            return False
        return True

    def sweep_direct(self, open_uploads: set[str], grace: float) -> int:
        """Remove the files of closed uploads (``direct.sweep_closed``); how many."""
        assembly_dir = self._layout.assembly_dir
        return direct.sweep_closed(self._fs, assembly_dir, open_uploads, self._clock(), grace)

    def direct_uploads(self) -> list[str]:
        """Uploads that have a file of direct parts."""
        names = self._fs.listdir(self._layout.assembly_dir)
        return [u for u in map(direct.upload_of_direct_file, names) if u is not None]

    def append_payload(self, staging: StagingFile, payload_id: str) -> int:
        """Append a payload's bytes to ``staging``, hashed into it; return how many.

        The bytes are hashed on a helper thread while the kernel copies the same span
        (``StagingFile.append_pipelined``); memory stays at ``JOIN_WINDOWS`` windows. A
        direct part's region is read back window by window.
        """
        located = direct.parse_direct_id(payload_id)
        if located is not None:
            upload_id, offset, size = located
            for window in direct.read_region(self._fs, self.direct_file(upload_id), offset, size):
                staging.write(window)
            return size
        path = self._layout.payload_path(payload_id)
        pipeline = staging.hash_pipeline(
            [memoryview(bytearray(JOIN_BUFFER_BYTES)) for _ in range(JOIN_WINDOWS)]
        )
        try:
            source = self._fs.open_read(path)
            try:
                copier = self._fs.open_read(path)
                try:
                    return staging.append_pipelined(source, copier, pipeline)
                finally:
                    copier.close()
            finally:
                source.close()
        finally:
            pipeline.close()

    def sweep_assemblies(self) -> int:
        """Remove assembly files no live process keeps; return how many.

        An assembly is kept in memory by the process run that made it (its name starts
        ``<pid>-<random>``): a file of a process that is gone, or of an earlier run of this
        process, is left from a crash or a restart. Blocking; runs at startup.
        """
        removed = 0
        directory = self._layout.assembly_dir
        for name in self._fs.listdir(directory):
            if direct.upload_of_direct_file(name) is not None:
                continue  # parts of an open upload (removed with the upload)
            owner = name.split(".", 1)[0]
            pid_text, _, _ = owner.partition("-")
            if owner == self.run_id:
                continue
            if pid_text.isdigit() and int(pid_text) != os.getpid() and _alive(int(pid_text)):
                continue
            with contextlib.suppress(FileNotFoundError):
                self._fs.unlink(os.path.join(directory, name))
                removed += 1
        return removed

    def join(self, payload_ids: Sequence[str]) -> StagedPayload:
        """Concatenate payloads, in order, into a new sealed staging file.

        One pass computes the whole-object SHA-256 (on a helper thread, overlapped with the
        copying); memory stays at ``JOIN_WINDOWS`` windows. The parts
        are left untouched: the engine removes them after the completion is committed.
        On any error the new staging file is discarded before the error propagates.
        """
        staging = self._new_staging(crash_points=False)
        try:
            for index, payload_id in enumerate(payload_ids):
                if index:
                    crashpoints.hit("multipart.mid_join")
                self.append_payload(staging, payload_id)
            return staging.finish()
        except Exception:
            staging.discard()
            raise

    # -- reading ----------------------------------------------------------------------

    def open_payload(self, payload_id: str) -> ReadableFile:
        """Open a payload for reading; FileNotFoundError if it does not exist."""
        return self._fs.open_read(self._layout.payload_path(payload_id))

    def payload_size(self, payload_id: str) -> int:
        return self._fs.stat(self._layout.payload_path(payload_id)).size

    def verify(self, payload_id: str, size: int, sha256: str) -> bool:
        """Whether the payload exists with exactly this size and SHA-256 (reads it all)."""
        located = direct.parse_direct_id(payload_id)
        if located is not None:
            upload_id, offset, region = located
            ref = direct.DirectRef(upload_id, offset, region)
            path = self.direct_file(upload_id)
            return region == size and direct.region_matches(self._fs, ref, path, sha256)
        try:
            source = self._fs.open_read(self._layout.payload_path(payload_id))
        except FileNotFoundError:
            return False
        try:
            if source.size() != size:
                return False
            digest = hashlib.sha256()
            buffer = memoryview(bytearray(VERIFY_BUFFER_BYTES))
            while count := source.readinto(buffer):
                digest.update(buffer[:count])
            return digest.hexdigest() == sha256.lower()
        finally:
            source.close()

    def list_payload_ids(self) -> Iterator[str]:
        """Every payload id on disk; lazy, so iterate it off the event loop."""
        for entry in self._walk_payloads():
            if entry.payload_id is not None:
                yield entry.payload_id

    def disk_usage(self) -> tuple[int, int]:
        """(total_bytes, free_bytes) of the file system holding the data root."""
        return self._fs.disk_usage(self._layout.root)

    # -- removing ---------------------------------------------------------------------

    def remove(self, payload_ids: Iterable[str]) -> int:
        """Delete payload files; missing ones are fine. Return how many were deleted.

        A direct part's id is skipped: its region goes with its upload's file."""
        paths = [self._layout.payload_path(p) for p in payload_ids if not direct.is_direct_id(p)]
        return self._unlink_all(paths)

    def discard_staged(self, staged: StagedPayload) -> None:
        """Delete a sealed staging file that will not be promoted (a failed checksum).

        Harmless if it is gone already. No directory fsync: a removal lost in a crash
        leaves a staging file, which the sweep removes.
        """
        if isinstance(staged, direct.DirectStaged):
            return  # a region of its upload's file, not a file of its own
        if os.path.dirname(staged.path) not in (
            self._layout.staging_dir,
            self._layout.assembly_dir,
        ):
            raise ValueError(f"not a staging file of this store: {staged.path!r}")
        with contextlib.suppress(FileNotFoundError):
            self._fs.unlink(staged.path)

    def sweep_staging(self, ttl_seconds: float) -> int:
        """Delete staging files last written more than ``ttl_seconds`` ago; return the count.

        They are bodies of uploads that died with the process or the connection. No
        directory fsync: a removal lost in a crash is simply swept again.
        """
        now = self._clock()
        removed = 0
        staging_dir = self._layout.staging_dir
        for name in self._fs.listdir(staging_dir):
            path = os.path.join(staging_dir, name)
            try:
                info = self._fs.stat(path)
                if info.is_dir or now - info.mtime <= ttl_seconds:
                    continue
                self._fs.unlink(path)
            except FileNotFoundError:
                continue  # finished, promoted or discarded meanwhile
            removed += 1
            crashpoints.hit("staging.sweep")
        return removed

    def collect_garbage(
        self, is_referenced: Callable[[str], bool], grace_seconds: float
    ) -> GcResult:
        """Delete payload files nothing references, and junk names, older than the grace.

        The grace period protects a PUT between promote and journal commit: its file is
        unreferenced but young. A grace of 0 (at startup, when nothing is in flight)
        collects every unreferenced file. Empty fan-out directories stay.
        """
        now = self._clock()
        removed = kept_young = scanned = 0
        batch: list[str] = []
        for entry in self._walk_payloads():
            scanned += 1
            if entry.payload_id is not None and is_referenced(entry.payload_id):
                continue
            try:
                info = self._fs.stat(entry.path)
            except FileNotFoundError:
                continue
            if info.is_dir:
                continue
            if grace_seconds > 0 and now - info.mtime < grace_seconds:
                kept_young += 1
                continue
            batch.append(entry.path)
            if len(batch) >= GC_BATCH:
                removed += self._unlink_all(batch)
                crashpoints.hit("gc.batch")
                batch = []
        if batch:
            removed += self._unlink_all(batch)
            crashpoints.hit("gc.batch")
        return GcResult(removed=removed, kept_young=kept_young, scanned=scanned)

    # -- internals --------------------------------------------------------------------

    def _new_staging(self, *, crash_points: bool, strict: bool | None = None) -> StagingFile:
        file = self._fs.create(self._layout.new_staging_path())
        return StagingFile(
            self._fs,
            file,
            strict=self._strict if strict is None else strict,
            crash_points=crash_points,
            writeback_bytes=self._writeback_bytes,
        )

    def _ensure_payload_dir(self, payload_id: str) -> str:
        """Create the payload's fan-out directories if needed; return the leaf directory.

        In strict mode a directory is fsynced into its parent before this process renames
        any payload into it, under the lock, so that no other thread can promote into a
        directory whose own entry is not yet durable. That includes a directory that exists
        already: a promote whose parent fsync failed left it there, not durable.
        """
        leaf = self._layout.payload_dir(payload_id)
        if leaf in self._ready_dirs:
            return leaf
        with self._dir_lock:
            for directory in self._layout.fan_out_dirs(payload_id):
                if directory in self._ready_dirs:
                    continue
                if not self._fs.exists(directory):
                    self._fs.mkdir(directory)
                if self._strict:
                    # The directory's entry must survive, or so would not its payloads.
                    self._fs.fsync_dir(os.path.dirname(directory))
                self._ready_dirs.add(directory)
        return leaf

    def _unlink_all(self, paths: Sequence[str]) -> int:
        removed = 0
        directories: dict[str, None] = {}
        for path in paths:
            try:
                self._fs.unlink(path)
            except FileNotFoundError:
                continue
            removed += 1
            directories[os.path.dirname(path)] = None
        if self._strict:
            for directory in directories:
                # Space reported free is really free, and the file won't resurface after a
                # crash as an orphan to collect again.
                self._fs.fsync_dir(directory)
        return removed

    def _walk_payloads(self) -> Iterator[_Entry]:
        """Every file in the payload tree, flagged with its payload id when it is one.

        A file is a payload only if its name is an id and it sits in that id's fan-out
        directory; anything else (a temp file left by a tool, a misplaced id) is junk.
        """
        root = self._layout.payloads_dir
        for first in self._listdir(root) or ():
            first_path = os.path.join(root, first)
            seconds = self._listdir(first_path) if layout.is_fan_out_name(first) else None
            if seconds is None:
                yield _Entry(first_path, None)
                continue
            for second in seconds:
                second_path = os.path.join(first_path, second)
                names = self._listdir(second_path) if layout.is_fan_out_name(second) else None
                if names is None:
                    yield _Entry(second_path, None)
                    continue
                for name in names:
                    is_payload = (
                        layout.is_valid_payload_id(name)
                        and name[0:2] == first
                        and name[2:4] == second
                    )
                    yield _Entry(os.path.join(second_path, name), name if is_payload else None)

    def _listdir(self, path: str) -> list[str] | None:
        """Sorted entries of a directory: empty if it is gone, None if it is not a directory."""
        try:
            return sorted(self._fs.listdir(path))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return None
