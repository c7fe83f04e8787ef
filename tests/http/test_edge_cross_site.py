"""Cross-site writes are refused (API.md, Conventions; docs/security.md "Cross-site writes").

A POST, PUT, PATCH or DELETE whose ``Origin`` is neither the server's own (the origin of the
request's ``Host``, or of ``SERVICE_PUBLIC_URL``) nor allowed by ``SERVICE_CORS_ORIGINS``, or
that says ``Sec-Fetch-Site: cross-site`` without such an origin, is 403 AccessDenied before
anything else happens, whatever the credentials: a page on another site cannot drive a
browser's stored credentials. Clients that send neither header (curl, the Python client)
are unaffected; presigned requests are exempt (their URL is the credential). Reads are not
refused: what a read answers is the CORS policy's business.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

EVIL = "https://evil.example"


def tar_of(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        member = tarfile.TarInfo(name)
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    return out.getvalue()


@pytest.fixture(scope="module")
def target(server: ServerProcess) -> Iterator[dict[str, str]]:
    """A bucket with an object, an open multipart session and a user, for the writes."""
    with server.client() as api:
        assert api.post("/buckets", json={"name": "cross-site"}).status_code == 201
        assert api.put("/buckets/cross-site/objects/kept", content=b"kept").status_code == 200
        upload = api.post("/multipart/init", json={"bucket": "cross-site", "key": "mp"}).json()
        user = api.post(
            "/users", json={"username": "cross-site-user", "password": "pw-cross-site-1"}
        ).json()
        key = api.post("/access-keys", json={"user_id": user["user_id"]}).json()
        yield {
            "upload_id": upload["upload_id"],
            "user_id": user["user_id"],
            "key_id": key["access_key_id"],
        }


WRITES: list[tuple[str, str, dict[str, object]]] = [
    ("POST", "/buckets", {"json": {"name": "made-cross-site"}}),
    (
        "POST",
        "/buckets",
        {"content": b'{"name": "made-simple"}', "headers": {"Content-Type": "text/plain"}},
    ),
    (
        "POST",
        "/buckets",
        {
            "content": b'{"name": "made-form"}',
            "headers": {"Content-Type": "application/x-www-form-urlencoded"},
        },
    ),
    ("PATCH", "/buckets/cross-site", {"json": {"versioning_enabled": True}}),
    ("DELETE", "/buckets/cross-site?force=true", {}),
    ("PUT", "/buckets/cross-site/objects/planted", {"content": b"planted"}),
    ("PUT", "/buckets/cross-site/objects/planted-big", {"content": b"p" * 300_000}),
    ("DELETE", "/buckets/cross-site/objects/kept", {}),
    ("POST", "/buckets/cross-site/batch", {"content": tar_of("from-tar", b"t")}),
    ("POST", "/presign", {"json": {"bucket": "cross-site", "key": "kept"}}),
    ("POST", "/auth/login", {"json": {"username": "admin", "password": "x"}}),
    ("POST", "/users", {"json": {"username": "made-cross", "password": "pw-made-cross-1"}}),
    ("PATCH", "/users/{user_id}", {"json": {"role": "admin"}}),
    ("DELETE", "/users/{user_id}", {}),
    ("POST", "/access-keys", {"json": {}}),
    ("PATCH", "/access-keys/{key_id}", {"json": {"status": "revoked"}}),
    ("DELETE", "/access-keys/{key_id}", {}),
    ("POST", "/multipart/init", {"json": {"bucket": "cross-site", "key": "mp2"}}),
    ("PUT", "/multipart/{upload_id}/part?partNumber=1", {"content": b"part"}),
    ("POST", "/multipart/{upload_id}/complete", {"json": {"parts": []}}),
    ("DELETE", "/multipart/{upload_id}", {}),
    ("PUT", "/buckets/cross-site/lifecycle", {"json": {"rules": []}}),
    ("DELETE", "/buckets/cross-site/lifecycle", {}),
    ("PUT", "/buckets/cross-site/notifications", {"json": {"webhooks": []}}),
    ("POST", "/images/optimize", {"json": {"bucket": "cross-site", "key": "kept"}}),
    ("POST", "/videos/thumbnails", {"json": {"bucket": "cross-site", "key": "kept"}}),
    ("POST", "/videos/jobs", {"json": {"bucket": "cross-site", "key": "kept"}}),
    ("POST", "/system/scrub", {}),
    ("POST", "/system/lifecycle/run", {}),
]


def send(
    api: httpx.Client, method: str, path: str, target: dict[str, str], options: dict[str, object]
) -> httpx.Response:
    return api.request(method, path.format(**target), **options)  # type: ignore[arg-type]


def assert_nothing_changed(api: httpx.Client, target: dict[str, str]) -> None:
    bucket = api.get("/buckets/cross-site")
    assert bucket.status_code == 200 and bucket.json()["versioning_enabled"] is False
    assert api.get("/buckets/cross-site/objects/kept").content == b"kept"
    for made in ("made-cross-site", "made-simple", "made-form"):
        assert api.get(f"/buckets/{made}").status_code == 404
    for key in ("planted", "planted-big", "from-tar"):
        assert api.get(f"/buckets/cross-site/objects/{key}").status_code == 404
    user = api.get(f"/users/{target['user_id']}")
    assert user.status_code == 200 and user.json()["role"] == "user"
    keys = api.get("/access-keys", params={"user_id": target["user_id"]}).json()["access_keys"]
    assert [key["status"] for key in keys if key["access_key_id"] == target["key_id"]] == ["active"]
    session = api.get(f"/multipart/{target['upload_id']}")
    assert session.status_code == 200 and session.json()["parts"] == []


@pytest.mark.parametrize(("method", "path", "options"), WRITES)
def test_a_write_from_another_site_is_refused(
    server: ServerProcess,
    target: dict[str, str],
    method: str,
    path: str,
    options: dict[str, object],
) -> None:
    with server.client(headers={"Origin": EVIL}) as evil:
        assert_error(send(evil, method, path, target, options), 403, "AccessDenied")
    with server.client() as api:
        assert_nothing_changed(api, target)


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "null"},
        {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://127.0.0.1.evil.example"},
        {"Origin": "http://127.0.0.1"},
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "same-origin"},
    ],
)
def test_other_signs_of_another_site_are_refused(
    server: ServerProcess, target: dict[str, str], headers: dict[str, str]
) -> None:
    with server.client(headers=headers) as evil:
        assert_error(evil.post("/buckets", json={"name": "made-cross-site"}), 403, "AccessDenied")
        assert_error(
            evil.put("/buckets/cross-site/objects/planted", content=b"x"), 403, "AccessDenied"
        )
    with server.client() as api:
        assert_nothing_changed(api, target)


def test_refusals_come_before_credentials_are_looked_at(server: ServerProcess) -> None:
    anonymous = httpx.post(
        server.api + "/buckets", json={"name": "anon-cross"}, headers={"Origin": EVIL}
    )
    assert_error(anonymous, 403, "AccessDenied")


def test_same_origin_and_header_less_writes_work(server: ServerProcess, api: httpx.Client) -> None:
    own = f"http://127.0.0.1:{server.port}"
    for headers in (
        {},
        {"Origin": own},
        {"Origin": own.upper()},
        {"Origin": own, "Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},
    ):
        key = f"own-{len(headers)}-{abs(hash(str(headers)))}"
        put = api.put(f"/buckets/cross-site-own/objects/{key}", content=b"x", headers=headers)
        if put.status_code == 404:
            assert api.post("/buckets", json={"name": "cross-site-own"}).status_code == 201
            put = api.put(f"/buckets/cross-site-own/objects/{key}", content=b"x", headers=headers)
        assert put.status_code == 200, (headers, put.text)
        assert (
            api.delete(f"/buckets/cross-site-own/objects/{key}", headers=headers).status_code == 204
        )


def test_curl_style_json_bodies_keep_working(api: httpx.Client) -> None:
    """``curl -d`` sends ``application/x-www-form-urlencoded`` and no ``Origin``."""
    made = api.post(
        "/buckets",
        content=b'{"name": "curl-style"}',
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert made.status_code == 201, made.text


def test_the_origin_of_the_host_the_client_used_is_the_servers_own(
    server: ServerProcess, api: httpx.Client
) -> None:
    assert api.post("/buckets", json={"name": "by-host"}).status_code == 201
    for host, origin in (
        (f"localhost:{server.port}", f"http://localhost:{server.port}"),
        ("store.example.com", "https://store.example.com"),
        ("store.example.com", "http://store.example.com"),
        ("store.example.com:8443", "https://store.example.com:8443"),
        ("[::1]:9000", "http://[::1]:9000"),
    ):
        put = api.put(
            "/buckets/by-host/objects/k", content=b"x", headers={"Host": host, "Origin": origin}
        )
        assert put.status_code == 200, (host, origin, put.text)
    for host, origin in (
        ("store.example.com", "https://store.example.com:8443"),
        ("store.example.com:8443", "https://store.example.com"),
        ("store.example.com", "https://other.example.com"),
    ):
        refused = api.put(
            "/buckets/by-host/objects/k", content=b"x", headers={"Host": host, "Origin": origin}
        )
        assert_error(refused, 403, "AccessDenied")


def test_presigned_writes_are_exempt(server: ServerProcess, api: httpx.Client) -> None:
    assert api.post("/buckets", json={"name": "cross-presigned"}).status_code == 201
    url = api.post(
        "/presign", json={"bucket": "cross-presigned", "key": "drop", "method": "PUT"}
    ).json()["url"]
    put = httpx.put(url, content=b"from a page", headers={"Origin": EVIL})
    assert put.status_code == 200, put.text
    assert api.get("/buckets/cross-presigned/objects/drop").content == b"from a page"
    # A signature-looking query on a route that takes no presigned URL is no exemption.
    query = url.split("?", 1)[1]
    forged = httpx.post(
        f"{server.api}/buckets?{query}",
        json={"name": "forged-exempt"},
        auth=server.auth,
        headers={"Origin": EVIL},
    )
    assert_error(forged, 403, "AccessDenied")
    assert api.get("/buckets/forged-exempt").status_code == 404


def test_reads_from_another_site_are_not_refused(api: httpx.Client, target: dict[str, str]) -> None:
    assert api.get("/buckets/cross-site/objects/kept", headers={"Origin": EVIL}).status_code == 200
    assert api.get("/buckets", headers={"Origin": EVIL}).status_code == 200
    assert api.get("/buckets", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200


@pytest.fixture
def cors_server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(
        SERVICE_CORS_ORIGINS="https://app.example",
        SERVICE_PUBLIC_URL="https://store.example.com",
    )


def test_allowed_origins_and_the_public_url_may_write(cors_server: ServerProcess) -> None:
    with cors_server.client() as api:
        assert api.post("/buckets", json={"name": "cors-writes"}).status_code == 201
        for origin in ("https://app.example", "https://store.example.com", "HTTPS://APP.EXAMPLE"):
            for fetch_site in ("cross-site", "same-site", None):
                headers = {"Origin": origin}
                if fetch_site:
                    headers["Sec-Fetch-Site"] = fetch_site
                put = api.put("/buckets/cors-writes/objects/k", content=b"x", headers=headers)
                assert put.status_code == 200, (headers, put.text)
        # The Host's own origin still counts beside the public URL.
        own = api.put(
            "/buckets/cors-writes/objects/k",
            content=b"x",
            headers={"Origin": f"http://127.0.0.1:{cors_server.port}"},
        )
        assert own.status_code == 200, own.text
        refused = api.put("/buckets/cors-writes/objects/k", content=b"x", headers={"Origin": EVIL})
        assert_error(refused, 403, "AccessDenied")
        assert refused.headers.get("Access-Control-Allow-Origin") is None
        allowed_refusal = api.post(
            "/buckets", json={"name": "x"}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert_error(allowed_refusal, 403, "AccessDenied")


def test_a_refused_write_keeps_the_connection_usable(server: ServerProcess) -> None:
    with server.client() as api:
        refused = api.put(
            "/buckets/cross-site/objects/planted",
            content=b"z" * 100_000,
            headers={"Origin": EVIL},
        )
        assert_error(refused, 403, "AccessDenied")
        assert api.get("/buckets").status_code == 200
