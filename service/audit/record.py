"""Audit records: their fields, the hash chain, and checking a run of records.

A record is a JSON object (the contract's "Audit log")::

    sequence     1, 2, 3, ... without gaps
    time         RFC 3339 UTC with milliseconds: when the request was answered
    request_id   the request's X-Request-Id
    principal    {"user_id": str | null, and at most one of "access_key_id", "token",
                  "presigned", "share"}: who the request said it was (never a secret)
    source       the client's address
    method       GET, PUT, ...
    path         the request's path, percent-encoded as sent, without the query string
    bucket, key, version_id    what it touched (null when nothing of the kind)
    action       what it asked to do (``service.auth.Action`` values, ``auth:login``)
    status       the answer's status
    bytes        the request body's size for a request that sends one, else the answer's
    prev         the ``hash`` of the record before (64 zeros before the first)
    hash         SHA-256 (hex) of the record's canonical JSON without ``hash``

Canonical JSON is RFC 8785 (JCS) for these records: keys sorted, no whitespace, UTF-8, no
escaping beyond what JSON requires; every number is an integer. ``prev`` chains each record
to the one before, so removing, inserting or editing a record breaks the chain at the next
record's ``prev`` or at its own ``hash``.

Pure: no I/O. Thread-safety: pure functions, safe from any thread.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

GENESIS = "0" * 64
"""The ``prev`` of the first record of a log that was never pruned."""
FIELDS = (
    "time",
    "request_id",
    "principal",
    "source",
    "method",
    "path",
    "bucket",
    "key",
    "version_id",
    "action",
    "status",
    "bytes",
)
"""What a request contributes; the log adds ``sequence``, ``prev`` and ``hash``."""
PRINCIPAL_CREDENTIALS = ("access_key_id", "token", "presigned", "share")


def canonical(document: Mapping[str, Any]) -> bytes:
    """The canonical JSON of ``document`` (JCS for documents of strings, integers, null,
    booleans and objects)."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def digest(document: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(document)).hexdigest()


def seal(fields: Mapping[str, Any], sequence: int, prev: str) -> tuple[str, bytes]:
    """The hash of the record of ``fields`` at ``sequence`` after a record whose hash is
    ``prev``, and its line as stored (its canonical JSON without ``hash``, then ``hash``
    last, newline)."""
    return seal_prepared(prepare(fields), sequence, prev)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A record's canonical JSON around the two members only the chain's end knows:
    ``head`` + prev + ``middle`` + sequence + ``tail`` (keys sorted: ``prev`` falls
    between ``path`` and ``principal``, ``sequence`` between ``request_id`` and
    ``source``). Prepared before the chain's lock is taken, so that the holder only joins
    and hashes."""

    head: str
    middle: str
    tail: str


class _Unusual(Exception):
    """A field of a kind the fast encoding does not cover: ``canonical`` encodes it."""


def _json_value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return encode_basestring(value)  # what ``json.dumps(..., ensure_ascii=False)`` uses
    if type(value) is int:
        return str(value)
    raise _Unusual


def prepare(fields: Mapping[str, Any]) -> Prepared:
    """``fields`` as a ``Prepared`` record: by templates for the fields requests make
    (strings, integers, null; a principal of those), else through ``canonical`` (the
    definition; both give the same bytes, ``tests/audit/test_record_encoding.py``)."""
    try:
        principal = fields.get("principal")
        if not isinstance(principal, Mapping):
            raise _Unusual
        who = ",".join(
            f"{encode_basestring(name)}:{_json_value(principal[name])}"
            for name in sorted(principal)
        )
        return Prepared(
            f'{{"action":{_json_value(fields.get("action"))}'
            f',"bucket":{_json_value(fields.get("bucket"))}'
            f',"bytes":{_json_value(fields.get("bytes"))}'
            f',"key":{_json_value(fields.get("key"))}'
            f',"method":{_json_value(fields.get("method"))}'
            f',"path":{_json_value(fields.get("path"))},"prev":"',
            f'","principal":{{{who}}}'
            f',"request_id":{_json_value(fields.get("request_id"))},"sequence":',
            f',"source":{_json_value(fields.get("source"))}'
            f',"status":{_json_value(fields.get("status"))}'
            f',"time":{_json_value(fields.get("time"))}'
            f',"version_id":{_json_value(fields.get("version_id"))}',
        )
    except (_Unusual, TypeError):
        return _prepared_by_canonical(fields)


def _prepared_by_canonical(fields: Mapping[str, Any]) -> Prepared:
    def members(*names: str) -> str:
        return canonical({name: fields.get(name) for name in names}).decode("utf-8")[1:-1]

    return Prepared(
        "{" + members("action", "bucket", "bytes", "key", "method", "path") + ',"prev":"',
        '",' + members("principal", "request_id") + ',"sequence":',
        "," + members("source", "status", "time", "version_id"),
    )


def seal_prepared(prepared: Prepared, sequence: int, prev: str) -> tuple[str, bytes]:
    """``seal`` of a prepared record. ``prev`` is a hash (hex digits), never escaped."""
    body = f"{prepared.head}{prev}{prepared.middle}{sequence}{prepared.tail}".encode()
    hash_hex = hashlib.sha256(body + b"}").hexdigest()
    return hash_hex, body + b',"hash":"' + hash_hex.encode("ascii") + b'"}\n'


def parse_line(line: bytes) -> dict[str, Any] | None:
    """The record a stored line holds, or None when it is not one."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("sequence"), int):
        return None
    return record


def record_problem(record: Mapping[str, Any], sequence: int, prev: str) -> str | None:
    """Why ``record`` is not the record at ``sequence`` after ``prev`` (None: it is)."""
    if record.get("sequence") != sequence:
        return f"expected sequence {sequence}, found {record.get('sequence')!r}"
    if record.get("prev") != prev:
        return "its prev is not the hash of the record before"
    claimed = record.get("hash")
    body = {name: value for name, value in record.items() if name != "hash"}
    if not isinstance(claimed, str) or digest(body) != claimed:
        return "its hash does not match its content"
    return None


@dataclass(slots=True)
class Verification:
    """The outcome of checking a chain (``GET /api/v1/system/audit/verify``)."""

    records: int = 0
    first_sequence: int | None = None
    last_sequence: int | None = None
    ok: bool = True
    first_bad_sequence: int | None = None
    problem: str | None = None
    """Why the first bad record is bad (for the log and ``svc admin audit --verify``)."""

    def document(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "first_sequence": self.first_sequence,
            "last_sequence": self.last_sequence,
            "ok": self.ok,
            "first_bad_sequence": self.first_bad_sequence,
        }


class ChainChecker:
    """Checks records one at a time, in order, from an expected start."""

    def __init__(self, sequence: int, prev: str) -> None:
        self.expected = sequence
        self.prev = prev
        self.result = Verification()

    def feed(self, record: dict[str, Any] | None) -> bool:
        """Check the next record (None: a line that is no record); False once broken."""
        result = self.result
        if not result.ok:
            return False
        problem = "a line that is not a record" if record is None else None
        if record is not None:
            problem = record_problem(record, self.expected, self.prev)
        if problem is not None:
            result.ok = False
            result.first_bad_sequence = self.expected
            result.problem = problem
            return False
        assert record is not None
        result.records += 1
        if result.first_sequence is None:
            result.first_sequence = self.expected
        result.last_sequence = self.expected
        self.prev = record["hash"]
        self.expected += 1
        return True

    def feed_all(self, records: Iterable[dict[str, Any] | None]) -> Verification:
        for record in records:
            if not self.feed(record):
                break
        return self.result
