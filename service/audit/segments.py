"""The audit log's files: segments of JSON lines and the signed anchor of a pruned log.

Layout (``docs/audit-format.md`` is the specification; this module its implementation)::

    <data_dir>/audit/
        audit-00000000000000000001.jsonl   records 1 .. (one per line, oldest first)
        audit-00000000000000004711.jsonl   records 4711 .. (the name is its first sequence)
        anchor.json                        after a prune: where the kept log starts, signed
        head                               the processes' lock and cache of the chain's end
                                           (``service.audit.shared``; never the truth)

A segment is append-only text: one record per line (``service.audit.record``), each line
ending in ``\\n``. A start keeps the newest segment's run of whole records and cuts what
follows: a torn last line (a write a crash cut short, of a request never answered), or the
unsynced tail a power cut left half written; whole lines among what it cuts are kept in
``<segment>.broken`` first, and the log records the cut (``AuditLog.open``); a process
that finds another died in the middle of its append cuts likewise. A new
segment starts once the current one holds ``segment_bytes`` or began on an earlier UTC day,
so that retention can drop whole files.

``anchor.json`` is ``{"format": 1, "sequence", "prev", "pruned_at", "signature"}``: the kept
log starts at record ``sequence`` whose ``prev`` is ``prev``; ``signature`` is the hex
HMAC-SHA256, under a key derived from the server secret, of the canonical JSON of the other
fields. It is written (temporary file, fsync, rename, directory fsync) before the segments
it replaces are removed, so a crash between leaves extra old segments, which the next prune
removes and every reader skips.

Blocking file work through the ``fsseam`` seam (so the crash matrix can cut the power in it);
callers run it off the event loop (the appends: ``service.audit.shared``).
Thread-safety: functions are safe from any thread.
"""

from __future__ import annotations

import hmac
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fsseam import crashpoints
from fsseam.durable import make_dirs_durably
from fsseam.fs import FileSystem
from service.audit.record import GENESIS, canonical, parse_line
from service.auth.signing import derive_key

AUDIT_DIRNAME = "audit"
ANCHOR_NAME = "anchor.json"
ANCHOR_FORMAT = 1
_SEGMENT = re.compile(r"^audit-([0-9]{20})\.jsonl$")
_PURPOSE = "service.audit.anchor.v1"
READ_CHUNK = 1 << 20


def segment_name(first_sequence: int) -> str:
    return f"audit-{first_sequence:020d}.jsonl"


def list_segments(fs: FileSystem, directory: str) -> list[tuple[int, str]]:
    """``(first sequence, path)`` of every segment, oldest first."""
    found = []
    for name in fs.listdir(directory):
        match = _SEGMENT.match(name)
        if match:
            found.append((int(match.group(1)), os.path.join(directory, name)))
    return sorted(found)


