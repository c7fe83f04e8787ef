"""Paths of health, login, users, access keys, presigning, diagnostics and the document
itself (``service/http/health.py``, ``identity.py``, ``system.py``, ``openapi_handlers.py``).

Pure: JSON-ready dicts keyed by the handlers' ``route_name`` templates.
"""

from __future__ import annotations

from typing import Any

from service.openapi.operations import (
    PUBLIC,
    header,
    json_body,
    link,
    ok,
    operation,
    path_param,
    query_param,
)

API = "/api/v1"
USER_ID = path_param("user_id", "The user's `user_id`.")
KEY_ID = path_param("access_key_id", "The key's `access_key_id`.")
USER_LINKS = {
    "GetUser": link("getUser", user_id="$response.body#/user_id"),
    "UpdateUser": link("updateUser", user_id="$response.body#/user_id"),
    "DeleteUser": link("deleteUser", user_id="$response.body#/user_id"),
}
KEY_LINKS = {
    "GetAccessKey": link("getAccessKey", access_key_id="$response.body#/access_key_id"),
    "UpdateAccessKey": link("updateAccessKey", access_key_id="$response.body#/access_key_id"),
    "DeleteAccessKey": link("deleteAccessKey", access_key_id="$response.body#/access_key_id"),
}


def health_paths() -> dict[str, Any]:
    return {
        "/health": {
            "get": operation(
                "getHealth",
                "Liveness: `ok`, or `degraded` with reasons",
                tag="diagnostics",
                security=PUBLIC,
                responses={200: ok("The server answers.", "Health")},
                errors=(),
            ),
            "head": operation(
                "headHealth",
                "Liveness without a body",
                tag="diagnostics",
                security=PUBLIC,
                head=True,
                responses={200: ok("The server answers.")},
                errors=(),
            ),
        }
    }


def account_paths() -> dict[str, Any]:
    return {
        f"{API}/auth/login": {
            "post": operation(
                "login",
                "Exchange username and password for a Bearer token",
                tag="accounts",
                security=PUBLIC,
                request_body=json_body("LoginRequest"),
                description="A wrong password, an unknown user and a lockout after repeated "
                "failures (with `Retry-After`) are all 401; a disabled user is 403.",
                responses={200: ok("Signed in.", "Login")},
                errors=(400, 401, 403, 413),
            )
        },
        f"{API}/users": {
            "get": operation(
                "listUsers",
                "Every user (admin)",
                tag="accounts",
                responses={200: ok("Users.", "UserList")},
                errors=(400, 401, 403),
            ),
            "post": operation(
                "createUser",
                "Create a user (admin)",
                tag="accounts",
                request_body=json_body("UserCreate"),
                responses={201: ok("The new user.", "User", links=USER_LINKS)},
                errors=(400, 401, 403, 409, 413, 503),
            ),
        },
        f"{API}/users/{{user_id}}": {
            "get": operation(
                "getUser",
                "A user (admin, or the user itself)",
                tag="accounts",
                parameters=[USER_ID],
                responses={200: ok("The user.", "User")},
                errors=(400, 401, 403, 404),
            ),
            "patch": operation(
                "updateUser",
                "Change password, status or role",
                tag="accounts",
                description="A user may change its own password; status and role are an "
                "admin's. The last active admin can be neither disabled nor demoted (409).",
                parameters=[USER_ID],
                request_body=json_body("UserUpdate", required=False),
                responses={200: ok("The user.", "User")},
                errors=(400, 401, 403, 404, 409, 413, 503),
            ),
            "delete": operation(
                "deleteUser",
                "Delete a user (admin; never the last active admin)",
                tag="accounts",
                parameters=[USER_ID],
                responses={204: ok("Deleted.")},
                errors=(400, 401, 403, 404, 409, 503),
            ),
        },
        f"{API}/access-keys": {
            "get": operation(
                "listAccessKeys",
                "Access keys the caller may read, without secrets",
                tag="accounts",
                parameters=[
                    query_param(
                        "user_id",
                        "Only this user's keys (403 unless the caller's own, or an admin).",
                        {"type": "string"},
                    )
                ],
                responses={200: ok("Keys.", "AccessKeyList")},
                errors=(400, 401, 403),
            ),
            "post": operation(
                "createAccessKey",
                "Create an access key; its secret is shown this once",
                tag="accounts",
                request_body=json_body("AccessKeyCreate", required=False),
                responses={
                    201: ok("The new key with `secret_key`.", "NewAccessKey", links=KEY_LINKS)
                },
                errors=(400, 401, 403, 404, 409, 413, 503),
            ),
        },
        f"{API}/access-keys/{{access_key_id}}": {
            "get": operation(
                "getAccessKey",
                "An access key, without its secret",
                tag="accounts",
                parameters=[KEY_ID],
                responses={200: ok("The key.", "AccessKey")},
                errors=(400, 401, 403, 404),
            ),
            "patch": operation(
                "updateAccessKey",
                "Revoke or reactivate an access key",
                tag="accounts",
                parameters=[KEY_ID],
                request_body=json_body("AccessKeyUpdate"),
                responses={200: ok("The key.", "AccessKey")},
                errors=(400, 401, 403, 404, 413, 503),
            ),
            "delete": operation(
                "deleteAccessKey",
                "Delete an access key",
                tag="accounts",
                parameters=[KEY_ID],
                responses={204: ok("Deleted.")},
                errors=(400, 401, 403, 404, 503),
            ),
        },
        f"{API}/presign": {
            "post": operation(
                "presign",
                "A URL that works without credentials for one method and object",
                tag="objects",
                request_body=json_body("PresignRequest"),
                responses={200: ok("The URL.", "Presigned")},
                errors=(400, 401, 403, 404, 413),
            )
        },
    }


