"""Wire constants of the contract that client and server share, from ``service.wire``.

The one module both sides import: the server's HTTP layer takes the same names from
``service.wire``, so a header name or a bound cannot differ between them. Pure; safe from
any thread.
"""

from __future__ import annotations

from service.wire import (
    ACCESS_KEY_ID_PREFIX,
    API_PREFIX,
    HEADER_CHECKSUM_SHA256,
    HEADER_META_PREFIX,
    HEADER_REQUEST_ID,
    HEADER_RETRY_AFTER,
    HEADER_VERSION_ID,
    HEALTH_PATH,
    MAX_LIST_LIMIT,
    MAX_PART_NUMBER,
    MAX_PRESIGN_EXPIRES_SECONDS,
    MIN_PART_NUMBER,
    NULL_VERSION_ID,
    PRESIGN_CREDENTIAL_PARAM,
    PRESIGN_EXPIRES_PARAM,
    PRESIGN_SIGNATURE_PARAM,
    QUERY_PART_NUMBER,
    QUERY_VERSION_ID,
    SECRET_KEY_PREFIX,
)

__all__ = [
    "ACCESS_KEY_ID_PREFIX",
    "API_PREFIX",
    "HEADER_CHECKSUM_SHA256",
    "HEADER_META_PREFIX",
    "HEADER_REQUEST_ID",
    "HEADER_RETRY_AFTER",
    "HEADER_VERSION_ID",
    "HEALTH_PATH",
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
