"""User content never runs in the service's origin (API.md, Conventions).

Every object body (GET and HEAD, ranged, conditional, presigned, image variants) carries
``X-Content-Type-Options: nosniff`` and ``Content-Security-Policy: sandbox``; a type a browser
would run (HTML, XHTML, SVG, any XML, JavaScript: docs/security.md "Served content") is also a
download, ``Content-Disposition: attachment`` with the key's last segment as its file name
(RFC 6266, with an RFC 5987 ``filename*`` for the rest of Unicode). Error bodies and the API's
own pages are not sniffed either; the console's page allows only its own scripts.
Share playback and stored thumbnails: ``tests/http/videos/test_served_headers.py``.
"""

from __future__ import annotations

import io
import re
from urllib.parse import quote, unquote

import httpx
import pytest
from PIL import Image

from tests.http.edgekit import raw_request, request_bytes
from tests.serverproc import ServerProcess

ACTIVE_TYPES = [
    "text/html",
    "text/html; charset=utf-8",
    "TEXT/HTML",
    "Text/Html ; charset=UTF-8",
    'text/html; charset="utf-8"',
    "application/xhtml+xml",
    "image/svg+xml",
    "image/SVG+XML; charset=utf-8",
    "text/xml",
    "application/xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/mathml+xml",
    "application/xslt+xml",
    "text/xsl",
    "text/javascript",
    "application/javascript",
    "application/ecmascript",
    "application/x-javascript",
    "text/x-javascript",
    "text/ecmascript",
    "text/jscript",
    "application/x-ecmascript",
    "text/javascript1.5",
    "multipart/x-mixed-replace; boundary=b",
]
PASSIVE_TYPES = [
    "text/plain",
    "text/plain; charset=utf-8",
    "text/css",
    "text/csv",
    "application/json",
    "application/octet-stream",
    "image/png",
    "image/jpeg",
    "video/mp4",
    "application/pdf",
    "application/vnd.apple.mpegurl",
    "application/zip",
    "text/xmlish",
]


def assert_sandboxed(headers: httpx.Headers) -> None:
    assert headers.get_list("X-Content-Type-Options") == ["nosniff"]
    assert headers.get_list("Content-Security-Policy") == ["sandbox"]


def disposition_filename(value: str) -> str:
    """The file name a browser takes from ``Content-Disposition`` (``filename*`` first)."""
    star = re.search(r"filename\*=UTF-8''([^;\s]+)", value)
    if star:
        return unquote(star.group(1))
    plain = re.search(r'filename="([^"]*)"', value)
    assert plain, value
    return plain.group(1)


@pytest.fixture(scope="module")
def served(server: ServerProcess) -> str:
    """A bucket for this module's objects."""
    with server.client() as api:
        assert api.post("/buckets", json={"name": "served-content"}).status_code == 201
    return "served-content"


def put(api: httpx.Client, bucket: str, key: str, body: bytes, content_type: str | None) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    stored = api.put(f"/buckets/{bucket}/objects/{quote(key)}", content=body, headers=headers)
    assert stored.status_code == 200, stored.text


@pytest.mark.parametrize("content_type", ACTIVE_TYPES)
def test_active_types_are_sandboxed_downloads(
    api: httpx.Client, served: str, content_type: str
) -> None:
    key = f"active/{abs(hash(content_type))}/page.html"
    put(api, served, key, b"<script>alert(1)</script>", content_type)
    for method in ("GET", "HEAD"):
        got = api.request(method, f"/buckets/{served}/objects/{quote(key)}")
        assert got.status_code == 200
        assert_sandboxed(got.headers)
        disposition = got.headers.get_list("Content-Disposition")
        assert len(disposition) == 1 and disposition[0].startswith("attachment"), disposition
        assert disposition_filename(disposition[0]) == "page.html"


@pytest.mark.parametrize("content_type", PASSIVE_TYPES)
def test_passive_types_are_sandboxed_and_shown_inline(
    api: httpx.Client, served: str, content_type: str
) -> None:
    key = f"passive/{abs(hash(content_type))}"
    put(api, served, key, b"just bytes", content_type)
    got = api.get(f"/buckets/{served}/objects/{key}")
    assert got.status_code == 200 and got.content == b"just bytes"
    assert_sandboxed(got.headers)
    assert "Content-Disposition" not in got.headers


def test_a_guessed_html_type_is_a_download_too(api: httpx.Client, served: str) -> None:
    put(api, served, "guessed/index.htm", b"<h1>hi</h1>", None)
    got = api.get(f"/buckets/{served}/objects/guessed/index.htm")
    assert got.headers["Content-Type"].startswith("text/html")
    assert got.headers["Content-Disposition"].startswith("attachment")
    put(api, served, "guessed/drawing.svg", b"<svg/>", None)
    svg = api.get(f"/buckets/{served}/objects/guessed/drawing.svg")
    assert svg.headers["Content-Type"] == "image/svg+xml"
    assert svg.headers["Content-Disposition"].startswith("attachment")


@pytest.mark.parametrize(
    "key",
    [
        'dir/na"me\\x.html',
        "dir/caf\u00e9 \u2603 r\u00e9sum\u00e9.html",
        "dir/semi;colon,comma=eq.html",
        "no-slash.svg",
        "dir/with space.xml",
    ],
)
def test_the_download_name_is_the_keys_last_segment_encoded(
    api: httpx.Client, served: str, key: str
) -> None:
    put(api, served, "names/" + key, b"<x/>", "application/xml")
    got = api.get(f"/buckets/{served}/objects/{quote('names/' + key)}")
    value = got.headers["Content-Disposition"]
    assert value.isascii()
    assert disposition_filename(value) == key.rsplit("/", 1)[-1]
    fallback = re.search(r'filename="([^"]*)"', value)
    assert fallback is not None, value
    assert all(32 <= ord(char) < 127 and char not in '"\\' for char in fallback.group(1))


