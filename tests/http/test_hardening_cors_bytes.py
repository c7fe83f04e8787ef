"""CORS, byte counts and the content-type guess, over HTTP against a real server.

``SERVICE_CORS_ORIGINS`` adds ``Access-Control-Allow-Origin`` and answers preflights on every
``/api/v1`` route, presigned URLs included; share playback allows any origin. JSON requests
and answers count their bytes in the metrics; a PUT without ``Content-Type`` gets the type
of its key's extension.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

APP = "https://app.example"
EXPOSED = {"etag", "x-checksum-sha256", "x-version-id", "x-request-id", "content-range"}


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path_factory.mktemp("cors") / "data",
        env_overrides={"SERVICE_CORS_ORIGINS": f"{APP}, http://localhost:3000"},
    )
    server.start()
    with server.client() as api:
        assert api.post("/buckets", json={"name": "cors"}).status_code == 201
        assert api.put("/buckets/cors/objects/k", content=b"hello").status_code == 200
    yield server
    server.stop()


@pytest.fixture
def api(proc: ServerProcess) -> Iterator[httpx.Client]:
    with proc.client() as client:
        yield client


def exposed(response: httpx.Response) -> set[str]:
    value = response.headers.get("Access-Control-Expose-Headers", "")
    return {item.strip().lower() for item in value.split(",") if item.strip()}


def preflight(proc: ServerProcess, path: str, origin: str, method: str = "PUT") -> httpx.Response:
    return httpx.options(
        proc.url + path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "content-type, x-meta-color, authorization",
        },
    )


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/buckets",
        "/api/v1/buckets/cors/objects/some/key.txt",
        "/api/v1/buckets/cors/objects/k?X-Expires=1&X-Credential=bk_x&X-Signature=00",
        "/api/v1/multipart/abc/part?partNumber=1",
        "/api/v1/auth/login",
        "/api/v1/no/such/route",
    ],
)
def test_preflights_are_answered_on_every_api_route(proc: ServerProcess, path: str) -> None:
    response = preflight(proc, path, APP)
    assert response.status_code == 204, response.text
    assert response.headers["Access-Control-Allow-Origin"] == APP
    assert "PUT" in response.headers["Access-Control-Allow-Methods"]
    allowed = response.headers["Access-Control-Allow-Headers"].lower()
    assert "x-meta-color" in allowed and "authorization" in allowed
    assert "Origin" in response.headers["Vary"]
    assert response.headers["X-Request-Id"]


def test_a_preflight_from_another_origin_is_refused(proc: ServerProcess) -> None:
    response = preflight(proc, "/api/v1/buckets", "https://evil.example")
    assert_error(response, 403, "AccessDenied")
    assert "Access-Control-Allow-Origin" not in response.headers


def test_answers_carry_the_allowed_origin_and_exposed_headers(api: httpx.Client) -> None:
    got = api.get("/buckets/cors/objects/k", headers={"Origin": APP})
    assert got.headers["Access-Control-Allow-Origin"] == APP
    assert exposed(got) >= EXPOSED
    listed = api.get("/buckets", headers={"Origin": "http://localhost:3000"})
    assert listed.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
    missing = api.get("/buckets/cors/objects/nope", headers={"Origin": APP})
    assert_error(missing, 404, "NoSuchKey")
    assert missing.headers["Access-Control-Allow-Origin"] == APP
    other = api.get("/buckets", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers


def test_a_browser_can_put_through_a_presigned_url(api: httpx.Client) -> None:
    url = api.post(
        "/presign", json={"bucket": "cors", "key": "from-browser", "method": "PUT"}
    ).json()["url"]
    assert preflight_url(url).status_code == 204
    put = httpx.put(url, content=b"browser bytes", headers={"Origin": APP})
    assert put.status_code == 200, put.text
    assert put.headers["Access-Control-Allow-Origin"] == APP
    assert "etag" in exposed(put)


def preflight_url(url: str) -> httpx.Response:
    return httpx.options(url, headers={"Origin": APP, "Access-Control-Request-Method": "PUT"})


def test_share_playback_allows_any_origin(proc: ServerProcess) -> None:
    path = "/api/v1/videos/play/no-such-token/master.m3u8"
    response = preflight(proc, path, "https://player.example", method="GET")
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    got = httpx.get(proc.url + path, headers={"Origin": "https://player.example"})
    assert got.status_code == 403
    assert got.headers["Access-Control-Allow-Origin"] == "*"


def test_without_the_setting_there_is_no_cors(server: ServerProcess) -> None:
    response = preflight(server, "/api/v1/buckets", APP)
    assert_error(response, 403, "AccessDenied")
    got = httpx.get(server.api + "/buckets", auth=server.auth, headers={"Origin": APP})
    assert "Access-Control-Allow-Origin" not in got.headers


def metric(text: str, name: str, route: str, method: str, *, seen: bool = True) -> float:
    """The counter's value; ``seen=False``: 0 while no such request was counted yet."""
    pattern = rf'^{name}_total{{[^}}]*method="{method}",route="{re.escape(route)}"[^}}]*}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    if found is None:
        pattern = rf'^{name}_total{{route="{re.escape(route)}",method="{method}"}} (\S+)$'
        found = re.search(pattern, text, re.MULTILINE)
    if found is None and not seen:
        return 0.0
    assert found is not None, f"{name} {route} {method} not in metrics"
    return float(found.group(1))


