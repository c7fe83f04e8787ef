"""The console's static files over HTTP: redirects, types, caching, no listing, no traversal;
and the challenge a 401 carries, which decides whether a browser shows its own dialog.

These need no browser; the browser suites are the other modules of this package.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
from pathlib import Path

import httpx
import pytest

from fsseam.fs import RealFileSystem
from service.http.console import STATIC_ROOT as STATIC_DIR
from service.http.console import ConsoleFiles, catalogue
from tests.serverproc import ServerProcess

STATIC_ROOT = Path(STATIC_DIR)
CONSOLE_DIR = STATIC_ROOT.parent


def raw_get(server: ServerProcess, target: str) -> tuple[int, dict[str, str], bytes]:
    """A GET with the target sent exactly as written (httpx would normalise dot segments)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_root_and_bare_console_redirect_to_the_console(server: ServerProcess) -> None:
    for path in ("/", "/console"):
        response = httpx.get(server.url + path)
        assert response.status_code == 302
        assert response.headers["Location"] == "/console/"
    followed = httpx.get(server.url + "/", follow_redirects=True)
    assert followed.status_code == 200 and followed.url.path == "/console/"


def test_the_page_is_html_with_a_policy_and_is_revalidated(server: ServerProcess) -> None:
    response = httpx.get(server.url + "/console/")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-cache"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert response.content == (STATIC_ROOT / "index.html").read_bytes()
    etag = response.headers["ETag"]
    again = httpx.get(server.url + "/console/", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert httpx.get(server.url + "/console/index.html").content == response.content


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("app.js", "text/javascript; charset=utf-8"), ("console.css", "text/css; charset=utf-8")],
)
def test_files_have_fixed_content_types(
    server: ServerProcess, path: str, content_type: str
) -> None:
    response = httpx.get(f"{server.url}/console/{path}")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == content_type
    assert response.content == (STATIC_ROOT / path).read_bytes()
    head = httpx.head(f"{server.url}/console/{path}")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Length"] == str(len(response.content))


def test_vendored_files_are_cached_as_immutable(server: ServerProcess) -> None:
    pins = json.loads((CONSOLE_DIR / "vendored.json").read_text())
    response = httpx.get(f"{server.url}/console/{pins['hls.js']['path']}")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert response.headers["Content-Type"] == "text/javascript; charset=utf-8"


@pytest.mark.parametrize(
    "target",
    [
        "/console/../pyproject.toml",
        "/console/%2e%2e/http/console.py",
        "/console/..%2f..%2fapp.py",
        "/console/vendor/..%2f..%2f..%2fapp.py",
        "/console/./index.html",
        "/console//index.html",
        "/console/vendor/",
        "/console/vendor",
        "/console/%5c..%5capp.py",
        "/console/index.html%00.js",
        "/console/no-such-file.js",
        "/console/vendor/hls-1.7.4/LICENSE",
    ],
)
def test_no_listing_no_traversal_no_unknown_files(server: ServerProcess, target: str) -> None:
    status, _headers, body = raw_get(server, target)
    assert status in (400, 404), (target, status)
    assert b"<html" not in body.lower() and b"import " not in body
    if status == 404:
        assert json.loads(body)["error"]["code"] == "NotFound"


def test_other_methods_are_refused(server: ServerProcess) -> None:
    response = httpx.post(server.url + "/console/index.html", content=b"x")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "MethodNotAllowed"


def test_the_catalogue_holds_only_files_of_known_types(tmp_path: Path) -> None:
    root = tmp_path / "static"
    (root / "vendor" / "lib").mkdir(parents=True)
    (root / "index.html").write_text("<html>")
    (root / "vendor" / "lib" / "lib.js").write_text("js")
    (root / "vendor" / "lib" / "LICENSE").write_text("licence")
    (root / ".hidden.js").write_text("x")
    (root / "dir.js").mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    fs = RealFileSystem()
    assert catalogue(fs, str(root)) == {
        "index.html": str(root / "index.html"),
        "vendor/lib/lib.js": str(root / "vendor" / "lib" / "lib.js"),
    }
    files = ConsoleFiles(fs, str(root))
    assert files.load("") == files.load("index.html")
    index = files.load("index.html")
    assert index is not None and index.body == b"<html>"
    for path in ("../secret.txt", "vendor", "vendor/lib/LICENSE", "dir.js", ".hidden.js"):
        assert files.load(path) is None, path
    # An edited file is read again (its modification time changed).
    (root / "index.html").write_text("<html lang=en>")
    os.utime(root / "index.html", (1, 1))
    reloaded = files.load("index.html")
    assert reloaded is not None and reloaded.body == b"<html lang=en>"
    assert reloaded.etag != index.etag


def test_vendored_hls_matches_its_pin() -> None:
    """The vendored hls.js is the pinned npm release, byte for byte (see vendored.json)."""
    pin = json.loads((CONSOLE_DIR / "vendored.json").read_text())["hls.js"]
    data = (STATIC_ROOT / pin["path"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == pin["sha256"]
    assert f'"{pin["version"]}"' in data.decode("utf-8")
    assert f"hls-{pin['version']}/" in pin["path"]
    assert (STATIC_ROOT / pin["path"]).with_name("LICENSE.txt").read_text().find("Apache") >= 0
    assert pin["path"] in (STATIC_ROOT / "index.html").read_text()


# -- which challenge a 401 carries ----------------------------------------------------------


def challenge(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    return response.headers["WWW-Authenticate"]


def test_a_failed_login_is_challenged_with_bearer_only(server: ServerProcess) -> None:
    response = httpx.post(
        server.api + "/auth/login", json={"username": "admin", "password": "wrong-password"}
    )
    assert challenge(response) == 'Bearer realm="service"'
    assert response.json()["error"]["code"] == "Unauthorized"


@pytest.mark.parametrize("authorization", ["Bearer not-a-token", "Bearer", "bearer abc.def"])
def test_a_bad_bearer_token_is_challenged_with_bearer_only(
    server: ServerProcess, authorization: str
) -> None:
    response = httpx.get(server.api + "/buckets", headers={"Authorization": authorization})
    assert "Basic" not in challenge(response)
    assert challenge(response).startswith("Bearer")


def test_basic_or_no_credentials_keep_the_basic_challenge(server: ServerProcess) -> None:
    assert "Basic" in challenge(httpx.get(server.api + "/buckets"))
    wrong = httpx.get(server.api + "/buckets", auth=("bk_nobody", "sk_wrong"))
    assert "Basic" in challenge(wrong) and "Bearer" in challenge(wrong)
    # The object read path authenticates on its own route: the same rule holds there.
    read = httpx.get(server.api + "/buckets/b/objects/k", headers={"Authorization": "Bearer x.y"})
    assert challenge(read).startswith("Bearer") and "Basic" not in challenge(read)
