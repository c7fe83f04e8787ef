"""Paths of an object version's retention and legal hold (``service/http/lock_handlers.py``),
with their request and response schemas.

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.common.wire import HEADER_BYPASS_GOVERNANCE
from service.openapi.operations import (
    header_param,
    json_body,
    ok,
    operation,
    query_param,
    ref_param,
)
from service.openapi.requests import body
from service.openapi.schemas import RETENTION_MODE, TIMESTAMP, closed, nullable

API = "/api/v1"
VERSION_ID = query_param(
    "version_id",
    "The version (without it: the current one; `null` names the version stored without "
    "versioning).",
    {"type": "string"},
)
PARAMETERS = [ref_param("bucket"), ref_param("key"), VERSION_ID]
TARGET_NOTE = (
    "The object's path ends in this segment: a key that itself ends in `/retention` or "
    "`/legal-hold` is sent with that last `/` as `%2F`. 409 InvalidState on a bucket created "
    "without object lock; 405 for a delete marker."
)
RETENTION_VERSION_ID = {"type": "string", "description": "The version's id (`null` for none)."}


def lock_schemas() -> dict[str, Any]:
    """``components.schemas`` of the retention and legal hold bodies."""
    return {
        "Retention": closed(
            {
                "version_id": RETENTION_VERSION_ID,
                "mode": nullable(RETENTION_MODE),
                "retain_until": nullable(TIMESTAMP),
            }
        ),
        "RetentionUpdate": body(
            {
                "mode": nullable(RETENTION_MODE),
                "retain_until": nullable(
                    {
                        "type": "string",
                        "description": "RFC 3339 with a zone, in the future (at most 100 "
                        "years ahead); null with a null mode removes the retention.",
                    }
                ),
            },
            ("mode", "retain_until"),
            closed=True,
        ),
        "LegalHold": closed(
            {
                "version_id": RETENTION_VERSION_ID,
                "status": {"type": "string", "enum": ["on", "off"]},
            }
        ),
        "LegalHoldUpdate": body(
            {"status": {"type": "string", "enum": ["on", "off"]}}, ("status",), closed=True
        ),
    }


def lock_paths() -> dict[str, Any]:
    return {
        f"{API}/buckets/{{bucket}}/objects/{{key}}/retention": {
            "get": operation(
                "getRetention",
                "A version's retention",
                tag="objects",
                description=TARGET_NOTE,
                parameters=PARAMETERS,
                responses={200: ok("The retention (nulls when none).", "Retention")},
                errors=(400, 401, 403, 404, 405, 409),
            ),
            "put": operation(
                "putRetention",
                "Set, lengthen, shorten or remove a version's retention",
                tag="objects",
                description=TARGET_NOTE
                + " A retention may always be set where none holds, and lengthened; an "
                "active compliance retention can be neither shortened nor removed by anyone "
                "(423); an active governance one only by an admin sending "
                f"`{HEADER_BYPASS_GOVERNANCE}: true` (anyone else sending it: 403).",
                parameters=[
                    *PARAMETERS,
                    header_param(
                        HEADER_BYPASS_GOVERNANCE,
                        "`true` (admins only) or `false`.",
                        {
                            "type": "string",
                            "pattern": "^\\s*(?:[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])\\s*$",
                        },
                    ),
                ],
                request_body=json_body("RetentionUpdate"),
                responses={200: ok("The retention now.", "Retention")},
                errors=(400, 401, 403, 404, 405, 409, 413, 423, 503),
            ),
        },
        f"{API}/buckets/{{bucket}}/objects/{{key}}/legal-hold": {
            "get": operation(
                "getLegalHold",
                "A version's legal hold",
                tag="objects",
                description=TARGET_NOTE,
                parameters=PARAMETERS,
                responses={200: ok("The legal hold.", "LegalHold")},
                errors=(400, 401, 403, 404, 405, 409),
            ),
            "put": operation(
                "putLegalHold",
                "Turn a version's legal hold on or off",
                tag="objects",
                description=TARGET_NOTE + " A legal hold lasts until turned off.",
                parameters=PARAMETERS,
                request_body=json_body("LegalHoldUpdate"),
                responses={200: ok("The legal hold now.", "LegalHold")},
                errors=(400, 401, 403, 404, 405, 409, 413, 503),
            ),
        },
    }