def system_paths() -> dict[str, Any]:
    return {
        f"{API}/system/info": {
            "get": operation(
                "getSystemInfo",
                "Version, counts, journal and disk (admin)",
                tag="diagnostics",
                responses={200: ok("Figures.", "SystemInfo")},
                errors=(400, 401, 403),
            ),
        },
        f"{API}/system/performance": {
            "get": operation(
                "getPerformance",
                "PUT and GET latency and throughput over a window (admin)",
                tag="diagnostics",
                responses={200: ok("Figures.", "Performance")},
                errors=(400, 401, 403),
            ),
        },
        f"{API}/metrics": {
            "get": operation(
                "getMetrics",
                "Prometheus text exposition",
                tag="diagnostics",
                description="Public (no credentials) when the server runs with "
                "`SERVICE_METRICS_PUBLIC=1`; otherwise admin.",
                responses={
                    200: ok("Metrics.", content={"text/plain": {"schema": {"type": "string"}}})
                },
                errors=(400, 401, 403),
            ),
        },
        f"{API}/openapi.json": {
            "get": operation(
                "getOpenApi",
                "This document (OpenAPI 3.1)",
                tag="diagnostics",
                security=PUBLIC,
                responses={
                    200: ok(
                        "The document.",
                        content={
                            "application/json": {
                                "schema": {"type": "object", "required": ["openapi", "paths"]}
                            }
                        },
                    )
                },
                errors=(),
            ),
        },
        f"{API}/docs": {
            "get": operation(
                "getDocs",
                "This document as a readable HTML page",
                tag="diagnostics",
                security=PUBLIC,
                responses={
                    200: ok(
                        "The page.",
                        content={"text/html": {"schema": {"type": "string"}}},
                        headers={
                            "Content-Security-Policy": header(
                                "Nothing is loaded from elsewhere, nothing runs: "
                                "`default-src 'none'` and `sandbox`.",
                                {"type": "string"},
                            )
                        },
                    )
                },
                errors=(),
            ),
        },
    }
