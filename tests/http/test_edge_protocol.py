"""Protocol refusals and the headers of every answer, over raw sockets.

- A request without ``Host`` (HTTP/1.1 requires one; RFC 9112 section 3.2), or with two, is
  the contract's 400: ``X-Request-Id`` (the client's, if valid), the error body, then
  ``Connection: close``. HTTP/1.0 may leave it out.
- Every answer carries exactly one ``Server`` header naming the service and no library
  version, whichever path answered: handlers, object reads, preflights, the connection's own
  refusals, the console, redirects, errors of every status.

``tests/procs/test_edge_processes.py`` runs the same checks against two serving processes,
where a worker forwards some routes to the writer.
"""

from __future__ import annotations

import re

import httpx
import pytest

from tests.http.edgekit import RawAnswer, basic, raw_request, request_bytes
from tests.serverproc import ServerProcess

SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._-]*$")
"""A product name without a ``/version`` (RFC 9110 section 10.2.4)."""


def assert_one_server_header(answer: RawAnswer) -> None:
    servers = answer.all("Server")
    assert len(servers) == 1, answer.header_lines
    assert SERVER_NAME.match(servers[0]) and "tornado" not in servers[0].lower(), servers
    assert len(answer.all("Date")) <= 1, answer.header_lines
    assert len(answer.all("X-Request-Id")) == 1, answer.header_lines


def assert_refusal(answer: RawAnswer, request_id: str | None = None) -> None:
    assert answer.status == 400, answer
    error = answer.error()
    assert error["code"] == "InvalidArgument" and error["message"]
    assert error["request_id"] == answer.get("X-Request-Id")
    if request_id is not None:
        assert answer.get("X-Request-Id") == request_id
    assert (answer.get("Content-Type") or "").startswith("application/json")
    assert (answer.get("Connection") or "").lower() == "close"
    assert_one_server_header(answer)


@pytest.mark.parametrize(
    "data",
    [
        b"GET /health HTTP/1.1\r\n\r\n",
        b"GET /api/v1/buckets HTTP/1.1\r\nAccept: */*\r\n\r\n",
        b"PUT /api/v1/buckets/b/objects/k HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
        b"POST /api/v1/auth/login HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
        b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: a b\r\n\r\n",
    ],
)
def test_a_request_without_one_good_host_is_the_contracts_400(
    server: ServerProcess, data: bytes
) -> None:
    assert_refusal(raw_request(server.port, data))


def test_the_host_refusal_echoes_the_request_id(server: ServerProcess) -> None:
    answer = raw_request(server.port, b"GET /health HTTP/1.1\r\nX-Request-Id: no-host-1\r\n\r\n")
    assert_refusal(answer, "no-host-1")


def test_http_1_0_may_leave_the_host_out(server: ServerProcess) -> None:
    answer = raw_request(server.port, b"GET /health HTTP/1.0\r\n\r\n")
    assert answer.status == 200
    assert_one_server_header(answer)


def head_of_every_kind(server: ServerProcess, auth: tuple[str, str]) -> list[bytes]:
    """Requests whose answers take every path a response can take."""
    authorization = {"Authorization": basic(auth), "Connection": "close"}
    close = {"Connection": "close"}
    return [
        request_bytes("GET", "/health", close),
        request_bytes("HEAD", "/health", close),
        request_bytes("GET", "/", close),
        request_bytes("GET", "/console/", close),
        request_bytes("GET", "/console/nope.js", close),
        request_bytes("GET", "/api/v1/openapi.json", close),
        request_bytes("GET", "/api/v1/docs", close),
        request_bytes("GET", "/api/v1/no-such-route", close),
        request_bytes("DELETE", "/health", close),
        request_bytes("GET", "/api/v1/buckets", close),
        request_bytes("GET", "/api/v1/buckets", authorization),
        request_bytes("GET", "/api/v1/system/info", authorization),
        request_bytes("GET", "/api/v1/buckets/one-server/objects/k", authorization),
        request_bytes("HEAD", "/api/v1/buckets/one-server/objects/k", authorization),
        request_bytes("GET", "/api/v1/buckets/one-server/objects/missing", authorization),
        request_bytes("PUT", "/api/v1/buckets/one-server/objects/k2", authorization, b"v"),
        request_bytes("DELETE", "/api/v1/buckets/one-server/objects/k2", authorization),
        request_bytes(
            "POST", "/api/v1/auth/login", close, b'{"username": "nobody", "password": "x"}'
        ),
        request_bytes(
            "OPTIONS",
            "/api/v1/buckets",
            {**close, "Origin": "https://a.example", "Access-Control-Request-Method": "PUT"},
        ),
        request_bytes("POST", "/api/v1/buckets", {**close, "Origin": "https://evil.example"}),
        b"GARBAGE\r\n\r\n",
        b"GET /health HTTP/1.1\r\n\r\n",
        request_bytes("POST", "/api/v1/auth/login", {**close, "Content-Length": "2000000"}),
    ]


def test_every_answer_has_exactly_one_server_header(
    server: ServerProcess, api: httpx.Client
) -> None:
    if api.get("/buckets/one-server").status_code == 404:
        assert api.post("/buckets", json={"name": "one-server"}).status_code == 201
    assert api.put("/buckets/one-server/objects/k", content=b"v").status_code == 200
    statuses = set()
    for data in head_of_every_kind(server, server.auth):
        answer = raw_request(server.port, data, head_only=True)
        statuses.add(answer.status)
        assert_one_server_header(answer)
    assert {200, 204, 302, 400, 401, 403, 404, 405, 413} <= statuses, statuses


def test_an_event_stream_has_one_server_header(server: ServerProcess, api: httpx.Client) -> None:
    if api.get("/buckets/one-server").status_code == 404:
        assert api.post("/buckets", json={"name": "one-server"}).status_code == 201
    data = request_bytes(
        "GET", "/api/v1/buckets/one-server/events", {"Authorization": basic(server.auth)}
    )
    answer = raw_request(server.port, data, head_only=True)
    assert answer.status == 200
    assert_one_server_header(answer)
