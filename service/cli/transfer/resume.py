"""Where an unfinished multipart upload is remembered, so a re-run continues it.

One small JSON file per destination (``<config dir>/uploads/<sha256 of the destination>.json``)
holds the upload id, the part size and the source's fingerprint (path, size, mtime). It is
written before the first part is sent and removed once the upload completed; a re-run that
finds it with the same fingerprint passes ``upload_id=`` to ``upload_multipart``, which skips
the parts the server already holds with the same SHA-256. A changed source starts afresh.
Writes are atomic (temporary file, rename); the files hold no secrets (mode 0600 anyway).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["ResumeStore", "UploadState", "fingerprint"]


@dataclass(frozen=True)
class UploadState:
    destination: str
    upload_id: str
    part_size: int
    fingerprint: str


class ResumeStore:
    """Upload states under ``directory`` (``<config dir>/uploads``); safe across threads
    because each destination has its own file."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, destination: str) -> Path:
        name = hashlib.sha256(destination.encode("utf-8", "surrogateescape")).hexdigest()[:40]
        return self.directory / f"{name}.json"

    def load(self, destination: str) -> UploadState | None:
        try:
            data = json.loads(self._path(destination).read_text(encoding="utf-8"))
            state = UploadState(**data)
        except (OSError, ValueError, TypeError):
            return None
        return state if state.destination == destination else None

    def save(self, state: UploadState) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".upload-", suffix=".tmp")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(asdict(state), file)
                file.flush()
                # the id must survive a crash right after the first part is stored
                os.fsync(file.fileno())
            os.replace(temporary, self._path(state.destination))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def clear(self, destination: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(destination).unlink()


def fingerprint(path: Path) -> str:
    """What identifies a local source file's content cheaply: path, size and mtime."""
    stat = path.stat()
    return f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
