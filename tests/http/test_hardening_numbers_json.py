"""Numbers and JSON from hostile clients, over HTTP: never a 5xx, always the contract's 400/413.

Numbers in queries, headers and JSON are bounded ASCII digits (one parser,
``service.common.numbers``); JSON bodies and cursors go through one loader with size and depth
limits (``service.http.json_body``), the unauthenticated login included.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

OTHER_DIGITS = ["\u0663", "\u00b2", "\uff11", "\u0967"]  # Arabic-Indic 3, superscript 2, ...
HUGE = "1" * 5000


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("numbers") / "data")
    server.start()
    with server.client() as api:
        assert api.post("/buckets", json={"name": "numbers"}).status_code == 201
        assert api.put("/buckets/numbers/objects/ten", content=b"0123456789").status_code == 200
    yield server
    server.stop()


@pytest.fixture
def api(proc: ServerProcess) -> Iterator[httpx.Client]:
    with proc.client() as client:
        yield client


@pytest.mark.parametrize("value", [*OTHER_DIGITS, HUGE, "+5", " 5", "5 ", "0x10", "1_0"])
def test_listing_limit_must_be_ascii_digits(api: httpx.Client, value: str) -> None:
    response = api.get("/buckets/numbers/objects", params={"limit": value})
    assert_error(response, 400, "InvalidArgument")


@pytest.mark.parametrize("value", [*OTHER_DIGITS, HUGE])
def test_part_number_must_be_ascii_digits(api: httpx.Client, value: str) -> None:
    upload = api.post("/multipart/init", json={"bucket": "numbers", "key": "mp"}).json()
    response = api.put(
        f"/multipart/{upload['upload_id']}/part", params={"partNumber": value}, content=b"x"
    )
    assert_error(response, 400, "InvalidPartNumber")


@pytest.mark.parametrize("value", [*OTHER_DIGITS, HUGE])
def test_range_numbers_must_be_ascii_digits(api: httpx.Client, value: str) -> None:
    for header in (f"bytes=0-{value}", f"bytes={value}-", f"bytes=-{value}"):
        response = api.get("/buckets/numbers/objects/ten", headers={"Range": header.encode()})
        assert_error(response, 400, "InvalidArgument")


def test_ordinary_ranges_still_work(api: httpx.Client) -> None:
    response = api.get("/buckets/numbers/objects/ten", headers={"Range": "bytes=2-4"})
    assert response.status_code == 206 and response.content == b"234"
    clipped = api.get(
        "/buckets/numbers/objects/ten", headers={"Range": "bytes=8-999999999999999999"}
    )
    assert clipped.status_code == 206 and clipped.content == b"89"


@pytest.mark.parametrize("value", [*OTHER_DIGITS, HUGE])
def test_content_length_must_be_ascii_digits(proc: ServerProcess, value: str) -> None:
    token = base64.b64encode(f"{proc.access_key}:{proc.secret_key}".encode()).decode()
    request = (
        f"PUT /api/v1/buckets/numbers/objects/cl HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Basic {token}\r\nContent-Length: {value}\r\n\r\n"
    ).encode()
    status, headers, body = raw_exchange(proc, request)
    assert status == 400
    assert b'"InvalidArgument"' in body
    assert headers.get("x-request-id")


@pytest.mark.parametrize(
    ("field", "value"),
    [("quota_bytes", HUGE), ("quota_bytes", "-" + "9" * 19), ("quota_bytes", "1e999")],
)
def test_json_numbers_are_bounded(api: httpx.Client, field: str, value: str) -> None:
    body = f'{{"name": "json-numbers", "{field}": {value}}}'
    response = api.post("/buckets", content=body, headers={"Content-Type": "application/json"})
    assert_error(response, 400, "InvalidArgument")
    assert api.get("/buckets/json-numbers").status_code == 404


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_constants_are_not_json(api: httpx.Client, constant: str) -> None:
    response = api.post("/presign", content=f'{{"bucket": "numbers", "expires_in": {constant}}}')
    assert_error(response, 400, "MalformedJSON")


@pytest.mark.parametrize("depth", [33, 1000, 100_000])
def test_deep_json_is_malformed_also_on_login(proc: ServerProcess, depth: int) -> None:
    body = '{"username": ' + "[" * depth + "]" * depth + ', "password": "x"}'
    response = httpx.post(proc.api + "/auth/login", content=body)
    assert_error(response, 400, "MalformedJSON")
    with proc.client() as api:
        assert_error(api.post("/buckets", content=body), 400, "MalformedJSON")


def test_json_nested_32_deep_is_accepted(api: httpx.Client) -> None:
    tags = "[" * 31 + "]" * 31  # 32 levels with the enclosing object
    response = api.post("/buckets", content=f'{{"name": "deep-ok", "tags": {tags}}}')
    assert_error(response, 400, "InvalidArgument")  # parsed, then refused by the field


def test_deep_cursor_is_invalid_argument(api: httpx.Client) -> None:
    cursor = base64.urlsafe_b64encode(b"[" * 5000).decode().rstrip("=")
    response = api.get("/buckets/numbers/objects", params={"cursor": cursor})
    assert_error(response, 400, "InvalidArgument")
    huge = base64.urlsafe_b64encode(HUGE.encode()).decode().rstrip("=")
    response = api.get("/buckets/numbers/versions", params={"cursor": huge})
    assert_error(response, 400, "InvalidArgument")


def test_json_body_over_a_mebibyte_is_413_with_the_envelope(api: httpx.Client) -> None:
    body = b'{"name": "big", "tags": {"a": "' + b"x" * (1024 * 1024) + b'"}}'
    response = api.post("/buckets", content=body)
    assert_error(response, 413, "EntityTooLarge")
    chunked = api.post("/buckets", content=iter([body[:600_000], body[600_000:]]))
    assert_error(chunked, 413, "EntityTooLarge")
    login = httpx.post(str(api.base_url) + "/auth/login", content=body)
    assert_error(login, 413, "EntityTooLarge")
    assert api.get("/buckets/big").status_code == 404


def raw_exchange(proc: ServerProcess, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes; the status, lowercase headers and body of the answer."""
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            head, sep, rest = data.partition(b"\r\n\r\n")
            if sep and b"content-length:" in head.lower():
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(rest) >= length:
                    break
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


@pytest.mark.parametrize("value", ["18446744073709551616", "9223372036854775808", "1e19"])
def test_json_integers_past_64_bits_are_refused(api: httpx.Client, value: str) -> None:
    body = f'{{"name": "past-int64", "quota_bytes": {value}}}'
    assert_error(api.post("/buckets", content=body), 400, "InvalidArgument")
    assert api.get("/buckets/past-int64").status_code == 404


def test_integral_json_numbers_count_as_integers(api: httpx.Client) -> None:
    created = api.post("/buckets", content='{"name": "integral", "quota_bytes": 1.5e3}')
    assert created.status_code == 201, created.text
    assert created.json()["quota_bytes"] == 1500
    presign = api.post("/presign", content='{"bucket": "integral", "key": "k", "expires_in": 60.0}')
    assert presign.status_code == 200 and presign.json()["expires_in"] == 60
    fraction = api.post("/presign", content='{"bucket": "integral", "key": "k", "expires_in": 6.5}')
    assert_error(fraction, 400, "InvalidArgument")


@pytest.mark.parametrize("value", [*OTHER_DIGITS, "12\n", HUGE])
def test_image_query_numbers_must_be_ascii_digits(api: httpx.Client, value: str) -> None:
    response = api.get("/buckets/numbers/images/ten", params={"width": value})
    assert_error(response, 400, "InvalidArgument")
