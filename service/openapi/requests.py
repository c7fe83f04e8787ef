"""Request body schemas of the OpenAPI document, as strict as the server's parsers.

Each schema states what the handler accepts: required fields, types, bounds, and
``additionalProperties: false`` exactly where the handler refuses unknown fields (bucket
create/update, user and access-key PATCH); elsewhere unknown fields are ignored and the
schema says so. Bounds come from the server's own constants, so they cannot drift.

Pure: JSON-ready dicts.
"""

from __future__ import annotations

from typing import Any

from service.auth.passwords import MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS
from service.auth.presign import MAX_EXPIRES_IN, MIN_EXPIRES_IN
from service.common.header_fields import (
    MAX_CONTENT_TYPE_CHARS,
    MAX_METADATA_BYTES,
    MEDIA_TYPE_PATTERN,
)
from service.common.names import MAX_KEY_BYTES
from service.common.numbers import MAX_DIGITS
from service.common.wire import MAX_ACCESS_KEY_NAME, MAX_PART_NUMBER
from service.media import video_params as video
from service.media.image_params import FITS, FORMATS, MAX_DIMENSION, QUALITY_RANGE
from service.openapi.schemas import DEFAULT_RETENTION, nullable, ref
from service.ops.buckets import MAX_TAG_CHARS, MAX_TAGS

BUCKET_NAME = {
    "type": "string",
    "minLength": 3,
    "maxLength": 63,
    "pattern": (
        "^(?!.*\\.\\.)(?![0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}$)"
        "[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
    ),
    "description": "3 to 63 of `a-z 0-9 . -`, starting and ending with a letter or digit, "
    "no two adjacent periods, not shaped like an IPv4 address.",
}
OBJECT_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_KEY_BYTES,
    "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$",
    "description": f"1 to {MAX_KEY_BYTES} bytes of UTF-8, no NUL or control characters.",
}
ANY_STRING = {"type": "string"}
NON_EMPTY = {"type": "string", "minLength": 1}
EXPIRES_IN = {"type": "integer", "minimum": MIN_EXPIRES_IN, "maximum": MAX_EXPIRES_IN}
JSON_INT_MAX = 10**MAX_DIGITS - 1
"""The largest JSON integer the server reads (``service.http.json_body``: at most
``MAX_DIGITS`` digits, within int64); a longer one is 400 InvalidArgument."""
QUOTA = nullable({"type": "integer", "minimum": 0, "maximum": JSON_INT_MAX})
CUSTOM_METADATA = {
    "type": "object",
    "description": "Names are HTTP token characters (stored lowercased), values UTF-8 "
    f"without control characters; at most {MAX_METADATA_BYTES} bytes in all.",
    "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"},
    "additionalProperties": {"type": "string", "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"},
}
CONTENT_TYPE = {
    "type": "string",
    "maxLength": MAX_CONTENT_TYPE_CHARS,
    "pattern": f"^(?:{MEDIA_TYPE_PATTERN})$",
    "description": "A media type such as `text/plain; charset=utf-8`.",
}
ANY_JSON = {
    "description": "Any JSON value the server reads: integers of at most "
    f"{MAX_DIGITS} digits (numbers under 10^{MAX_DIGITS} in magnitude).",
    "anyOf": [
        {"type": ["string", "boolean", "null"]},
        {
            "type": "number",
            "exclusiveMinimum": -(10**MAX_DIGITS),
            "exclusiveMaximum": 10**MAX_DIGITS,
        },
        {"type": "array", "items": ref("AnyJson")},
        {"type": "object", "additionalProperties": ref("AnyJson")},
    ],
}
TAGS = {
    "type": "object",
    "maxProperties": MAX_TAGS,
    "propertyNames": {"minLength": 1, "maxLength": MAX_TAG_CHARS},
    "additionalProperties": {"type": "string", "maxLength": MAX_TAG_CHARS},
}
PASSWORD = {
    "type": "string",
    "minLength": MIN_PASSWORD_CHARS,
    "maxLength": MAX_PASSWORD_CHARS,
    "pattern": "\\S",
    "description": "Not only whitespace.",
}
ROLE = {"type": "string", "enum": ["admin", "user"]}
IMAGE_SIDE = nullable({"type": "integer", "minimum": 1, "maximum": MAX_DIMENSION})


