"""The error envelope and the error responses, per status, of the OpenAPI document.

Derived from ``service.common.api_errors.STATUS_BY_CODE``, the server's own code-to-status table,
so the document's code enums cannot drift from what the server can send: a status's
response schema is the envelope with ``code`` restricted to that status's codes.

Pure: builds JSON-ready dicts.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from service.common.api_errors import STATUS_BY_CODE

ERROR_SCHEMA = "Error"


def codes_for(status: int) -> list[str]:
    """The contract's codes answered with ``status``, in table order.

    >>> codes_for(409)
    ['BucketAlreadyExists', 'BucketNotEmpty', 'UserAlreadyExists', 'InvalidState']
    """
    return [code for code, code_status in STATUS_BY_CODE.items() if code_status == status]


def error_statuses() -> list[int]:
    """Every status the server answers with an error body."""
    return sorted(set(STATUS_BY_CODE.values()))


def error_schemas() -> dict[str, Any]:
    """``Error`` (the envelope, any code) and ``Error<status>`` (codes of one status)."""
    schemas: dict[str, Any] = {
        ERROR_SCHEMA: _envelope({"type": "string", "enum": list(STATUS_BY_CODE)}),
    }
    for status in error_statuses():
        schemas[f"{ERROR_SCHEMA}{status}"] = _envelope(
            {"type": "string", "enum": codes_for(status)}
        )
    return schemas


def _envelope(code: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": "The contract's error body; `request_id` equals `X-Request-Id`.",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "request_id"],
                "additionalProperties": False,
                "properties": {
                    "code": code,
                    "message": {"type": "string"},
                    "request_id": {"type": "string", "minLength": 1},
                },
            }
        },
    }


EXTRA_HEADERS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {
            "description": '`Bearer realm="service"` to a failed login or a request that '
            "carried a Bearer token (no browser dialog); both schemes, Basic and Bearer, "
            "otherwise.",
            "required": True,
            "schema": {"type": "string"},
        },
        "Retry-After": {
            "description": "After too many failed logins: seconds until the next try.",
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        },
    },
    416: {
        "Content-Range": {
            "description": "`bytes */<size>`",
            "required": True,
            "schema": {"type": "string", "pattern": "^bytes \\*/[0-9]+$"},
        }
    },
    429: {
        "Retry-After": {
            "description": "A per-user cap (uploads in progress, open event streams) stayed "
            "full for the whole `SERVICE_QUEUE_WAIT`: seconds to wait before retrying.",
            "required": True,
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        }
    },
    503: {
        "Retry-After": {
            "description": "Seconds to wait before retrying.",
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        }
    },
}


def error_responses(request_id_header: dict[str, Any]) -> dict[str, Any]:
    """``components.responses``: one ``Error<status>`` response per error status."""
    responses: dict[str, Any] = {}
    for status in error_statuses():
        headers = {"X-Request-Id": request_id_header, **EXTRA_HEADERS.get(status, {})}
        responses[f"{ERROR_SCHEMA}{status}"] = {
            "description": f"{HTTPStatus(status).phrase}: " + ", ".join(codes_for(status)),
            "headers": headers,
            "content": {
                "application/json": {
                    "schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}{status}"}
                }
            },
        }
    return responses
