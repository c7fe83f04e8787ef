"""The batch upload's path and schemas (``service/http/batch_handlers.py``), an endpoint added
beyond the contract (docs/batch.md).

Pure: JSON-ready dicts.
"""

from __future__ import annotations

from typing import Any

from service.common.api_errors import STATUS_BY_CODE
from service.common.wire import (
    BATCH_PAX_CONTENT_TYPE,
    BATCH_PAX_META_PREFIX,
    BATCH_PAX_SHA256,
    MAX_BATCH_MEMBERS,
)
from service.openapi.operations import ok as success
from service.openapi.operations import operation, query_param
from service.openapi.schemas import COUNT, closed, ref

ROUTE = "/api/v1/buckets/{bucket}/batch"
DESCRIPTION = (
    "The body is a tar stream (POSIX ustar or pax; not compressed). Each regular-file member "
    "is stored as the object `prefix + name` (a leading `./` dropped) exactly as a PUT of it "
    "would be: the same checks, quota, versioning and one `object.created` event each. "
    "Directories are skipped; any other member type is refused on its own. Pax records: "
    f"`{BATCH_PAX_CONTENT_TYPE}` (else the type is guessed from the key), "
    f"`{BATCH_PAX_SHA256}` (hex, verified: BadDigest) and "
    f"`{BATCH_PAX_META_PREFIX}<name>` (custom metadata). A member that fails its own checks "
    "is reported in `results` and skipped; the others are stored. A body that is not a whole "
    "valid tar (a damaged header, cut short, no end-of-archive block) or holds more than "
    f"{MAX_BATCH_MEMBERS} members is 400 InvalidArgument and stores nothing. The answer "
    "comes once every stored member is durable."
)


def batch_schemas() -> dict[str, Any]:
    """``BatchResult`` and ``BatchFailure``."""
    return {
        "BatchFailure": closed(
            {
                "key": {"type": "string"},
                "error": closed(
                    {
                        "code": {"type": "string", "enum": list(STATUS_BY_CODE)},
                        "message": {"type": "string"},
                        "status": {"type": "integer", "minimum": 400, "maximum": 599},
                    }
                ),
            }
        ),
        "BatchResult": closed(
            {
                "results": {
                    "type": "array",
                    "description": "One entry per file member, in stream order.",
                    "items": {"oneOf": [ref("Object"), ref("BatchFailure")]},
                },
                "stored": COUNT,
                "failed": COUNT,
            }
        ),
    }


def batch_paths() -> dict[str, Any]:
    return {
        ROUTE: {
            "post": operation(
                "putBatch",
                "Store every file of a tar stream as an object",
                tag="objects",
                description=DESCRIPTION,
                parameters=[
                    {"$ref": "#/components/parameters/bucket"},
                    query_param(
                        "prefix",
                        "Put before every member's name to make its key.",
                        {"type": "string"},
                    ),
                ],
                request_body={
                    "required": True,
                    "content": {
                        "application/x-tar": {"schema": {"type": "string", "format": "binary"}}
                    },
                },
                responses={200: success("Each member's outcome.", "BatchResult")},
                errors=(400, 401, 403, 404, 413, 429, 503, 507),
            )
        }
    }