def test_a_key_ending_in_a_slash_still_gets_a_name(api: httpx.Client, served: str) -> None:
    put(api, served, "folder/", b"<b/>", "text/html")
    got = api.get(f"/buckets/{served}/objects/folder/")
    assert got.headers["Content-Disposition"].startswith("attachment")
    assert disposition_filename(got.headers["Content-Disposition"])


def test_ranges_conditions_and_versions_carry_the_headers(api: httpx.Client, served: str) -> None:
    put(api, served, "reads/page.html", b"<p>0123456789</p>", "text/html")
    path = f"/buckets/{served}/objects/reads/page.html"
    whole = api.get(path)
    ranged = api.get(path, headers={"Range": "bytes=2-5"})
    assert ranged.status_code == 206
    unchanged = api.get(path, headers={"If-None-Match": whole.headers["ETag"]})
    assert unchanged.status_code == 304
    by_version = api.get(path, params={"version_id": whole.headers["X-Version-Id"]})
    for answer in (whole, ranged, unchanged, by_version):
        assert_sandboxed(answer.headers)
        assert answer.headers["Content-Disposition"].startswith("attachment")


def test_presigned_reads_carry_the_headers(api: httpx.Client, served: str) -> None:
    put(api, served, "shared/evil.html", b"<script>1</script>", "text/html")
    for method in ("GET", "HEAD"):
        url = api.post(
            "/presign",
            json={"bucket": served, "key": "shared/evil.html", "method": method},
        ).json()["url"]
        got = httpx.request(method, url)
        assert got.status_code == 200
        assert_sandboxed(got.headers)
        assert got.headers["Content-Disposition"].startswith("attachment")


def test_image_variants_are_sandboxed(api: httpx.Client, served: str) -> None:
    png = io.BytesIO()
    Image.new("RGB", (40, 30), "red").save(png, format="PNG")
    put(api, served, "pics/red.png", png.getvalue(), "image/png")
    got = api.get(f"/buckets/{served}/images/pics/red.png", params={"width": 20})
    assert got.status_code == 200 and got.headers["Content-Type"] == "image/png"
    assert_sandboxed(got.headers)
    again = api.get(
        f"/buckets/{served}/images/pics/red.png",
        params={"width": 20},
        headers={"If-None-Match": got.headers["ETag"]},
    )
    assert again.status_code == 304
    assert_sandboxed(again.headers)


def test_error_bodies_are_never_sniffed(
    api: httpx.Client, served: str, server: ServerProcess
) -> None:
    missing = api.get(f"/buckets/{served}/objects/%3Cscript%3Ealert(1)%3C%2Fscript%3E.html")
    assert missing.status_code == 404
    assert missing.headers.get_list("X-Content-Type-Options") == ["nosniff"]
    assert missing.headers["Content-Type"].startswith("application/json")
    unmatched = httpx.get(server.url + "/api/v1/<svg onload=alert(1)>")
    assert unmatched.status_code == 404
    assert unmatched.headers.get_list("X-Content-Type-Options") == ["nosniff"]
    listing = api.get("/buckets")
    assert listing.headers.get_list("X-Content-Type-Options") == ["nosniff"]
    refused = raw_request(server.port, b"GET /health HTTP/1.1\r\nBad header\r\n\r\n")
    assert refused.status == 400 and refused.all("X-Content-Type-Options") == ["nosniff"]


def test_the_api_docs_page_runs_no_script(server: ServerProcess) -> None:
    docs = httpx.get(server.api + "/docs")
    assert docs.status_code == 200 and docs.headers["Content-Type"].startswith("text/html")
    policy = docs.headers["Content-Security-Policy"]
    directives = {part.strip().split(" ")[0] for part in policy.split(";")}
    assert "sandbox" in directives and "default-src 'none'" in policy
    assert "script-src" not in directives
    assert docs.headers.get_list("X-Content-Type-Options") == ["nosniff"]


def test_the_console_is_the_only_active_content(server: ServerProcess) -> None:
    page = httpx.get(server.url + "/console/")
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("style-src")[0]
    assert "'unsafe-eval'" not in policy and "object-src 'none'" in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    icon = httpx.get(server.url + "/console/favicon.svg")
    assert icon.status_code == 200 and icon.headers["X-Content-Type-Options"] == "nosniff"
    icon_policy = icon.headers["Content-Security-Policy"]
    assert "sandbox" in icon_policy or "script-src 'none'" in icon_policy


def test_raw_object_reads_send_each_header_once(
    server: ServerProcess, api: httpx.Client, served: str
) -> None:
    put(api, served, "once/page.html", b"<p>x</p>", "text/html")
    url = api.post(
        "/presign", json={"bucket": served, "key": "once/page.html", "method": "GET"}
    ).json()["url"]
    target = url.removeprefix(server.url)
    answer = raw_request(server.port, request_bytes("GET", target, {"Connection": "close"}))
    assert answer.status == 200 and answer.body == b"<p>x</p>"
    for name in ("X-Content-Type-Options", "Content-Security-Policy", "Content-Disposition"):
        assert len(answer.all(name)) == 1, answer.header_lines
