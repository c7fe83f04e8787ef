"""Paths of replication and the archive (``service/http/replication_handlers.py``), with
their response schemas.

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.openapi.operations import header_param, ok, operation, path_param, query_param
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
                "connected": {"type": "boolean"},
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
                "primary_url": {"type": "string"},
                "last_error": nullable({"type": "string"}),
            },
            optional=("primary_url", "last_error"),
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
        f"{API}/replication/promote": {
            "post": operation(
                "promoteStandby",
                "Make this standby the primary of the next epoch (admin; docs/replication.md)",
                tag="diagnostics",
                responses={200: ok("The replication status, now a primary's.", "Replication")},
                errors=(400, 401, 403, 409),
            ),
        },
        **feed_paths(),
    }


PAYLOAD_ID_PATTERN = r"^([0-9a-f]{32}|[A-Za-z0-9]+\.[0-9A-Fa-f]+\.[0-9A-Fa-f]+\.[A-Za-z0-9]+)$"
"""A payload id (32 lowercase hex) or a part written in place (``service.storage.direct``)."""
OCTETS = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
SEQUENCE_HEADER = {"schema": {"type": "integer", "minimum": 0}}
STANDBY = [
    {
        **header_param(
            "X-Standby-Id",
            "The standby's id (1..64 of [A-Za-z0-9_-])",
            {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        ),
        "required": True,
    },
    header_param(
        "X-Standby-Lag-Bytes", "The standby's lag in bytes, as it counts it", {"type": "string"}
    ),
]


def feed_paths() -> dict[str, Any]:
    """The replication stream a standby reads (docs/api.md, "Standby and replication stream")."""

    def feed(operation_id: str, summary: str, response: dict[str, Any], **more: Any) -> Any:
        extra = more.pop("parameters", [])
        standby = STANDBY if more.pop("standby", True) else []
        return {
            "get": operation(
                operation_id,
                summary,
                tag="diagnostics",
                responses={more.pop("status", 200): response},
                errors=more.pop("errors", (400, 401, 403, 404)),
                parameters=[*extra, *standby],
            )
        }

    return {
        f"{API}/replication/snapshot": feed(
            "getReplicationSnapshot",
            "The newest journal snapshot, verbatim, for a standby's bootstrap (admin)",
            ok(
                "The snapshot (empty for a primary with no record).",
                headers={"X-Snapshot-Sequence": SEQUENCE_HEADER},
                content=OCTETS,
            ),
        ),
        f"{API}/replication/secret": feed(
            "getReplicationSecret",
            "The signing secret, for a standby (admin)",
            ok("The secret's bytes.", content=OCTETS),
            standby=False,
        ),
        f"{API}/replication/records": feed(
            "getReplicationRecords",
            "The journal's frames from a sequence on, a long poll (admin)",
            ok(
                "Frames from `from` on (none after `wait` seconds without a new record).",
                headers={
                    "X-First-Sequence": SEQUENCE_HEADER,
                    "X-Last-Sequence": SEQUENCE_HEADER,
                    "X-Primary-Sequence": SEQUENCE_HEADER,
                    "X-Server-Id": {"schema": {"type": "string"}},
                },
                content=OCTETS,
            ),
            parameters=[
                query_param(
                    "from",
                    "First sequence wanted",
                    {"type": "integer", "minimum": 1},
                    required=True,
                ),
                query_param(
                    "wait",
                    "Seconds to wait for a record (<= 30)",
                    {"type": "integer", "minimum": 0},
                ),
                query_param(
                    "inline",
                    "1: carry the small payloads the frames reference after them",
                    {"type": "integer", "enum": [0, 1]},
                ),
                query_param(
                    "confirmed",
                    "The standby's durable position (at most from - 1, its default)",
                    {"type": "integer", "minimum": 0},
                ),
            ],
            errors=(400, 401, 403, 404, 409, 410),
        ),
        f"{API}/replication/confirm": feed(
            "confirmReplicationRecords",
            "A standby holds every record up to a sequence durably (admin)",
            ok("Confirmed."),
            parameters=[
                query_param(
                    "sequence",
                    "The standby's newest durable record",
                    {"type": "integer", "minimum": 0},
                    required=True,
                ),
            ],
            status=204,
            errors=(400, 401, 403, 404, 409),
        ),
        f"{API}/replication/payloads": feed(
            "getReplicationPayloads",
            "Many payloads in one streamed answer, for a standby (admin)",
            ok("Each payload's entry: its id, its size (-1: not held), its bytes.", content=OCTETS),
            parameters=[
                {
                    **query_param(
                        "id",
                        "A payload id (repeated, 1 to 256)",
                        {
                            "type": "array",
                            "items": {"type": "string", "pattern": PAYLOAD_ID_PATTERN},
                            "minItems": 1,
                            "maxItems": 256,
                        },
                        required=True,
                    ),
                    "explode": True,
                }
            ],
            standby=False,
        ),
        f"{API}/replication/payloads/{{payload_id}}": feed(
            "getReplicationPayload",
            "A payload's bytes, for a standby, or from a standby for its primary's scrub (admin)",
            ok("The payload's bytes.", content=OCTETS),
            parameters=[
                {
                    **path_param("payload_id", "A payload id from a record or snapshot"),
                    "schema": {"type": "string", "pattern": PAYLOAD_ID_PATTERN},
                }
            ],
            standby=False,
        ),
    }
