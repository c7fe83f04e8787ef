"""The archive's file names: what a restore and a verify read, and the shipper writes.

    archive.json                              which server's archive, and its format
    secret/server-secret                      the signing secret (presigned URLs, shares)
    payloads/<ab>/<cd>/<payload id>           payload files, as in a data dir
    payloads/direct/<direct part id>          a multipart part written in place (its bytes)
    payloads/lost/<payload id>                a payload the primary had lost when it was due
    snapshots/snapshot-<sequence>.snap        journal snapshot files, verbatim
    records/records-<first>-<last>.log        journal records first..last, frames verbatim

Sequences carry 20 digits so names sort in sequence order. A records file holds consecutive
frames exactly as the journal wrote them (``docs/journal-format.md``), so every crc is
checked again by a restore and a verify. Files are written whole or not at all (a temporary
name renamed into place, or an rclone upload), and each kind only after what it depends on:
a records file after every payload its records reference, a snapshot after the records it
covers.

Pure names: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

MANIFEST = "archive.json"
SECRET = "secret/server-secret"
PAYLOADS = "payloads"
SNAPSHOTS = "snapshots"
RECORDS = "records"
FORMAT = 1
_DIGITS = 20


def payload_name(payload_id: str) -> str:
    """Where a payload goes; a direct part id (``<upload>.<offset>.<size>.<nonce>``) keeps
    its bytes under ``payloads/direct``.

    >>> payload_name("0123456789abcdef0123456789abcdef")
    'payloads/01/23/0123456789abcdef0123456789abcdef'
    """
    if "." in payload_id:
        return f"{PAYLOADS}/direct/{payload_id}"
    return f"{PAYLOADS}/{payload_id[0:2]}/{payload_id[2:4]}/{payload_id}"


def lost_name(payload_id: str) -> str:
    """The marker of a payload the primary no longer had when its record was shipped (a
    balanced-mode power loss, which the primary quarantines): a restore quarantines it too.

    >>> lost_name("0123456789abcdef0123456789abcdef")
    'payloads/lost/0123456789abcdef0123456789abcdef'
    """
    return f"{PAYLOADS}/lost/{payload_id}"


def snapshot_name(sequence: int) -> str:
    """>>> snapshot_name(42)
    'snapshots/snapshot-00000000000000000042.snap'
    """
    return f"{SNAPSHOTS}/snapshot-{sequence:0{_DIGITS}d}.snap"


def records_name(first: int, last: int) -> str:
    """>>> records_name(1, 9)
    'records/records-00000000000000000001-00000000000000000009.log'
    """
    return f"{RECORDS}/records-{first:0{_DIGITS}d}-{last:0{_DIGITS}d}.log"


@dataclass(frozen=True, slots=True, order=True)
class RecordsFile:
    first: int
    last: int
    name: str


def parse_records_name(name: str) -> RecordsFile | None:
    """>>> found = parse_records_name(records_name(1, 9))
    >>> found.first, found.last, found.name == records_name(1, 9)
    (1, 9, True)
    >>> parse_records_name("records/notes.txt") is None
    True
    """
    base = name.rsplit("/", 1)[-1]
    if not (base.startswith("records-") and base.endswith(".log")):
        return None
    first, _, last = base[len("records-") : -len(".log")].partition("-")
    if len(first) != _DIGITS or len(last) != _DIGITS or not (first + last).isdigit():
        return None
    if int(last) < int(first):
        return None
    return RecordsFile(int(first), int(last), f"{RECORDS}/{base}")


def parse_snapshot_name(name: str) -> int | None:
    """>>> parse_snapshot_name("snapshots/snapshot-00000000000000000042.snap")
    42
    """
    base = name.rsplit("/", 1)[-1]
    if not (base.startswith("snapshot-") and base.endswith(".snap")):
        return None
    digits = base[len("snapshot-") : -len(".snap")]
    if len(digits) != _DIGITS or not digits.isdigit():
        return None
    return int(digits)