def body(
    properties: dict[str, Any], required: tuple[str, ...] = (), *, closed: bool = False
) -> dict[str, Any]:
    """A JSON object body; ``closed`` when the server refuses unknown fields (400)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False if closed else ref("AnyJson")
    return schema


def request_schemas() -> dict[str, Any]:
    """``components.schemas`` of every JSON request body."""
    low, high = QUALITY_RANGE
    bucket_fields = {"name": BUCKET_NAME, "quota_bytes": QUOTA, "tags": TAGS}
    return {
        "AnyJson": ANY_JSON,
        "BucketCreate": {
            "description": "With `object_lock_enabled`, versioning stays on (false is 400) and "
            "a `default_retention` may be given; without it, a `default_retention` is 400.",
            "anyOf": [
                body(
                    {
                        **bucket_fields,
                        "versioning_enabled": {"type": "boolean"},
                        "object_lock_enabled": {"const": False},
                        "default_retention": {"type": "null"},
                    },
                    ("name",),
                    closed=True,
                ),
                body(
                    {
                        **bucket_fields,
                        "versioning_enabled": {"const": True},
                        "object_lock_enabled": {"const": True},
                        "default_retention": nullable(DEFAULT_RETENTION),
                    },
                    ("name", "object_lock_enabled"),
                    closed=True,
                ),
            ],
        },
        "BucketUpdate": body(
            {
                "quota_bytes": QUOTA,
                "versioning_enabled": {
                    "type": "boolean",
                    "description": "`false` on a bucket with object lock is 409.",
                },
                "tags": TAGS,
                "object_lock_enabled": {
                    "type": "boolean",
                    "description": "Only its current value (anything else is 409).",
                },
                "default_retention": {
                    **nullable(DEFAULT_RETENTION),
                    "description": "Lock buckets only (else 409); null removes it.",
                },
            },
            closed=True,
        ),
        "LoginRequest": body(
            {"username": ANY_STRING, "password": ANY_STRING}, ("username", "password")
        ),
        "UserCreate": body(
            {
                "username": {"type": "string", "pattern": "^[A-Za-z0-9._@-]{3,64}$"},
                "password": PASSWORD,
                "role": ROLE,
            },
            ("username", "password"),
        ),
        "UserUpdate": body(
            {
                "password": PASSWORD,
                "status": {"type": "string", "enum": ["active", "disabled"]},
                "role": ROLE,
            },
            closed=True,
        ),
        "AccessKeyCreate": body(
            {
                "user_id": {"type": "string", "description": "Default: the caller."},
                "name": {"type": "string", "maxLength": MAX_ACCESS_KEY_NAME},
            }
        ),
        "AccessKeyUpdate": body(
            {"status": {"type": "string", "enum": ["active", "revoked"]}},
            ("status",),
            closed=True,
        ),
        "PresignRequest": body(
            {
                "bucket": ANY_STRING,
                "key": OBJECT_KEY,
                "method": {"type": "string", "enum": ["GET", "PUT", "HEAD"], "default": "GET"},
                "expires_in": {**EXPIRES_IN, "default": 3600},
                "content_type": nullable(CONTENT_TYPE),
            },
            ("bucket", "key"),
        ),
        "MultipartInit": body(
            {
                "bucket": ANY_STRING,
                "key": OBJECT_KEY,
                "content_type": nullable(CONTENT_TYPE),
                "custom_metadata": nullable(CUSTOM_METADATA),
                "size_bytes": nullable({"type": "integer", "minimum": 0, "maximum": JSON_INT_MAX}),
                "part_size": nullable(
                    {"type": "integer", "minimum": 1024 * 1024, "maximum": 5 * 1024**3}
                ),
            },
            ("bucket", "key"),
        ),
        "MultipartComplete": body(
            {
                "parts": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_PART_NUMBER,
                    "description": "Strictly ascending part numbers (else 400 "
                    "InvalidPartOrder); may name a subset of the stored parts.",
                    "items": body(
                        {
                            "part_number": {
                                "type": "integer",
                                "minimum": 1,
                                "maximum": MAX_PART_NUMBER,
                            },
                            "etag": ANY_STRING,
                        },
                        ("part_number", "etag"),
                    ),
                }
            },
            ("parts",),
        ),
        "ImageOptimize": body(
            {
                "bucket": ANY_STRING,
                "key": ANY_STRING,
                "width": IMAGE_SIDE,
                "height": IMAGE_SIDE,
                "fit": nullable({"type": "string", "enum": list(FITS)}),
                "format": nullable({"type": "string", "enum": [*FORMATS, "jpg"]}),
                "quality": nullable({"type": "integer", "minimum": low, "maximum": high}),
                "enlarge": nullable({"type": "boolean"}),
                "target_key": nullable(OBJECT_KEY),
                "custom_metadata": nullable(CUSTOM_METADATA),
            },
            ("bucket", "key"),
        ),
        "ThumbnailRequest": body(
            {
                "bucket": NON_EMPTY,
                "key": OBJECT_KEY,
                "at_seconds": nullable(
                    {"type": "number", "minimum": 0, "maximum": video.MAX_AT_SECONDS}
                ),
                "width": nullable(
                    {"type": "integer", "minimum": 1, "maximum": video.MAX_THUMBNAIL_WIDTH}
                ),
                "format": nullable({"type": "string", "enum": list(video.THUMBNAIL_FORMATS)}),
                "quality": nullable({"type": "integer", "minimum": 1, "maximum": 100}),
                "target_key": nullable(OBJECT_KEY),
                "custom_metadata": nullable(CUSTOM_METADATA),
            },
            ("bucket", "key"),
        ),
        "JobCreate": body(
            {
                "bucket": NON_EMPTY,
                "key": NON_EMPTY,
                "formats": {
                    "type": "array",
                    "minItems": 1,
                    "uniqueItems": True,
                    "items": {"type": "string", "enum": list(video.PACKAGING_FORMATS)},
                },
                "renditions": nullable(
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": video.MAX_RENDITIONS,
                        "description": "Heights must differ.",
                        "items": body(
                            {
                                "height": {
                                    "type": "integer",
                                    "minimum": video.MIN_HEIGHT,
                                    "maximum": video.MAX_HEIGHT,
                                },
                                "video_bitrate_kbps": nullable(
                                    {
                                        "type": "integer",
                                        "minimum": video.MIN_BITRATE_KBPS,
                                        "maximum": video.MAX_BITRATE_KBPS,
                                    }
                                ),
                            },
                            ("height",),
                            closed=True,
                        ),
                    }
                ),
                "segment_seconds": nullable(
                    {
                        "type": "number",
                        "minimum": video.MIN_SEGMENT_SECONDS,
                        "maximum": video.MAX_SEGMENT_SECONDS,
                    }
                ),
                "hls_segment_type": nullable(
                    {"type": "string", "enum": list(video.HLS_SEGMENT_TYPES)}
                ),
                "output_prefix": nullable({**OBJECT_KEY, "maxLength": video.MAX_PREFIX_BYTES - 1}),
            },
            ("bucket", "key", "formats"),
        ),
        "ShareCreate": body({"job_id": NON_EMPTY, "expires_in": nullable(EXPIRES_IN)}, ("job_id",)),
    }
