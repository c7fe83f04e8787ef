"""Wire constants of the contract (docs: /work/shared/API.md) that server and client share.

Only names and limits live here: header names, paths, query parameter names and numeric
bounds. The server's HTTP layer and the client's ``_wire`` both import them from here, so
the two cannot drift. No logic and no imports beyond ``typing``, so the client may import
this module without pulling in anything of the server (``service/__init__.py`` is a
docstring and a version). Pure; safe from any thread.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACCESS_KEY_ID_PREFIX",
    "API_PREFIX",
    "BATCH_PAX_CONTENT_TYPE",
    "BATCH_PAX_META_PREFIX",
    "BATCH_PAX_SHA256",
    "HEADER_CHECKSUM_SHA256",
    "HEADER_META_PREFIX",
    "HEADER_REQUEST_ID",
    "HEADER_RETRY_AFTER",
    "HEADER_VERSION_ID",
    "HEALTH_PATH",
    "MAX_BATCH_MEMBERS",
    "MAX_LIST_LIMIT",
    "MAX_PART_NUMBER",
    "MAX_PRESIGN_EXPIRES_SECONDS",
    "MIN_PART_NUMBER",
    "NULL_VERSION_ID",
    "PRESIGN_CREDENTIAL_PARAM",
    "PRESIGN_EXPIRES_PARAM",
    "PRESIGN_SIGNATURE_PARAM",
    "QUERY_PART_NUMBER",
    "QUERY_VERSION_ID",
    "SECRET_KEY_PREFIX",
]

API_PREFIX: Final = "/api/v1"
HEALTH_PATH: Final = "/health"

HEADER_REQUEST_ID: Final = "X-Request-Id"
HEADER_CHECKSUM_SHA256: Final = "X-Checksum-Sha256"
HEADER_VERSION_ID: Final = "X-Version-Id"
HEADER_META_PREFIX: Final = "X-Meta-"
HEADER_RETRY_AFTER: Final = "Retry-After"

#: ``X-Version-Id`` carries this when the bucket is not versioned.
NULL_VERSION_ID: Final = "null"

QUERY_PART_NUMBER: Final = "partNumber"
QUERY_VERSION_ID: Final = "version_id"

PRESIGN_EXPIRES_PARAM: Final = "X-Expires"
PRESIGN_CREDENTIAL_PARAM: Final = "X-Credential"
PRESIGN_SIGNATURE_PARAM: Final = "X-Signature"

ACCESS_KEY_ID_PREFIX: Final = "bk_"
SECRET_KEY_PREFIX: Final = "sk_"

MIN_PART_NUMBER: Final = 1
MAX_PART_NUMBER: Final = 10_000
MAX_LIST_LIMIT: Final = 1000
MAX_PRESIGN_EXPIRES_SECONDS: Final = 604_800

#: A batch upload (an endpoint added beyond the contract: docs/batch.md): members per request,
#: and the pax records that carry a member's content type, SHA-256 and custom metadata.
MAX_BATCH_MEMBERS: Final = 10_000
BATCH_PAX_CONTENT_TYPE: Final = "SERVICE.content_type"
BATCH_PAX_SHA256: Final = "SERVICE.sha256"
BATCH_PAX_META_PREFIX: Final = "SERVICE.meta."
