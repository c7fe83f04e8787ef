"""Flows of object lock and the audit log: a version's retention and legal hold, audit pages
and the chain's verification. Each builds one request and parses its answer, as in the other
``_ops_*`` modules. Pure.
"""

from __future__ import annotations

import datetime

from service.client._flow import Call, Flow, request
from service.client._models import parse
from service.client._models_lock import AuditPage, AuditVerification, LegalHold, ObjectRetention
from service.client._paths import api, legal_hold_path, retention_path
from service.client._wire import HEADER_BYPASS_GOVERNANCE

__all__ = [
    "audit_page",
    "get_legal_hold",
    "get_retention",
    "set_legal_hold",
    "set_retention",
    "verify_audit",
]


def _version(version_id: str | None) -> dict[str, str]:
    return {} if version_id is None else {"version_id": version_id}


def rfc3339(moment: datetime.datetime) -> str:
    """An aware datetime as the contract writes times (UTC, milliseconds).

    >>> rfc3339(datetime.datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC))
    '2030-01-02T03:04:05.678Z'
    """
    if moment.tzinfo is None:
        raise ValueError("retain_until must be an aware datetime (with a time zone)")
    utc = moment.astimezone(datetime.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def get_retention(bucket: str, key: str, version_id: str | None) -> Flow[ObjectRetention]:
    call = Call("GET", retention_path(bucket, key), params=_version(version_id))
    reply = yield from request(call)
    return parse(ObjectRetention.from_json, reply.json())


def set_retention(
    bucket: str,
    key: str,
    mode: str | None,
    retain_until: datetime.datetime | None,
    *,
    version_id: str | None,
    bypass_governance: bool,
) -> Flow[ObjectRetention]:
    body = {"mode": mode, "retain_until": None if retain_until is None else rfc3339(retain_until)}
    headers = {HEADER_BYPASS_GOVERNANCE: "true"} if bypass_governance else {}
    call = Call(
        "PUT",
        retention_path(bucket, key),
        params=_version(version_id),
        headers=headers,
        json=body,
    )
    reply = yield from request(call)
    return parse(ObjectRetention.from_json, reply.json())


def get_legal_hold(bucket: str, key: str, version_id: str | None) -> Flow[LegalHold]:
    call = Call("GET", legal_hold_path(bucket, key), params=_version(version_id))
    reply = yield from request(call)
    return parse(LegalHold.from_json, reply.json())


def set_legal_hold(bucket: str, key: str, on: bool, version_id: str | None) -> Flow[LegalHold]:
    body = {"status": "on" if on else "off"}
    call = Call("PUT", legal_hold_path(bucket, key), params=_version(version_id), json=body)
    reply = yield from request(call)
    return parse(LegalHold.from_json, reply.json())


def audit_page(
    since: int | str, limit: int, bucket: str | None, user_id: str | None
) -> Flow[AuditPage]:
    params = {"since": str(since), "limit": str(limit)}
    if bucket is not None:
        params["bucket"] = bucket
    if user_id is not None:
        params["user_id"] = user_id
    reply = yield from request(Call("GET", api("/system/audit"), params=params))
    return parse(AuditPage.from_json, reply.json())


def verify_audit() -> Flow[AuditVerification]:
    reply = yield from request(Call("GET", api("/system/audit/verify")))
    return parse(AuditVerification.from_json, reply.json())
