"""Paths of replication and the archive (``service/http/replication_handlers.py``), with
their response schemas.

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.openapi.operations import ok, operation
from service.openapi.schemas import COUNT, TIMESTAMP, closed, nullable, ref

API = "/api/v1"
LAG = closed(
    {
        "records": COUNT,
        "seconds": {"type": "number", "minimum": 0},
        "bytes": COUNT,
    }
)


def replication_schemas() -> dict[str, Any]:
    """``components.schemas`` of the replication status."""
    return {
        "ReplicationLag": LAG,
        "Standby": closed(
            {
                "id": {"type": "string"},
                "address": {"type": "string"},
                "confirmed_sequence": COUNT,
                "lag": ref("ReplicationLag"),
                "connected_since": TIMESTAMP,
            }
        ),
        "ArchiveStatus": closed(
            {
                "target": {"type": "string"},
                "archived_sequence": COUNT,
                "oldest_restorable_at": nullable(TIMESTAMP),
                "last_error": nullable({"type": "string"}),
            }
        ),
        "Replication": closed(
            {
                "role": {"type": "string", "enum": ["primary", "standby"]},
                "epoch": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["async", "sync"]},
                "last_sequence": COUNT,
                "applied_sequence": COUNT,
                "lag": ref("ReplicationLag"),
                "standbys": {"type": "array", "items": ref("Standby")},
                "archive": nullable(ref("ArchiveStatus")),
            }
        ),
    }


def replication_paths() -> dict[str, Any]:
    return {
        f"{API}/replication": {
            "get": operation(
                "getReplication",
                "Replication role, position and lag, standbys and the archive (admin)",
                tag="diagnostics",
                responses={200: ok("The replication status.", "Replication")},
                errors=(400, 401, 403),
            ),
        },
    }
