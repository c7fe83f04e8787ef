"""Putting a quarantined payload back from a verified copy (the scrub's repair).

The scrub quarantines a payload whose bytes no longer match their record
(``service.storage.integrity``); with a standby, the other side's copy can bring it back
(``service.replication.repair`` fetches it). This module is the disk half: the copy is
written to a staging file while it is hashed, fsynced, compared with the size and SHA-256 the
record states, and only then renamed into the payload's place; the quarantine entry is
removed last. Whatever the bytes, the same durability applies in ``strict`` and ``balanced``:
a repair is rare and must not be lost to a power cut after it was reported.

A crash between the two steps leaves the good file beside its quarantine entry; the next
start's ``PayloadIntegrity.finish_quarantine`` moves it aside again (never serving anything
unverified by the start's rules), and the scrub repairs it again at its next pass.

May import ``fsseam`` and ``service.storage``. Blocking: run on the engine's executor.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable

from fsseam.fs import FileSystem
from service.storage.layout import Layout


class CopyRefused(Exception):
    """The other side's copy does not match the record (its size or SHA-256): not used."""


def place_repaired(
    fs: FileSystem,
    paths: Layout,
    payload_id: str,
    size: int,
    sha256: str,
    chunks: Iterable[bytes],
) -> None:
    """Write ``chunks`` as payload ``payload_id`` once they prove to be its ``size`` bytes
    with its ``sha256``, and lift its quarantine; ``CopyRefused`` (nothing changed) if not."""
    staging = paths.new_staging_path()
    digest = hashlib.sha256()
    written = 0
    target = fs.create(staging)
    try:
        try:
            for chunk in chunks:
                written += len(chunk)
                if written > size:
                    raise CopyRefused(f"the copy is longer than the record's {size} bytes")
                digest.update(chunk)
                target.write(chunk)
            if written != size:
                raise CopyRefused(f"the copy has {written} bytes, the record {size}")
            if digest.hexdigest() != sha256.lower():
                raise CopyRefused("the copy fails its SHA-256 too")
            target.fsync()  # the verified bytes are on disk before their name is
        finally:
            target.close()
    except BaseException:
        with contextlib.suppress(OSError):
            fs.unlink(staging)
        raise
    directory = paths.payload_dir(payload_id)
    _ensure_dirs(fs, paths, payload_id)
    # Atomic: readers see the rotten file's absence or the whole verified copy, never a part.
    fs.rename(staging, paths.payload_path(payload_id))
    fs.fsync_dir(directory)  # the repaired name survives a power cut before it is reported
    with contextlib.suppress(FileNotFoundError):
        fs.unlink(os.path.join(paths.quarantine_dir, payload_id))
    with contextlib.suppress(FileNotFoundError):
        # The lifted verdict survives too (else a start would move the good copy aside).
        fs.fsync_dir(paths.quarantine_dir)


def _ensure_dirs(fs: FileSystem, paths: Layout, payload_id: str) -> None:
    """The payload's fan-out directories (normally still there), each durable in its parent."""
    for directory in paths.fan_out_dirs(payload_id):
        if not fs.exists(directory):
            fs.mkdir(directory)
            fs.fsync_dir(os.path.dirname(directory))  # the new directory's own entry
