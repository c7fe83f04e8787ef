"""The HTTP/1.1 connection (``service.http.h1_connection``) over raw sockets: what it refuses
itself, how it frames and orders answers, and that a refusal reaches a client at once.

The contract's refusals in general are in ``test_hardening_protocol.py``; these are the
cases the connection decides that Tornado's own connection did not (a head over its size,
``Host``, the HTTP version) and the ordering rules of pipelined requests and bodies.
"""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.http.test_hardening_numbers_json import raw_exchange
from tests.serverproc import ServerProcess

MAX_HEADER_BYTES = 2048


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path_factory.mktemp("h1") / "data",
        env_overrides={"SERVICE_MAX_HEADER_BYTES": str(MAX_HEADER_BYTES)},
    )
    server.start()
    with server.client() as client:
        assert client.post("/buckets", json={"name": "h1-conn"}).status_code == 201
    yield server
    server.stop()


def auth_line(proc: ServerProcess) -> bytes:
    token = base64.b64encode(f"{proc.access_key}:{proc.secret_key}".encode())
    return b"Authorization: Basic " + token + b"\r\n"


def assert_refused(status: int, headers: dict[str, str], body: bytes, code: str) -> None:
    assert status == 400
    error = json.loads(body)["error"]
    assert error["code"] == code and error["request_id"] == headers["x-request-id"]
    assert headers["connection"] == "close"


def test_a_head_over_the_limit_is_refused_in_the_contracts_shape(proc: ServerProcess) -> None:
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MAX_HEADER_BYTES + b"\r\n\r\n"
    assert_refused(*raw_exchange(proc, request), "InvalidArgument")


def test_http11_without_host_is_refused_and_http10_is_served(proc: ServerProcess) -> None:
    request = b"GET /health HTTP/1.1\r\nX-Request-Id: no-host-1\r\n\r\n"
    status, headers, body = raw_exchange(proc, request)
    assert_refused(status, headers, body, "InvalidArgument")
    assert headers["x-request-id"] == "no-host-1"
    status, _, _ = raw_exchange(proc, b"GET /health HTTP/1.0\r\n\r\n")
    assert status == 200


def test_other_http_versions_are_refused(proc: ServerProcess) -> None:
    assert_refused(
        *raw_exchange(proc, b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n"), "InvalidArgument"
    )


def test_a_refusal_ends_the_stream_at_once(proc: ServerProcess) -> None:
    """The connection shuts its side after a refusal, so a client reading to the end sees
    the end now rather than after the linger time."""
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        sock.sendall(b"GARBAGE\r\n\r\n")
        started = time.monotonic()
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        assert time.monotonic() - started < 1.5
    assert data.startswith(b"HTTP/1.1 400 ")


def test_pipelined_put_and_get_are_answered_in_order(proc: ServerProcess) -> None:
    body = b"pipelined body"
    put = (
        b"PUT /api/v1/buckets/h1-conn/objects/piped HTTP/1.1\r\nHost: x\r\n"
        + auth_line(proc)
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )
    get = b"GET /api/v1/buckets/h1-conn/objects/piped HTTP/1.1\r\nHost: x\r\n" + auth_line(proc)
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        sock.sendall(put + get + b"\r\n")
        data = b""
        deadline = time.monotonic() + 10
        while not data.endswith(body) and time.monotonic() < deadline:
            data += sock.recv(65536)
    first = data.index(b"HTTP/1.1 200")
    second = data.index(b"HTTP/1.1 200", first + 1)
    assert b'"key":"piped"' in data[first:second]
    assert data.endswith(body)


def test_expect_100_continue_gets_the_interim_answer_first(proc: ServerProcess) -> None:
    head = (
        b"PUT /api/v1/buckets/h1-conn/objects/expect HTTP/1.1\r\nHost: x\r\n"
        + auth_line(proc)
        + b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        sock.sendall(head)
        interim = sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 ")
        sock.sendall(b"hello")
        answer = b""
        while b'"size_bytes":5' not in answer:
            answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_head_and_not_modified_answers_carry_no_body(proc: ServerProcess) -> None:
    path = b"/api/v1/buckets/h1-conn/objects/nobody"
    with proc.client() as client:
        stored = client.put("/buckets/h1-conn/objects/nobody", content=b"12345")
        etag = stored.headers["ETag"].encode()
    head = b"HEAD " + path + b" HTTP/1.1\r\nHost: x\r\n" + auth_line(proc)
    conditional = (
        b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nIf-None-Match: " + etag + b"\r\n"
    ) + auth_line(proc)
    health = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        sock.sendall(head + b"\r\n" + conditional + b"\r\n" + health)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    answers = data.split(b"HTTP/1.1 ")[1:]
    assert [answer[:3] for answer in answers] == [b"200", b"304", b"200"]
    assert answers[0].endswith(b"\r\n\r\n") and b"Content-Length: 5\r\n" in answers[0]
    assert answers[1].endswith(b"\r\n\r\n")


def test_whitespace_around_a_header_value_is_not_part_of_it(proc: ServerProcess) -> None:
    # "Authorization: Bearer " is an empty credential (401, as through Tornado's own
    # parser, which strips the value), not a malformed request (400)
    request = b"GET /api/v1/buckets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \t\r\n\r\n"
    status, _, body = raw_exchange(proc, request)
    assert status == 401, body
    assert json.loads(body)["error"]["code"] == "Unauthorized"
    request = b"GET /api/v1/buckets HTTP/1.1\r\nHost: x\r\n" + auth_line(proc)[:-2] + b"  \r\n\r\n"
    status, _, body = raw_exchange(proc, request)
    assert status == 200, body
