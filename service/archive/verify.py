"""``python -m service archive verify --archive SRC``: can this archive be restored?

Checks, in the order a restore depends on them, and names the first problem found:

1. the manifest and the signing secret are there;
2. every snapshot is whole (its crc);
3. the records are contiguous from the oldest snapshot on (no gap, no overlap), every frame's
   crc and sequence right;
4. every payload the oldest snapshot or any later record references is present, with its
   size and SHA-256.

So a verify that passes means a restore to any archived point finds every byte it needs.

Thread-safety: blocking, single-threaded (a command-line tool).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from journal.tail import FramesDamagedError, split_frames
from service.archive import layout
from service.archive.refs import PayloadRef, record_payload
from service.archive.restore import MAX_RECORD_BYTES
from service.archive.shipper import for_each_local_snapshot_payload, read_state
from service.archive.targets import ArchiveError, ArchiveTarget

Progress = Callable[[str], None]


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    first_sequence: int | None
    last_sequence: int | None
    records: int
    payloads: int
    problem: str | None
    lost: int = 0
    """Payloads the primary had lost before they were shipped (marked so in the archive)."""


def verify(target: ArchiveTarget, progress: Progress = lambda line: None) -> VerifyReport:
    """Check ``target`` (module docstring); the report names the first problem, if any."""
    try:
        return _verify(target, progress)
    except _Problem as problem:
        return VerifyReport(False, problem.first, problem.last, problem.records, 0, str(problem))


class _Problem(Exception):
    def __init__(
        self, message: str, first: int | None = None, last: int | None = None, records: int = 0
    ) -> None:
        super().__init__(message)
        self.first, self.last, self.records = first, last, records


def _verify(target: ArchiveTarget, progress: Progress) -> VerifyReport:
    state = read_state(target)
    if state.manifest is None:
        raise _Problem(f"{target.description} has no {layout.MANIFEST}: not an archive")
    names = {entry.name for entry in target.list("secret")}
    if layout.SECRET not in names:
        raise _Problem(f"{layout.SECRET} is missing")
    base = state.base
    if base is None:
        raise _Problem("the archive holds neither a snapshot nor records from record 1")
    wanted: dict[str, PayloadRef] = {}
    with tempfile.TemporaryDirectory(prefix="archive-verify-") as scratch:
        for snapshot in state.snapshots:
            local = os.path.join(scratch, "snapshot")
            target.fetch(snapshot.name, local)

            def on_ref(ref: PayloadRef, oldest: bool = snapshot.sequence == base) -> None:
                if oldest:  # later snapshots' payloads are referenced by records too
                    wanted.setdefault(ref.payload_id, ref)

            try:
                for_each_local_snapshot_payload(local, snapshot.sequence, on_ref)
            except ArchiveError as exc:
                raise _Problem(str(exc), base) from None
            os.unlink(local)
            progress(f"snapshot {snapshot.sequence}: whole")
    expected = base + 1
    count = 0
    for records in state.records:
        if records.last < expected:
            continue
        if records.first != expected:
            what = "overlap" if records.first < expected else "gap"
            raise _Problem(
                f"missing records: {what} before {records.name} (expected record {expected})",
                base,
                expected - 1,
                count,
            )
        try:
            frames = split_frames(target.read(records.name), records.first, MAX_RECORD_BYTES)
        except FramesDamagedError as exc:
            raise _Problem(
                f"damaged record in {records.name}: {exc}", base, expected - 1, count
            ) from None
        if not frames or frames[-1].sequence != records.last:
            raise _Problem(
                f"{records.name} does not end at record {records.last}", base, expected - 1, count
            )
        frames = [frame for frame in frames if frame.sequence >= expected]
        for frame in frames:
            ref = record_payload(frame.event())
            if ref is not None:
                wanted.setdefault(ref.payload_id, ref)
        count += len(frames)
        expected = records.last + 1
        progress(f"records up to {records.last}: contiguous, crc good")
    last = expected - 1
    present = {entry.name: entry.size for entry in target.list(layout.PAYLOADS)}
    checked = lost = 0
    with tempfile.TemporaryDirectory(prefix="archive-verify-") as scratch:
        for ref in wanted.values():
            name = layout.payload_name(ref.payload_id)
            if name not in present and layout.lost_name(ref.payload_id) in present:
                lost += 1
                continue
            if name not in present:
                raise _Problem(f"payload {ref.payload_id} is missing", base, last, count)
            if present[name] != ref.size:
                raise _Problem(
                    f"payload {ref.payload_id} has {present[name]} bytes, not {ref.size}",
                    base,
                    last,
                    count,
                )
            local = os.path.join(scratch, "payload")
            target.fetch(name, local)
            if _sha256(local) != ref.sha256.lower():
                raise _Problem(f"payload {ref.payload_id} fails its SHA-256", base, last, count)
            os.unlink(local)
            checked += 1
            if checked % 1000 == 0:
                progress(f"payloads checked: {checked}/{len(wanted)}")
    progress(f"payloads checked: {checked}/{len(wanted)}")
    if lost:
        progress(f"{lost} payloads were lost on the primary before they were archived")
    return VerifyReport(True, base, last, count, checked, None, lost)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
