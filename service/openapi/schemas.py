"""Response schemas of the OpenAPI document: the contract's resources as the server renders
them (``service/http/render.py``, ``identity.py``, ``multipart_handlers.py``, ``videos.py``,
``system.py``, ``health.py``).

Resources are closed (``additionalProperties: false``) where the server builds them field by
field, so a field added to a renderer without the document fails the schemathesis run;
diagnostics that the contract lists as "at least" these fields stay open.

Pure: JSON-ready dicts.
"""

from __future__ import annotations

from typing import Any

TIMESTAMP = {
    "type": "string",
    "format": "date-time",
    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
    "description": "RFC 3339 UTC with milliseconds.",
}
SHA256_HEX = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
COUNT = {"type": "integer", "minimum": 0}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def closed(properties: dict[str, Any], *, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object with exactly ``properties``, all required but ``optional``."""
    return {
        "type": "object",
        "required": [name for name in properties if name not in optional],
        "additionalProperties": False,
        "properties": properties,
    }


def list_of(field: str, item: str) -> dict[str, Any]:
    return closed({field: {"type": "array", "items": ref(item)}})


RETENTION_MODE = {"type": "string", "enum": ["governance", "compliance"]}
RETENTION = closed({"mode": RETENTION_MODE, "retain_until": TIMESTAMP})
DEFAULT_RETENTION = closed(
    {
        "mode": RETENTION_MODE,
        "days": {"type": "number", "exclusiveMinimum": 0, "maximum": 36500},
    }
)

OBJECT_FIELDS: dict[str, Any] = {
    "bucket": {"type": "string"},
    "key": {"type": "string"},
    "size_bytes": COUNT,
    "content_type": {"type": "string"},
    "etag": SHA256_HEX,
    "sha256_checksum": SHA256_HEX,
    "version_id": nullable({"type": "string"}),
    "custom_metadata": STRING_MAP,
    "created_at": TIMESTAMP,
    "updated_at": TIMESTAMP,
    "retention": {
        **nullable(RETENTION),
        "description": "The version's retention (object lock), null when none is set.",
    },
    "legal_hold": {"type": "boolean", "description": "Whether a legal hold keeps the version."},
}

SESSION_FIELDS: dict[str, Any] = {
    "upload_id": {"type": "string"},
    "bucket": {"type": "string"},
    "key": {"type": "string"},
    "content_type": {"type": "string"},
    "custom_metadata": STRING_MAP,
    "recommended_part_size": {"type": "integer", "minimum": 1},
    "max_parallel_parts": {"type": "integer", "minimum": 1},
    "expires_at": TIMESTAMP,
    "created_at": TIMESTAMP,
}

PART = closed(
    {
        "part_number": {"type": "integer", "minimum": 1, "maximum": 10000},
        "etag": SHA256_HEX,
        "size_bytes": COUNT,
    }
)

USER = closed(
    {
        "user_id": {"type": "string"},
        "username": {"type": "string"},
        "role": {"type": "string", "enum": ["admin", "user"]},
        "status": {"type": "string", "enum": ["active", "disabled"]},
        "created_at": TIMESTAMP,
        "updated_at": TIMESTAMP,
    }
)

ACCESS_KEY_FIELDS: dict[str, Any] = {
    "access_key_id": {"type": "string", "pattern": "^bk_"},
    "user_id": {"type": "string"},
    "name": {"type": "string"},
    "status": {"type": "string", "enum": ["active", "revoked"]},
    "created_at": TIMESTAMP,
    "last_used_at": nullable(TIMESTAMP),
}

JOB_STATUS = {"type": "string", "enum": ["queued", "processing", "completed", "failed"]}

JOB = closed(
    {
        "job_id": {"type": "string"},
        "bucket": {"type": "string"},
        "key": {"type": "string"},
        "status": JOB_STATUS,
        "progress": {"type": "number", "minimum": 0, "maximum": 1},
        "params": {
            "type": "object",
            "description": "The packaging parameters with their defaults spelled out.",
            "required": ["formats", "renditions", "segment_seconds", "hls_segment_type"],
            "properties": {
                "formats": {"type": "array", "items": {"type": "string", "enum": ["hls", "dash"]}},
                "renditions": nullable(
                    {
                        "type": "array",
                        "items": closed(
                            {
                                "height": {"type": "integer"},
                                "video_bitrate_kbps": {"type": "integer"},
                            }
                        ),
                    }
                ),
                "segment_seconds": {"type": "number"},
                "hls_segment_type": {"type": "string", "enum": ["mpegts", "fmp4"]},
            },
        },
        "output_prefix": {"type": "string"},
        "outputs": closed(
            {"hls": nullable({"type": "string"}), "dash": nullable({"type": "string"})}
        ),
        "error": nullable({"type": "string"}),
        "attempts": {
            "type": "integer",
            "minimum": 0,
            "description": "Runs started (each lease a fleet worker took counts one).",
        },
        "worker": nullable(
            {"type": "string", "description": "The fleet worker of the latest attempt."}
        ),
        "created_at": TIMESTAMP,
        "updated_at": TIMESTAMP,
    }
)

PERCENTILES = closed(
    {name: {"type": "number", "minimum": 0} for name in ("p50", "p95", "p99", "mean")}
)


def _series(stages: tuple[str, ...], *, window: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "count": COUNT,
        "bytes": COUNT,
        "throughput_bytes_per_second": {"type": "number", "minimum": 0},
        "latency_ms": closed(dict.fromkeys(stages, PERCENTILES)),
    }
    if window:
        fields["latency_samples"] = COUNT
    return closed(fields)


PUT_STAGES = ("stage_write", "flush", "promote", "journal_commit", "total")
GET_STAGES = ("first_byte", "total")

PROCESS_ROW = closed(
    {
        "pid": {"type": "integer", "minimum": 1},
        "role": {"type": "string", "enum": ["writer", "worker", "ended"]},
        "requests": COUNT,
    }
)

PERFORMANCE = closed(
    {
        "window_seconds": {"type": "number", "exclusiveMinimum": 0},
        "put": _series(PUT_STAGES, window=True),
        "get": _series(GET_STAGES, window=True),
        "since_start": closed(
            {
                "elapsed_seconds": {"type": "number", "minimum": 0},
                "put": _series(PUT_STAGES, window=False),
                "get": _series(GET_STAGES, window=False),
            }
        ),
        "processes": {
            "type": "array",
            "description": "Only with several serving processes (SERVICE_WORKERS > 1): each "
            "one with the requests it answered since the start, by pid; refreshed every "
            "second.",
            "items": PROCESS_ROW,
        },
    },
    optional=("processes",),
)

SYSTEM_INFO = {
    "type": "object",
    "description": "At least these fields (the contract's); more may be added.",
    "required": [
        "version",
        "durability",
        "uptime_seconds",
        "started_at",
        "buckets",
        "objects",
        "bytes_stored",
        "journal",
        "disk",
    ],
    "properties": {
        "version": {"type": "string"},
        "python": {"type": "string"},
        "libraries": {"type": "object", "additionalProperties": nullable({"type": "string"})},
        "durability": {"type": "string", "enum": ["strict", "balanced"]},
        "data_dir": {"type": "string"},
        "uptime_seconds": {"type": "number", "minimum": 0},
        "started_at": TIMESTAMP,
        "buckets": COUNT,
        "objects": COUNT,
        "bytes_stored": COUNT,
        "multipart_uploads": COUNT,
        "uploads_in_flight": COUNT,
        "uploads_waiting": COUNT,
        "streams_open": COUNT,
        "streams_waiting": COUNT,
        "media_jobs": {"type": "object", "additionalProperties": COUNT},
        "journal": {
            "type": "object",
            "required": [
                "segments",
                "bytes",
                "last_sequence",
                "last_snapshot_sequence",
                "last_snapshot_at",
            ],
            "properties": {
                "segments": COUNT,
                "bytes": COUNT,
                "last_sequence": COUNT,
                "last_snapshot_sequence": COUNT,
                "last_snapshot_at": nullable(TIMESTAMP),
                "last_snapshot_age_seconds": nullable({"type": "number"}),
                "replay_seconds": {"type": "number", "minimum": 0},
                "read_only": {"type": "boolean"},
            },
        },
        "disk": closed({"total_bytes": COUNT, "free_bytes": COUNT}),
    },
}


def resource_schemas() -> dict[str, Any]:
    """``components.schemas`` of every response body but the errors."""
    version = dict(OBJECT_FIELDS)
    version["is_latest"] = {"type": "boolean"}
    version["is_delete_marker"] = {"type": "boolean"}
    for name in ("etag", "sha256_checksum"):
        version[name] = {
            "type": "string",
            "pattern": "^(?:[0-9a-f]{64})?$",
            "description": "Hex SHA-256 of the bytes; empty for a delete marker.",
        }
    return {
        "Health": closed(
            {
                "name": {"type": "string"},
                "status": {"type": "string", "enum": ["ok", "degraded"]},
                "version": {"type": "string"},
                "reasons": {"type": "array", "items": {"type": "string"}},
            },
            optional=("reasons",),
        ),
        "Bucket": closed(
            {
                "name": {"type": "string"},
                "owner": {"type": "string", "description": "The owning user's user_id."},
                "quota_bytes": nullable(COUNT),
                "versioning_enabled": {"type": "boolean"},
                "tags": STRING_MAP,
                "created_at": TIMESTAMP,
                "updated_at": TIMESTAMP,
                "usage": closed({"object_count": COUNT, "size_bytes": COUNT}),
                "bucket_id": {
                    "type": "string",
                    "pattern": "^bkt_[0-9a-f]{24}$",
                    "description": "The bucket's identity: a bucket deleted and created again "
                    "under the same name is another bucket, with another bucket_id.",
                },
                "object_lock_enabled": {
                    "type": "boolean",
                    "description": "Chosen at creation, for good; keeps versioning on.",
                },
                "default_retention": {
                    **nullable(DEFAULT_RETENTION),
                    "description": "The retention every new version gets (lock buckets).",
                },
            }
        ),
        "BucketList": list_of("buckets", "Bucket"),
        "Object": closed(OBJECT_FIELDS),
        "ObjectList": closed(
            {
                "objects": {"type": "array", "items": ref("Object")},
                "common_prefixes": {"type": "array", "items": {"type": "string"}},
                "next_cursor": nullable({"type": "string"}),
            }
        ),
        "ObjectVersion": closed(version),
        "VersionList": closed(
            {
                "versions": {"type": "array", "items": ref("ObjectVersion")},
                "next_cursor": nullable({"type": "string"}),
            }
        ),
        "Session": closed(SESSION_FIELDS),
        "SessionWithParts": closed(
            {**SESSION_FIELDS, "parts": {"type": "array", "items": ref("Part")}}
        ),
        "SessionList": closed(
            {
                "uploads": {"type": "array", "items": ref("Session")},
                "next_cursor": nullable({"type": "string"}),
            }
        ),
        "Part": PART,
        "OptimizedImage": closed(
            {
                "bucket": {"type": "string"},
                "source_key": {"type": "string"},
                "key": {"type": "string"},
                "format": {"type": "string", "enum": ["jpeg", "png", "webp", "avif"]},
                "width": {"type": "integer", "minimum": 1},
                "height": {"type": "integer", "minimum": 1},
                "size_bytes": COUNT,
                "source_size_bytes": COUNT,
                "sha256_checksum": SHA256_HEX,
                "etag": SHA256_HEX,
                "content_type": {"type": "string"},
                "version_id": nullable({"type": "string"}),
            }
        ),
        "User": USER,
        "UserList": list_of("users", "User"),
        "Login": closed(
            {"token": {"type": "string"}, "expires_at": TIMESTAMP, "user": ref("User")}
        ),
        "AccessKey": closed(ACCESS_KEY_FIELDS),
        "AccessKeyList": list_of("access_keys", "AccessKey"),
        "NewAccessKey": closed(
            {**ACCESS_KEY_FIELDS, "secret_key": {"type": "string", "pattern": "^sk_"}}
        ),
        "Presigned": closed(
            {
                "url": {"type": "string", "format": "uri"},
                "method": {"type": "string", "enum": ["GET", "PUT", "HEAD"]},
                "expires_at": TIMESTAMP,
                "expires_in": {"type": "integer", "minimum": 1, "maximum": 604800},
            }
        ),
        "Job": JOB,
        "JobList": list_of("jobs", "Job"),
        "Share": closed(
            {
                "share_id": {"type": "string"},
                "token": {"type": "string"},
                "expires_at": TIMESTAMP,
                "hls_url": nullable({"type": "string", "format": "uri"}),
                "dash_url": nullable({"type": "string", "format": "uri"}),
                "job_id": {"type": "string"},
            }
        ),
        "SystemInfo": SYSTEM_INFO,
        "Performance": PERFORMANCE,
    }