def read_all(fs: FileSystem, path: str) -> bytes:
    file = fs.open_read(path)
    try:
        chunks = []
        while chunk := file.read(READ_CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        file.close()


def lines_of(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(offset just past the line, line)`` of every complete line of ``data``."""
    start = 0
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            return
        yield end + 1, data[start:end]
        start = end + 1


def records_of(fs: FileSystem, path: str) -> Iterator[dict[str, Any] | None]:
    """Every complete line of a segment as a record (None for a line that is none)."""
    for _, line in lines_of(read_all(fs, path)):
        yield parse_line(line)


# -- the anchor -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a pruned log starts: record ``sequence``, whose ``prev`` is ``prev``."""

    sequence: int
    prev: str
    pruned_at: str

    def unsigned(self) -> dict[str, Any]:
        return {
            "format": ANCHOR_FORMAT,
            "sequence": self.sequence,
            "prev": self.prev,
            "pruned_at": self.pruned_at,
        }


GENESIS_ANCHOR = Anchor(1, GENESIS, "")
"""Where a log that was never pruned starts."""


def anchor_signature(secret: bytes, anchor: Anchor) -> str:
    key = derive_key(secret, _PURPOSE)
    return hmac.new(key, canonical(anchor.unsigned()), "sha256").hexdigest()


def read_anchor(fs: FileSystem, directory: str, secret: bytes) -> tuple[Anchor, bool]:
    """The log's anchor (the genesis when none was written) and whether its signature is
    good (always for the genesis)."""
    path = os.path.join(directory, ANCHOR_NAME)
    if not fs.exists(path):
        return GENESIS_ANCHOR, True
    try:
        document = json.loads(read_all(fs, path))
        anchor = Anchor(int(document["sequence"]), str(document["prev"]), document["pruned_at"])
        signature = str(document["signature"])
    except (ValueError, KeyError, TypeError):
        return GENESIS_ANCHOR, False
    good = hmac.compare_digest(signature, anchor_signature(secret, anchor))
    return anchor, good


def write_anchor(fs: FileSystem, directory: str, secret: bytes, anchor: Anchor) -> None:
    """Replace the anchor durably (the segments before it may go only after this)."""
    document = {**anchor.unsigned(), "signature": anchor_signature(secret, anchor)}
    path = os.path.join(directory, ANCHOR_NAME)
    temporary = path + ".tmp"
    if fs.exists(temporary):
        fs.unlink(temporary)  # left by a crash before the rename
    out = fs.create(temporary)
    try:
        out.write(canonical(document) + b"\n")
        out.fsync()  # the anchor's bytes, before its name may replace the old one
    finally:
        out.close()
    fs.rename(temporary, path)  # atomic: the old anchor or the new one, never half of one
    fs.fsync_dir(directory)  # the rename, before any segment it replaces is removed
    crashpoints.hit("audit.prune.after_anchor")


# -- the tail ------------------------------------------------------------------------------


@dataclass(slots=True)
class Tail:
    """Where the log ends: the next sequence, the last hash, and the open segment."""

    next_sequence: int
    last_hash: str
    segment_first: int | None
    """The first sequence of the newest segment (None: no segment yet)."""
    segment_bytes: int
    segment_day: str
    """The UTC day (``YYYY-MM-DD``) of the newest segment's first record."""
    cut_bytes: int = 0
    """Bytes cut off the newest segment's end at the open (a crash's unfinished writes)."""
    cut_lines: int = 0
    """Whole lines among them (kept in ``<segment>.broken``)."""


def _whole_records(data: bytes) -> tuple[int, list[dict[str, Any]]]:
    """The run of whole records a segment starts with, up to the first line that is no
    record; ``(bytes they take, records)``. A crash leaves only such lines behind (a torn
    line, or zeros where an unsynced write was lost: writes land at their offsets, so a
    lost one never shifts the lines after it); a sequence that skips, among lines that are
    all records, is an edit, kept for verification to report, never cut."""
    records: list[dict[str, Any]] = []
    good = 0
    for end, line in lines_of(data):
        record = parse_line(line)
        if record is None:
            break
        records.append(record)
        good = end
    return good, records


def _keep_aside(fs: FileSystem, path: str, data: bytes) -> str:
    """Keep the damaged tail of a segment in ``<segment>.broken[.N]`` (durably) before the
    segment is cut: it may be a crash's lost writes, or the trace of an edit."""
    target, number = path + ".broken", 1
    while fs.exists(target):
        number += 1
        target = f"{path}.broken.{number}"
    out = fs.create(target)
    try:
        out.write(data)
        out.fsync()  # the kept bytes, before the segment loses them
    finally:
        out.close()
    fs.fsync_dir(os.path.dirname(path))  # the kept file's name, likewise
    return target


def find_tail(fs: FileSystem, directory: str, secret: bytes) -> Tail:
    """Open the log and say where it ends. The newest segment keeps its run of whole
    records from its start; what follows (a torn last line, or the lost writes of a power
    cut in the unsynced tail: a line that is no record) is cut off,
    and when whole lines go with it they are kept in ``<segment>.broken`` first
    (``Tail.cut_lines``: the log then records that it cut them). An emptied newest segment
    goes; the chain continues after the last record (after the anchor when none is left).
    Older segments are never touched: damage there is ``verify``'s to report."""
    make_dirs_durably(fs, directory)
    anchor, _ = read_anchor(fs, directory, secret)
    segments = list_segments(fs, directory)
    cut_bytes = cut_lines = 0
    while segments:
        first, path = segments.pop()
        data = read_all(fs, path)
        good, records = _whole_records(data)
        if good < len(data):
            lines = data.count(b"\n", good)
            if lines:
                _keep_aside(fs, path, data[good:])
            fs.truncate(path, good)  # the tail after the last whole record
            fs.fsync_file(path)  # the cut, before records are appended after it
            crashpoints.hit("audit.open.truncate")
            cut_bytes, cut_lines = cut_bytes + len(data) - good, cut_lines + lines
        if not records:
            fs.unlink(path)  # an empty newest segment: made again at the next write
            fs.fsync_dir(directory)  # its removal, before a segment of that name returns
            continue
        last = records[-1]
        day = str(records[0].get("time", ""))[:10]
        return Tail(
            last["sequence"] + 1, str(last.get("hash", "")), first, good, day, cut_bytes, cut_lines
        )
    return Tail(anchor.sequence, anchor.prev, None, 0, "", cut_bytes, cut_lines)
