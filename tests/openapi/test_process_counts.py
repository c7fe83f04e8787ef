"""The OpenAPI document is exact whatever the number of serving processes: the same requests
against one process and against three answer bodies that match the documented schema, field
for field the same but for what the document says only several processes add."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from service.openapi import openapi_document
from tests.serverproc import ServerProcess

BUCKET = "counted"
GETS = [
    "/health",
    "/api/v1/system/info",
    "/api/v1/system/performance",
    "/api/v1/system/scrub",
    "/api/v1/buckets",
    "/api/v1/buckets/{bucket}",
    "/api/v1/buckets/{bucket}/objects",
    "/api/v1/buckets/{bucket}/versions",
    "/api/v1/buckets/{bucket}/lifecycle",
    "/api/v1/buckets/{bucket}/notifications",
    "/api/v1/multipart",
    "/api/v1/users",
    "/api/v1/access-keys",
    "/api/v1/videos/jobs",
]
ONLY_WITH_SEVERAL = {
    "/api/v1/system/performance": {
        "processes",
        "processes[].pid",
        "processes[].role",
        "processes[].requests",
    }
}
"""Fields the document describes as present only with several serving processes."""


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    started = {}
    try:
        for count in ("1", "3"):
            server = ServerProcess(
                tmp_path_factory.mktemp(f"processes{count}") / "data",
                env_overrides={"SERVICE_WORKERS": count},
            )
            server.start()
            started[count] = server
            populate(server)
        yield started
    finally:
        for server in started.values():
            server.stop()


def populate(server: ServerProcess) -> None:
    """The same state on each server, so that every list has items to compare."""
    with server.client() as api:
        assert api.post("/buckets", json={"name": BUCKET, "versioning_enabled": True}).is_success
        for body in (b"one", b"two"):
            assert api.put(f"/buckets/{BUCKET}/objects/a/k.txt", content=body).is_success
        assert api.get(f"/buckets/{BUCKET}/objects/a/k.txt").is_success
        assert api.post("/multipart/init", json={"bucket": BUCKET, "key": "big"}).is_success
        rules = {"rules": [{"id": "r", "expire_after_days": 30}]}
        assert api.put(f"/buckets/{BUCKET}/lifecycle", json=rules).is_success
        hook = {"id": "h", "url": "http://127.0.0.1:9/hook", "secret": "s"}
        assert api.put(f"/buckets/{BUCKET}/notifications", json={"webhooks": [hook]}).is_success
        assert api.post("/system/scrub").status_code == 202
    # The process table of several processes is refreshed every second.
    time.sleep(1.5)


def documented_schema(route: str) -> dict[str, Any]:
    """The schema of ``route``'s GET 200 JSON answer, with the components it refers to."""
    document = openapi_document()
    answer = document["paths"][route]["get"]["responses"]["200"]
    schema = answer["content"]["application/json"]["schema"]
    return {**schema, "components": document["components"]}


def fields(value: object, prefix: str = "") -> set[str]:
    """Every field path in ``value`` (``a.b``, ``list[].c``), lists' items taken together."""
    found: set[str] = set()
    if isinstance(value, dict):
        for name, inner in value.items():
            path = f"{prefix}.{name}" if prefix else name
            found.add(path)
            found |= fields(inner, path)
    elif isinstance(value, list):
        for item in value:
            found |= fields(item, f"{prefix}[]")
    return found


@pytest.mark.parametrize("route", GETS)
def test_answers_match_the_document_with_one_process_and_with_three(
    servers: dict[str, ServerProcess], route: str
) -> None:
    validator = Draft202012Validator(documented_schema(route))
    answers = {}
    for count, server in servers.items():
        path = route.replace("{bucket}", BUCKET)
        response = httpx.get(
            server.url + path,
            params={"bucket": BUCKET} if route == "/api/v1/multipart" else None,
            auth=server.auth,
            timeout=30,
        )
        assert response.status_code == 200, response.text
        errors = [
            f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
            for error in validator.iter_errors(response.json())
        ]
        assert errors == [], f"{count} processes, {route}: {errors}"
        answers[count] = fields(response.json())
    only_several = ONLY_WITH_SEVERAL.get(route, set())
    assert answers["3"] - only_several == answers["1"]
    assert answers["3"] >= only_several


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("TRACE", "/health"),
        ("QUERY", "/api/v1/system/info"),
        ("TRACE", "/api/v1/system/performance"),
        ("QUERY", "/api/v1/auth/login"),
        ("TRACE", "/api/v1/multipart/init"),
        ("PUT", "/api/v1/system/scrub"),
    ],
)
def test_a_method_a_route_lacks_is_the_same_405_from_every_process(
    servers: dict[str, ServerProcess], method: str, path: str
) -> None:
    """Routes a worker passes to the writer (``service.procs.forward``) included: the
    contract's 405 with ``Allow``, whichever process takes the connection."""
    one = servers["1"]
    expected = httpx.request(method, one.url + path, auth=one.auth)
    assert expected.status_code == 405 and expected.headers["allow"], expected.text
    several = servers["3"]
    # Twelve new connections, spread by the kernel over the three listeners: that none of
    # them reaches a worker has a chance of (1/3)^12, two in a million.
    for _ in range(12):
        answer = httpx.request(method, several.url + path, auth=several.auth)
        assert answer.status_code == 405, answer.text
        assert answer.headers.get("allow") == expected.headers["allow"], answer.text
        assert answer.json()["error"]["code"] == "MethodNotAllowed"
