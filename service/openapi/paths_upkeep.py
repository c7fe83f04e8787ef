"""Paths of lifecycle rules, object events, webhooks and the scrub
(``service/http/lifecycle_handlers.py``, ``event_handlers.py``, ``notification_handlers.py``,
``scrub_handlers.py``), with their request and response schemas.

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.events.feed import EVENT_TYPES
from service.meta.lifecycle_state import ACTIONS
from service.openapi.operations import (
    header_param,
    json_body,
    ok,
    operation,
    query_param,
    ref_param,
)
from service.openapi.requests import body
from service.openapi.schemas import COUNT, TIMESTAMP, closed, list_of, nullable
from service.ops.lifecycle_rules import MAX_DAYS, MAX_RULE_ID_CHARS, MAX_RULES
from service.ops.notifications import (
    MAX_ID_CHARS,
    MAX_SECRET_CHARS,
    MAX_URL_CHARS,
    MAX_WEBHOOKS,
)

API = "/api/v1"
ADMIN = " (admin)"
DAYS = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_DAYS}
SEQUENCE = {"type": "string", "pattern": "^[0-9]{1,18}$"}
EVENT_TYPE = {"type": "string", "enum": list(EVENT_TYPES)}
PREFIX = {"type": "string", "description": "Shaped like the start of a key; empty for all."}
PRINTABLE_ID = "^[^\\x00-\\x1f\\x7f]+$"


def upkeep_schemas() -> dict[str, Any]:
    """``components.schemas`` of the lifecycle, webhook and scrub bodies."""
    rule_id = {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_RULE_ID_CHARS,
        "pattern": PRINTABLE_ID,
    }
    return {
        "LifecycleRule": closed(
            {
                "id": {"type": "string"},
                "prefix": {"type": "string"},
                "enabled": {"type": "boolean"},
                **{name: nullable({"type": "number"}) for name in ACTIONS},
            }
        ),
        "LifecycleRules": list_of("rules", "LifecycleRule"),
        "LifecycleRulesUpdate": body(
            {
                "rules": {
                    "type": "array",
                    "maxItems": MAX_RULES,
                    "items": {
                        **body(
                            {
                                "id": rule_id,
                                "prefix": PREFIX,
                                "enabled": {"type": "boolean"},
                                **{name: DAYS for name in ACTIONS},
                            },
                            ("id",),
                            closed=True,
                        ),
                        "anyOf": [{"required": [name]} for name in ACTIONS],
                    },
                    "description": "Rule ids are unique; each rule names at least one action.",
                }
            },
            ("rules",),
            closed=True,
        ),
        "LifecyclePass": closed(
            {"expired": COUNT, "noncurrent_removed": COUNT, "uploads_aborted": COUNT}
        ),
        "Webhook": closed(
            {
                "id": {"type": "string"},
                "url": {"type": "string"},
                "events": {"type": "array", "items": EVENT_TYPE},
                "prefix": {"type": "string"},
                "status": closed(
                    {
                        "delivered": COUNT,
                        "pending": COUNT,
                        "failed_attempts": COUNT,
                        "last_error": nullable({"type": "string"}),
                        "last_delivered_at": nullable(TIMESTAMP),
                        "cursor": {
                            **COUNT,
                            "description": "The last event sequence handled.",
                        },
                        "skipped": {
                            **COUNT,
                            "description": "Events given up on (no longer retained).",
                        },
                    }
                ),
            }
        ),
        "WebhookList": list_of("webhooks", "Webhook"),
        "WebhooksUpdate": body(
            {
                "webhooks": {
                    "type": "array",
                    "maxItems": MAX_WEBHOOKS,
                    "items": body(
                        {
                            "id": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": MAX_ID_CHARS,
                                "pattern": PRINTABLE_ID,
                            },
                            "url": {
                                "type": "string",
                                "format": "uri",
                                "maxLength": MAX_URL_CHARS,
                                "pattern": "^https?://",
                            },
                            "events": {"type": "array", "items": EVENT_TYPE},
                            "prefix": PREFIX,
                            "secret": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": MAX_SECRET_CHARS,
                            },
                        },
                        ("id", "url", "secret"),
                        closed=True,
                    ),
                    "description": "Webhook ids are unique; secrets are never returned.",
                }
            },
            ("webhooks",),
            closed=True,
        ),
        "Scrub": closed(
            {
                "state": {"type": "string", "enum": ["idle", "running"]},
                "started_at": nullable(TIMESTAMP),
                "finished_at": nullable(TIMESTAMP),
                "objects_checked": COUNT,
                "bytes_checked": COUNT,
                "rate_bytes_per_second": {"type": "number", "minimum": 0},
                "corrupt": {
                    "type": "array",
                    "items": closed(
                        {
                            "bucket": {"type": "string"},
                            "key": {"type": "string"},
                            "version_id": nullable({"type": "string"}),
                            "problem": {"type": "string"},
                            "detected_at": TIMESTAMP,
                        }
                    ),
                },
            }
        ),
    }


def upkeep_paths() -> dict[str, Any]:
    bucket = [ref_param("bucket")]
    return {
        f"{API}/buckets/{{bucket}}/lifecycle": {
            "get": operation(
                "getLifecycle",
                "The bucket's lifecycle rules",
                tag="upkeep",
                parameters=bucket,
                responses={200: ok("The rules (an empty list when none).", "LifecycleRules")},
                errors=(400, 401, 403, 404),
            ),
            "put": operation(
                "putLifecycle",
                "Replace the bucket's lifecycle rules",
                tag="upkeep",
                description="A document is refused whole (400) and changes nothing. Days are "
                "positive numbers (fractions allowed).",
                parameters=bucket,
                request_body=json_body("LifecycleRulesUpdate"),
                responses={200: ok("The stored rules.", "LifecycleRules")},
                errors=(400, 401, 403, 404, 413, 503),
            ),
            "delete": operation(
                "deleteLifecycle",
                "Remove the bucket's lifecycle rules",
                tag="upkeep",
                parameters=bucket,
                responses={204: ok("Removed.")},
                errors=(400, 401, 403, 404, 503),
            ),
        },
        f"{API}/system/lifecycle/run": {
            "post": operation(
                "runLifecycle",
                "Apply every bucket's lifecycle rules now" + ADMIN,
                tag="upkeep",
                responses={200: ok("What the pass did.", "LifecyclePass")},
                errors=(400, 401, 403, 503),
            ),
        },
        f"{API}/buckets/{{bucket}}/events": {
            "get": operation(
                "streamEvents",
                "The bucket's object events as Server-Sent Events",
                tag="upkeep",
                description="A `text/event-stream`: each event is `id: <sequence>` "
                "and `data: <the event as JSON>` (with the bucket's `bucket_id`: a bucket "
                "deleted and created again is another bucket, whose stream never carries the "
                "old one's events); comment lines keep it alive. Without a resume point it "
                "starts with the next event. A resume point older than the retained events "
                "is 410 EventsExpired; if retention overtakes a reader mid-stream, the stream "
                "ends with an `event: error` carrying the error body. The stream is "
                "authorised for as long as it is open: once its key is revoked or deleted, "
                "its user disabled or deleted, its token expired or revoked, its right to "
                "read the bucket gone or its bucket deleted, it ends with an `event: end` "
                'whose data is `{"reason", "message"}`.',
                parameters=[
                    *bucket,
                    query_param("since", "Resume after this sequence.", SEQUENCE),
                    header_param(
                        "Last-Event-ID",
                        "Resume after this sequence (wins over `since`).",
                        SEQUENCE,
                    ),
                ],
                responses={
                    200: ok(
                        "The stream.",
                        content={"text/event-stream": {"schema": {"type": "string"}}},
                    )
                },
                errors=(400, 401, 403, 404, 410, 429),
            ),
        },
        f"{API}/buckets/{{bucket}}/notifications": {
            "get": operation(
                "getNotifications",
                "The bucket's webhooks and their delivery status",
                tag="upkeep",
                parameters=bucket,
                responses={200: ok("The webhooks.", "WebhookList")},
                errors=(400, 401, 403, 404),
            ),
            "put": operation(
                "putNotifications",
                "Replace the bucket's webhooks",
                tag="upkeep",
                description="Each event is POSTed to the matching webhooks' `url` with "
                "`X-Event-Id` and `X-Signature-Sha256` (HMAC-SHA256 of the body with the "
                "`secret`), at least once, in sequence order.",
                parameters=bucket,
                request_body=json_body("WebhooksUpdate"),
                responses={200: ok("The stored webhooks.", "WebhookList")},
                errors=(400, 401, 403, 404, 413, 503),
            ),
            "delete": operation(
                "deleteNotifications",
                "Remove the bucket's webhooks",
                tag="upkeep",
                parameters=bucket,
                responses={204: ok("Removed.")},
                errors=(400, 401, 403, 404, 503),
            ),
        },
        f"{API}/system/scrub": {
            "get": operation(
                "getScrub",
                "The scrub's state and the corrupt payloads it found" + ADMIN,
                tag="upkeep",
                responses={200: ok("The scrub.", "Scrub")},
                errors=(400, 401, 403),
            ),
            "post": operation(
                "startScrub",
                "Start a scrub pass now" + ADMIN,
                tag="upkeep",
                description="409 InvalidState while a pass runs.",
                responses={202: ok("Started.", "Scrub")},
                errors=(400, 401, 403, 409),
            ),
        },
    }
