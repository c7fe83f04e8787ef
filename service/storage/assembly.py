"""A multipart upload assembled as its parts arrive, so ``complete`` has little left to do.

Why: ``complete`` used to read every part again, hash the whole object and write it (a
join), all after the last part arrived: for 512 MiB, seconds in which the client waits. An
``Assembly`` appends part N to one file as soon as parts 1..N are all stored (the
contiguous prefix), folding them into the object's SHA-256 as it goes, and keeps the hash
state and the length at every part boundary (``hashlib`` objects can be copied). Then:

- a part replaced after it was assembled cuts the file back to the boundary before it
  (``keep``), and assembly goes on from there;
- ``seal`` keeps the prefix the manifest names, appends the manifest's tail parts (those
  not assembled yet, or none), fsyncs (strict) and returns the staged object, ready for the
  usual promote and commit.

Crash rule: an assembly is a cache, never the truth. It lives in ``<root>/assembly/``, named
by the process run that keeps it; the parts stay the upload's data until the completion is
committed. A crash at any step leaves at most a file no process keeps, which the next
``PayloadStore`` removes (``PayloadStore.sweep_assemblies``), and the upload completes by a
join as before. Crash points: ``multipart.assembly_appended`` after each append,
``multipart.assembly_rewound`` after a cut, ``multipart.mid_join`` between tail parts.

Thread-safety: blocking, one thread at a time (the owner serialises its jobs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fsseam import crashpoints
from service.storage.staging import StagedPayload, StagingFile


@dataclass(frozen=True, slots=True)
class AssembledPart:
    """One part in the assembly, and the object's state just after it."""

    number: int
    payload_id: str
    end: int
    """Bytes of the assembly up to and including this part."""
    digest: hashlib._Hash
    """SHA-256 state after this part (copied, never updated)."""


class Assembly:
    """The contiguous prefix of one upload's parts in one file; see the module docstring."""

    def __init__(self, staging: StagingFile, append: Callable[[StagingFile, str], int]) -> None:
        """``append(staging, payload_id)`` appends a payload's bytes, hashing them (the
        store's ``append_payload``)."""
        self._staging = staging
        self._append = append
        self._parts: list[AssembledPart] = []

    @property
    def parts(self) -> Sequence[AssembledPart]:
        return tuple(self._parts)

    @property
    def path(self) -> str:
        return self._staging.path

    def append(self, number: int, payload_id: str) -> None:
        """Append part ``number`` (payload ``payload_id``): it must be the next one."""
        if number != len(self._parts) + 1:
            raise ValueError(f"part {number} does not follow part {len(self._parts)}")
        self._append(self._staging, payload_id)
        size, digest = self._staging.checkpoint()
        self._parts.append(AssembledPart(number, payload_id, size, digest))
        crashpoints.hit("multipart.assembly_appended")

    def keep(self, count: int) -> None:
        """Keep only the first ``count`` parts (cut the file back to their end)."""
        if count >= len(self._parts):
            return
        if count == 0:
            self._staging.rewind(0, hashlib.sha256())
        else:
            last = self._parts[count - 1]
            self._staging.rewind(last.end, last.digest)
        del self._parts[count:]
        crashpoints.hit("multipart.assembly_rewound")

    def seal(self, count: int, tail: Sequence[str]) -> StagedPayload:
        """The whole object: the first ``count`` assembled parts, then the payloads ``tail``
        in order, sealed (fsync in strict mode). Discards the file on any error."""
        try:
            self.keep(count)
            for index, payload_id in enumerate(tail):
                if count or index:
                    crashpoints.hit("multipart.mid_join")
                self._append(self._staging, payload_id)
            return self._staging.finish()
        except Exception:
            self._staging.discard()
            raise

    def discard(self) -> None:
        """Remove the file (the upload was aborted, completed otherwise, or closed)."""
        self._staging.discard()
