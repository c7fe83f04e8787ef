"""Re-reading one stored payload for the scrub, a chunk per call, so the caller can pace.

``ScrubRead`` opens a payload, hashes it ``CHUNK_BYTES`` at a time (each ``step`` is one
blocking read: run it on the executor) and says at the end whether the bytes still have the
size and SHA-256 their record states, or what is wrong with them. The pacing, the
bookkeeping and the quarantine are the caller's (``service.upkeep.scrub``).

Thread-safety: one ``ScrubRead`` is used by one task at a time (its steps run one after the
other, each on some executor thread).
"""

from __future__ import annotations

import hashlib

from fsseam.fs import ReadableFile
from service.storage.payloads import PayloadStore

CHUNK_BYTES = 1024 * 1024


class ScrubRead:
    """One payload being re-read; see the module docstring."""

    def __init__(self, store: PayloadStore, payload_id: str) -> None:
        self._digest = hashlib.sha256()
        self._buffer = bytearray(CHUNK_BYTES)
        self.bytes_read = 0
        self._source: ReadableFile | None = None
        self._missing = False
        try:
            self._source = store.open_payload(payload_id)
        except FileNotFoundError:
            self._missing = True

    def step(self) -> int:
        """Read and hash the next chunk (blocking); 0 once the payload is read whole."""
        if self._source is None:
            return 0
        view = memoryview(self._buffer)
        count = self._source.readinto(view)
        if count:
            self._digest.update(view[:count])
            self.bytes_read += count
        else:
            self.close()
        return count

    def problem(self, size: int, sha256: str) -> str | None:
        """None if the bytes read match ``size`` and ``sha256``, else what is wrong."""
        if self._missing:
            return "the payload file is missing"
        if self.bytes_read != size:
            return f"size mismatch: {self.bytes_read} bytes stored, {size} written"
        if self._digest.hexdigest() != sha256.lower():
            return "SHA-256 mismatch: the stored bytes changed since they were written"
        return None

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None
