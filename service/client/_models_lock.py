"""Typed results of object lock and the audit log: a version's retention and legal hold,
audit records, their pages and the chain's verification.

As in ``_models``: frozen dataclasses named after the contract's JSON, ``from_json`` ignores
fields it does not know. Pure; instances are immutable.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from service.client._models import optional_timestamp, parse_timestamp

__all__ = ["AuditPage", "AuditRecord", "AuditVerification", "LegalHold", "ObjectRetention"]


@dataclasses.dataclass(frozen=True)
class ObjectRetention:
    """A version's retention: ``mode`` and ``retain_until`` are None when it has none."""

    version_id: str
    mode: str | None
    retain_until: datetime.datetime | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ObjectRetention:
        return cls(
            version_id=data["version_id"],
            mode=data.get("mode"),
            retain_until=optional_timestamp(data.get("retain_until")),
        )


@dataclasses.dataclass(frozen=True)
class LegalHold:
    """A version's legal hold (``on`` is the contract's ``"status": "on"``)."""

    version_id: str
    on: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LegalHold:
        return cls(version_id=data["version_id"], on=data["status"] == "on")


@dataclasses.dataclass(frozen=True)
class AuditRecord:
    """One audit record; ``principal`` as the contract has it (the user and the id of the
    credential the request presented), ``prev`` and ``hash`` its links in the chain."""

    sequence: int
    time: datetime.datetime
    request_id: str
    principal: dict[str, str | None]
    source: str
    method: str
    path: str
    bucket: str | None
    key: str | None
    version_id: str | None
    action: str
    status: int
    bytes: int
    prev: str
    hash: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditRecord:
        return cls(
            sequence=int(data["sequence"]),
            time=parse_timestamp(data["time"]),
            request_id=data["request_id"],
            principal=dict(data["principal"]),
            source=data["source"],
            method=data["method"],
            path=data["path"],
            bucket=data.get("bucket"),
            key=data.get("key"),
            version_id=data.get("version_id"),
            action=data["action"],
            status=int(data["status"]),
            bytes=int(data["bytes"]),
            prev=data["prev"],
            hash=data["hash"],
        )


@dataclasses.dataclass(frozen=True)
class AuditPage:
    """A page of audit records; ``next_cursor`` is the ``since`` of the next (None: the end
    of the log was reached)."""

    records: list[AuditRecord]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditPage:
        return cls(
            records=[AuditRecord.from_json(item) for item in data["records"]],
            next_cursor=data.get("next_cursor"),
        )


@dataclasses.dataclass(frozen=True)
class AuditVerification:
    """The outcome of checking the chain: ``ok``, or the first record that fails."""

    records: int
    first_sequence: int | None
    last_sequence: int | None
    ok: bool
    first_bad_sequence: int | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditVerification:
        def number(name: str) -> int | None:
            value = data.get(name)
            return None if value is None else int(value)

        return cls(
            records=int(data["records"]),
            first_sequence=number("first_sequence"),
            last_sequence=number("last_sequence"),
            ok=bool(data["ok"]),
            first_bad_sequence=number("first_bad_sequence"),
        )
