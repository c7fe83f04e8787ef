"""Paths of the audit log (``service/http/audit_handlers.py``) and its record schemas.

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.audit.log import DEFAULT_PAGE, MAX_PAGE, MAX_SEQUENCE
from service.audit.record import PRINCIPAL_CREDENTIALS
from service.openapi.operations import ok, operation, query_param
from service.openapi.schemas import COUNT, SHA256_HEX, TIMESTAMP, closed, nullable

API = "/api/v1"
SEQUENCE = {"type": "integer", "minimum": 1}
TEXT = {"type": "string"}


def audit_schemas() -> dict[str, Any]:
    """``components.schemas`` of the audit records, pages and verification."""
    principal = closed(
        {"user_id": nullable(TEXT), **{name: nullable(TEXT) for name in PRINCIPAL_CREDENTIALS}},
        optional=PRINCIPAL_CREDENTIALS,
    )
    principal["description"] = (
        "Who the request said it was: the user and at most one credential, named by its id "
        "(a token by `tk_` and 16 hex digits of its SHA-256); never a secret."
    )
    return {
        "AuditRecord": closed(
            {
                "sequence": SEQUENCE,
                "time": TIMESTAMP,
                "request_id": TEXT,
                "principal": principal,
                "source": {**TEXT, "description": "The client's address."},
                "method": TEXT,
                "path": {**TEXT, "description": "As sent (percent-encoded), no query string."},
                "bucket": nullable(TEXT),
                "key": nullable(TEXT),
                "version_id": nullable(TEXT),
                "action": {**TEXT, "description": "Such as `object:write`, `auth:login`."},
                "status": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 599,
                    "description": "The answer's status; 0 for the server's own record of a "
                    "damaged log end it cut at a start (`audit:tail_cut`).",
                },
                "bytes": {
                    **COUNT,
                    "description": "The request body's size for PUT, POST and PATCH; else "
                    "the answer's body size.",
                },
                "prev": {**SHA256_HEX, "description": "The hash of the record before."},
                "hash": {
                    **SHA256_HEX,
                    "description": "SHA-256 of the record's canonical JSON (RFC 8785) "
                    "without `hash`.",
                },
            }
        ),
        "AuditPage": closed(
            {
                "records": {"type": "array", "items": {"$ref": "#/components/schemas/AuditRecord"}},
                "next_cursor": nullable({"type": "string", "pattern": "^[0-9]{1,18}$"}),
            }
        ),
        "AuditVerification": closed(
            {
                "records": COUNT,
                "first_sequence": nullable(SEQUENCE),
                "last_sequence": nullable(SEQUENCE),
                "ok": {"type": "boolean"},
                "first_bad_sequence": nullable(SEQUENCE),
            }
        ),
    }


def audit_paths() -> dict[str, Any]:
    return {
        f"{API}/system/audit": {
            "get": operation(
                "listAudit",
                "Audit records after a sequence, a page at a time (admin)",
                tag="diagnostics",
                description="Records in sequence order; `next_cursor` is the `since` of the "
                "next page, null once the end of the log was reached (a rarely matching filter "
                "may answer a short page with a cursor). 409 InvalidState when the server runs "
                "with `SERVICE_AUDIT=0`.",
                parameters=[
                    query_param(
                        "since",
                        "Records after this sequence (default 0: from the oldest kept).",
                        {"type": "integer", "minimum": 0, "maximum": MAX_SEQUENCE},
                    ),
                    query_param(
                        "limit",
                        f"Records per page, 1 to {MAX_PAGE} (default {DEFAULT_PAGE}).",
                        {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
                    ),
                    query_param("bucket", "Only records of this bucket.", TEXT),
                    query_param("user_id", "Only records of this user.", TEXT),
                ],
                responses={200: ok("A page.", "AuditPage")},
                errors=(400, 401, 403, 409),
            )
        },
        f"{API}/system/audit/verify": {
            "get": operation(
                "verifyAudit",
                "Check the audit log's hash chain (admin)",
                tag="diagnostics",
                description="Checks every kept record from the signed anchor of a pruned log "
                "(or the first record) to the last one written: its sequence, its `prev` and "
                "its `hash`. `first_bad_sequence` names the first record that fails.",
                responses={200: ok("The outcome.", "AuditVerification")},
                errors=(400, 401, 403, 409),
            )
        },
    }
