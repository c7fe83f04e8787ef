"""Building blocks of the document's operations: shared parameters, headers, responses.

``operation`` assembles one operation: its parameters, body, success responses and the
error responses of the statuses it can answer (``Error<status>`` from ``errors``), each
with ``X-Request-Id``. HEAD operations get the same statuses without bodies, as the server
sends them.

Pure: JSON-ready dicts.
"""

from __future__ import annotations

from typing import Any

from service.openapi.errors import ERROR_SCHEMA, EXTRA_HEADERS, codes_for

REQUEST_ID = {
    "description": "The request's id: the client's `X-Request-Id` echoed when it is "
    "1 to 128 of `A-Z a-z 0-9 . _ : -`, else one the server made.",
    "required": True,
    "schema": {"type": "string", "minLength": 1},
}
AUTHENTICATED: list[dict[str, list[str]]] = [{"bearerAuth": []}, {"basicAuth": []}]
"""Access key (HTTP Basic) or a login token (Bearer)."""
PRESIGNED: dict[str, list[str]] = {
    "presignExpires": [],
    "presignCredential": [],
    "presignSignature": [],
}
PUBLIC: list[dict[str, list[str]]] = [{}]


def header(description: str, schema: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    return {"description": description, "required": required, "schema": schema}


def path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1},
    }


def query_param(
    name: str, description: str, schema: dict[str, Any], *, required: bool = False
) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
    }


def header_param(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": False,
        "description": description,
        "schema": schema,
    }


def ref_param(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/parameters/{name}"}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def schema_ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema_name: str, *, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": json_content(schema_ref(schema_name))}


def ok(
    description: str,
    schema_name: str | None = None,
    *,
    headers: dict[str, Any] | None = None,
    links: dict[str, Any] | None = None,
    content: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A success response: JSON ``schema_name``, other ``content``, or no body."""
    response: dict[str, Any] = {
        "description": description,
        "headers": {"X-Request-Id": REQUEST_ID, **(headers or {})},
    }
    if schema_name is not None:
        response["content"] = json_content(schema_ref(schema_name))
    elif content is not None:
        response["content"] = content
    if links:
        response["links"] = links
    return response


def link(operation_id: str, description: str = "", **parameters: str) -> dict[str, Any]:
    """An OpenAPI link to ``operation_id`` with runtime-expression ``parameters``."""
    result: dict[str, Any] = {"operationId": operation_id, "parameters": parameters}
    if description:
        result["description"] = description
    return result


def body_link(operation_id: str, request_body: Any, **parameters: str) -> dict[str, Any]:
    """A link that also fills the request body (runtime expressions inside it)."""
    result = link(operation_id, **parameters)
    result["requestBody"] = request_body
    if not parameters:
        del result["parameters"]
    return result


def head_error(status: int) -> dict[str, Any]:
    """An error answered to a HEAD: the status and headers, no body."""
    headers = {"X-Request-Id": REQUEST_ID, **EXTRA_HEADERS.get(status, {})}
    return {"description": "No body (HEAD): " + ", ".join(codes_for(status)), "headers": headers}


def operation(
    operation_id: str,
    summary: str,
    *,
    tag: str,
    responses: dict[int, dict[str, Any]],
    errors: tuple[int, ...],
    parameters: list[dict[str, Any]] | None = None,
    request_body: dict[str, Any] | None = None,
    security: list[dict[str, list[str]]] | None = None,
    description: str = "",
    head: bool = False,
) -> dict[str, Any]:
    """One operation. ``errors`` lists every error status it can answer (500 is added, and
    503 to an operation with any error: a request the audit log could not record is refused,
    ``service.http.audit_hook``)."""
    result: dict[str, Any] = {"operationId": operation_id, "summary": summary, "tags": [tag]}
    if description:
        result["description"] = description
    if parameters:
        result["parameters"] = parameters
    if request_body is not None:
        result["requestBody"] = request_body
    result["security"] = AUTHENTICATED if security is None else security
    all_responses: dict[str, Any] = {str(status): body for status, body in responses.items()}
    for status in sorted({*errors, 500, *((503,) if errors else ())}):
        if head:
            all_responses[str(status)] = head_error(status)
        else:
            all_responses[str(status)] = {"$ref": f"#/components/responses/{ERROR_SCHEMA}{status}"}
    result["responses"] = all_responses
    return result
