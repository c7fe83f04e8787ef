"""Wire constants of the contract (docs/api.md) that server and client share.

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
    "HEADER_BYPASS_GOVERNANCE",
    "HEADER_CHECKSUM_SHA256",
    "HEADER_LEGAL_HOLD",
    "HEADER_META_PREFIX",
    "HEADER_REQUEST_ID",
    "HEADER_RETAIN_UNTIL",
    "HEADER_RETENTION_MODE",
    "HEADER_RETRY_AFTER",
    "HEADER_VERSION_ID",
    "HEALTH_PATH",
    "LEGAL_HOLD_SUFFIX",
    "MAX_ACCESS_KEY_NAME",
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
    "RETENTION_SUFFIX",
    "SECRET_KEY_PREFIX",
    "VIDEO_PLAY_PATH",
]

API_PREFIX: Final = "/api/v1"
HEALTH_PATH: Final = "/health"
#: Shared video outputs: ``{VIDEO_PLAY_PATH}/{token}/{path}``, answered to any origin.
VIDEO_PLAY_PATH: Final = API_PREFIX + "/videos/play"

HEADER_REQUEST_ID: Final = "X-Request-Id"
HEADER_CHECKSUM_SHA256: Final = "X-Checksum-Sha256"
HEADER_VERSION_ID: Final = "X-Version-Id"
HEADER_META_PREFIX: Final = "X-Meta-"
HEADER_RETRY_AFTER: Final = "Retry-After"
HEADER_RETENTION_MODE: Final = "X-Retention-Mode"
HEADER_RETAIN_UNTIL: Final = "X-Retain-Until"
HEADER_LEGAL_HOLD: Final = "X-Legal-Hold"
HEADER_BYPASS_GOVERNANCE: Final = "X-Bypass-Governance-Retention"

#: An object's retention and legal hold are at ``.../objects/{key}`` + these; a key that itself
#: ends so is sent with its last ``/`` percent-encoded (``%2F``).
RETENTION_SUFFIX: Final = "/retention"
LEGAL_HOLD_SUFFIX: Final = "/legal-hold"

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
#: Characters in an access key's ``name`` (where the contract is silent).
MAX_ACCESS_KEY_NAME: Final = 128

#: A batch upload (an endpoint added beyond the contract: docs/batch.md): members per request,
#: and the pax records that carry a member's content type, SHA-256 and custom metadata.
MAX_BATCH_MEMBERS: Final = 10_000
BATCH_PAX_CONTENT_TYPE: Final = "SERVICE.content_type"
BATCH_PAX_SHA256: Final = "SERVICE.sha256"
BATCH_PAX_META_PREFIX: Final = "SERVICE.meta."
