"""Working directories of packaging jobs under ``<data_dir>/scratch/``. Blocking.

A job run gets a fresh directory (``video-<job_id>-<random>``, with ``hls/`` and ``dash/``
in it) where the worker process's FFmpeg muxers write; the runner stores what it finds there
as objects and removes the directory. The random part keeps a rerun apart from a stale
worker of an earlier run that may still be writing. Nothing in ``scratch/`` outlives a
server start: ``clean`` empties it before any job runs. Every operation goes through the
file-system seam.

Thread-safety: no state besides the paths; run the methods on the executor.
"""

from __future__ import annotations

import os
import re
import secrets

from fsseam.fs import FileSystem

_JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def remove_tree(fs: FileSystem, path: str) -> None:
    """Remove ``path`` and everything under it; nothing if it does not exist."""
    if not fs.exists(path):
        return
    if not fs.stat(path).is_dir:
        fs.unlink(path)
        return
    for name in fs.listdir(path):
        remove_tree(fs, os.path.join(path, name))
    fs.rmdir(path)


class ScratchSpace:
    """The ``scratch/`` directory of one data dir."""

    def __init__(self, fs: FileSystem, data_dir: str) -> None:
        self.fs = fs
        self.root = os.path.join(data_dir, "scratch")

    def prepare(self, job_id: str) -> str:
        """A new, empty run directory for ``job_id`` (with ``hls/`` and ``dash/``)."""
        if not _JOB_ID.match(job_id):
            raise ValueError(f"not a job id: {job_id!r}")
        path = os.path.join(self.root, f"video-{job_id}-{secrets.token_hex(4)}")
        for sub in ("hls", "dash"):
            self.fs.mkdir(os.path.join(path, sub))
        return path

    def files(self, path: str) -> list[str]:
        """The files under ``path``, as ``/``-separated names relative to it, sorted."""
        found: list[str] = []

        def walk(directory: str, prefix: str) -> None:
            for name in sorted(self.fs.listdir(directory)):
                full = os.path.join(directory, name)
                if self.fs.stat(full).is_dir:
                    walk(full, f"{prefix}{name}/")
                else:
                    found.append(prefix + name)

        walk(path, "")
        return found

    def remove(self, path: str) -> None:
        """Remove one run directory (only ever one under ``root``)."""
        if os.path.dirname(os.path.normpath(path)) != os.path.normpath(self.root):
            raise ValueError(f"not a scratch directory: {path!r}")
        remove_tree(self.fs, path)

    def clean(self) -> int:
        """Remove everything left in ``scratch/`` (at startup: no job runs yet)."""
        if not self.fs.exists(self.root):
            return 0
        names = self.fs.listdir(self.root)
        for name in names:
            remove_tree(self.fs, os.path.join(self.root, name))
        return len(names)
