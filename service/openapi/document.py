"""The OpenAPI 3.1 document: info, security schemes, paths and components, assembled.

Built once per process from the schema and path modules (``openapi_document`` is cached)
and served by ``service.http.openapi_handlers``. Its paths are keyed by the same templates
as the handlers' ``route_name``, which is how ``tests/openapi`` proves that the document and
``service.app.handler_table`` name the same routes and methods.

Pure: JSON-ready dicts.
"""

from __future__ import annotations

import functools
from typing import Any

from service import __version__
from service.openapi.errors import error_responses, error_schemas
from service.openapi.operations import REQUEST_ID
from service.openapi.paths_accounts import account_paths, health_paths, system_paths
from service.openapi.paths_audit import audit_paths, audit_schemas
from service.openapi.paths_batch import batch_paths, batch_schemas
from service.openapi.paths_console import console_paths
from service.openapi.paths_fleet import JOB_TOKEN_SCHEME, fleet_paths, fleet_schemas
from service.openapi.paths_lock import lock_paths, lock_schemas
from service.openapi.paths_media import image_paths, video_paths
from service.openapi.paths_replication import replication_paths, replication_schemas
from service.openapi.paths_storage import (
    bucket_paths,
    multipart_paths,
    object_paths,
    parameter_components,
)
from service.openapi.paths_upkeep import upkeep_paths, upkeep_schemas
from service.openapi.requests import request_schemas
from service.openapi.schemas import resource_schemas

DESCRIPTION = """\
A single-node object store: buckets, streaming objects, multipart uploads, presigned URLs,
images, video packaging and shares, users and access keys.

Every response carries `X-Request-Id`; every error with a body is
`{"error": {"code", "message", "request_id"}}`, its `code` one of its status's codes.
Timestamps are RFC 3339 UTC with milliseconds. Custom metadata travels as
`X-Meta-<name>` headers on object PUT and reads (a header family OpenAPI cannot name).

CORS (`SERVICE_CORS_ORIGINS`): an allowed origin gets `Access-Control-Allow-Origin` on every
answer, and a preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) on any
`/api/v1` path is answered before routing; preflights are not listed as operations.

Every response carries one `Server` header and `X-Content-Type-Options: nosniff`. Object
bodies (reads, presigned reads, share playback, image variants) are sandboxed
(`Content-Security-Policy: sandbox`), and types a browser would run are sent as
`Content-Disposition: attachment`. A POST, PUT, PATCH or DELETE whose `Origin` is neither this
server's nor allowed by `SERVICE_CORS_ORIGINS` (or that says `Sec-Fetch-Site: cross-site`
without one) is 403 AccessDenied; presigned requests are exempt. A request over a per-user
cap (uploads in progress, open event streams) waits up to `SERVICE_QUEUE_WAIT` for a slot,
then is 429 TooManyRequests with `Retry-After`.
"""

PRESIGN_NOTE = (
    "Presigned URL, with `X-Expires` and `X-Credential`: made by `POST /api/v1/presign`, "
    "valid for one method and object until it expires."
)


def security_schemes() -> dict[str, Any]:
    return {
        "basicAuth": {
            "type": "http",
            "scheme": "basic",
            "description": "An access key: the key id (`bk_...`) as user, the secret "
            "(`sk_...`) as password.",
        },
        "bearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "description": "A token from `POST /api/v1/auth/login`.",
        },
        "jobToken": JOB_TOKEN_SCHEME,
        "presignExpires": {
            "type": "apiKey",
            "in": "query",
            "name": "X-Expires",
            "description": "Unix seconds. " + PRESIGN_NOTE,
        },
        "presignCredential": {
            "type": "apiKey",
            "in": "query",
            "name": "X-Credential",
            "description": "The signing access key id or user id. " + PRESIGN_NOTE,
        },
        "presignSignature": {
            "type": "apiKey",
            "in": "query",
            "name": "X-Signature",
            "description": "HMAC-SHA256. " + PRESIGN_NOTE,
        },
    }


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The whole document (the same object on every call: do not mutate it)."""
    paths: dict[str, Any] = {}
    for part in (
        health_paths(),
        bucket_paths(),
        object_paths(),
        lock_paths(),
        batch_paths(),
        image_paths(),
        account_paths(),
        system_paths(),
        multipart_paths(),
        video_paths(),
        fleet_paths(),
        upkeep_paths(),
        replication_paths(),
        audit_paths(),
        console_paths(),
    ):
        paths.update(part)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "service",
            "version": __version__,
            "description": DESCRIPTION,
            "license": {"name": "Proprietary", "identifier": "LicenseRef-Proprietary"},
        },
        "servers": [{"url": "/", "description": "This server."}],
        "tags": [
            {"name": name}
            for name in (
                "buckets",
                "objects",
                "multipart",
                "media",
                "accounts",
                "diagnostics",
                "upkeep",
                "console",
            )
        ],
        "security": [{"basicAuth": []}, {"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": {
                **error_schemas(),
                **resource_schemas(),
                **request_schemas(),
                **upkeep_schemas(),
                **batch_schemas(),
                **replication_schemas(),
                **lock_schemas(),
                **audit_schemas(),
                **fleet_schemas(),
            },
            "responses": error_responses(REQUEST_ID),
            "parameters": parameter_components(),
            "headers": {"X-Request-Id": REQUEST_ID},
            "securitySchemes": security_schemes(),
        },
    }