def test_json_requests_and_answers_count_their_bytes(
    api: httpx.Client, proc: ServerProcess
) -> None:
    body = b'{"name": "counted-bytes", "tags": {"team": "bytes"}}'
    created = api.post("/buckets", content=body)
    assert created.status_code == 201
    text = api.get("/metrics").text
    assert metric(text, "service_http_request_bytes", "/api/v1/buckets", "POST") >= len(body)
    sent = metric(text, "service_http_response_bytes", "/api/v1/buckets", "POST")
    assert sent >= len(created.content)
    request_id = created.headers["X-Request-Id"]
    deadline = time.monotonic() + 5
    while f"request_id={request_id}" not in proc.logs() and time.monotonic() < deadline:
        time.sleep(0.05)
    line = next(line for line in proc.logs().splitlines() if f"request_id={request_id}" in line)
    assert f"bytes_in={len(body)} " in line and f"bytes_out={len(created.content)} " in line


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("photos/cat.jpg", "image/jpeg"),
        ("docs/Report.PDF", "application/pdf"),
        ("backup.tar.gz", "application/gzip"),
        ("page.html", "text/html"),
        ("README", "application/octet-stream"),
        ("weird.unknownext", "application/octet-stream"),
    ],
)
def test_a_put_without_content_type_guesses_from_the_key(
    api: httpx.Client, key: str, expected: str
) -> None:
    put = api.put(f"/buckets/cors/objects/{key}", content=b"x")
    assert put.status_code == 200
    assert put.json()["content_type"] == expected
    assert api.head(f"/buckets/cors/objects/{key}").headers["Content-Type"] == expected
    declared = api.put(
        f"/buckets/cors/objects/{key}", content=b"x", headers={"Content-Type": "text/plain"}
    )
    assert declared.json()["content_type"] == "text/plain"


def test_error_answers_of_object_reads_count_their_bytes(api: httpx.Client) -> None:
    route = "/api/v1/buckets/{bucket}/objects/{key}"
    before = metric(
        api.get("/metrics").text, "service_http_response_bytes", route, "GET", seen=False
    )
    missing = api.get("/buckets/cors/objects/no-such-object")
    assert_error(missing, 404, "NoSuchKey")
    after = metric(api.get("/metrics").text, "service_http_response_bytes", route, "GET")
    assert after - before == len(missing.content)


def test_multipart_init_without_content_type_guesses_too(api: httpx.Client) -> None:
    for content_type in (None, ""):
        body = {"bucket": "cors", "key": "clips/movie.mp4"}
        if content_type is not None:
            body["content_type"] = content_type
        session = api.post("/multipart/init", json=body)
        assert session.status_code == 201, session.text
        assert session.json()["content_type"] == "video/mp4"
