"""The OpenAPI document: valid OpenAPI 3.1, the same routes and methods as the server, the
contract's error codes, and served (with its HTML page) without credentials."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from openapi_spec_validator import validate

from service.app import handler_table
from service.common.api_errors import STATUS_BY_CODE
from service.openapi import openapi_document
from tests.serverproc import ServerProcess

METHODS = {"get", "head", "post", "put", "patch", "delete", "options", "trace"}


def served_routes() -> dict[str, set[str]]:
    """Every route the server answers and its methods, from ``handler_table``."""
    return {
        handler.route_name: {method.lower() for method in handler.allowed_methods()}
        for _, handler in handler_table()
    }


def documented_routes() -> dict[str, set[str]]:
    return {
        path: {name for name in item if name in METHODS}
        for path, item in openapi_document()["paths"].items()
    }


def test_document_is_valid_openapi_3_1() -> None:
    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    validate(document)


def test_document_names_exactly_the_routes_the_server_answers() -> None:
    served, documented = served_routes(), documented_routes()
    assert set(served) - set(documented) == set(), "routes the document lacks"
    assert set(documented) - set(served) == set(), "documented routes the server lacks"


@pytest.mark.parametrize("route", sorted(served_routes()))
def test_document_names_exactly_the_methods_of_each_route(route: str) -> None:
    assert documented_routes()[route] == served_routes()[route]


def test_public_routes_and_only_they_need_no_credentials() -> None:
    """Public handlers (health, login, share playback, the document) are documented with
    ``security: [{}]``; every other operation names at least one credential."""
    paths = openapi_document()["paths"]
    for _, handler in handler_table():
        for method, operation in paths[handler.route_name].items():
            public = operation["security"] == [{}]
            assert public == handler.public, f"{method} {handler.route_name}"


def test_route_templates_match_the_handlers_patterns() -> None:
    """A template's parameters are the named groups of the route's pattern."""
    for pattern, handler in handler_table():
        groups = set(re.compile(pattern).groupindex)
        assert set(re.findall(r"{(\w+)}", handler.route_name)) == groups, handler.route_name


def test_every_operation_documents_its_path_parameters_and_500() -> None:
    document = openapi_document()
    for path, item in document["paths"].items():
        wanted = set(re.findall(r"{(\w+)}", path))
        for method, operation in item.items():
            names = set()
            for parameter in operation.get("parameters", []):
                if "$ref" in parameter:
                    parameter = document["components"]["parameters"][
                        parameter["$ref"].rsplit("/", 1)[-1]
                    ]
                if parameter["in"] == "path":
                    names.add(parameter["name"])
            assert names == wanted, f"{method} {path}"
            assert "500" in operation["responses"], f"{method} {path}"
            assert len({op["operationId"] for op in item.values()}) == len(item)


def test_error_codes_per_status_are_the_contract_table() -> None:
    schemas = openapi_document()["components"]["schemas"]
    by_status: dict[int, set[str]] = {}
    for code, status in STATUS_BY_CODE.items():
        by_status.setdefault(status, set()).add(code)
    for status, codes in by_status.items():
        enum = schemas[f"Error{status}"]["properties"]["error"]["properties"]["code"]["enum"]
        assert set(enum) == codes


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("openapi") / "data")
    server.start()
    yield server
    server.stop()


def test_document_is_served_without_credentials(live: ServerProcess) -> None:
    response = httpx.get(f"{live.api}/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-request-id"]
    assert response.json() == json.loads(json.dumps(openapi_document()))


def test_docs_page_is_self_contained(live: ServerProcess) -> None:
    response = httpx.get(f"{live.api}/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    page = response.text
    assert "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    for path in openapi_document()["paths"]:
        assert f"<code>{path}</code>" in page


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("TRACE", "/buckets", "GET, POST"),
        ("PUT", "/users", "GET, POST"),
        ("POST", "/openapi.json", "GET"),
        ("PATCH", "/buckets/b/objects/k", "GET, HEAD, PUT, DELETE"),
        ("GET", "/multipart/u/part", "PUT"),
    ],
)
def test_a_405_lists_the_methods_the_route_answers(
    live: ServerProcess, method: str, path: str, allowed: str
) -> None:
    response = httpx.request(method, f"{live.api}{path}", auth=live.auth)
    assert response.status_code == 405
    assert response.headers["allow"] == allowed
    assert response.json()["error"]["code"] == "MethodNotAllowed"
    assert response.json()["error"]["request_id"] == response.headers["x-request-id"]
