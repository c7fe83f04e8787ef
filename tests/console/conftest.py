"""Fixtures of the browser suites: one server and one Chromium per module, a fresh browser
context per test, and a screenshot of the page when a test fails.

Playwright drives Debian's Chromium (``/usr/bin/chromium``, installed by the Makefile):
Playwright's own browser download is not reachable from here. The flags keep Chromium from
calling out to Google's services, which this machine's closed network refuses.

Screenshots of failures go to ``build/console-failures/<test>.png`` (``CONSOLE_FAILURES``
overrides the directory).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from tests.serverproc import ADMIN_PASSWORD, REPO_ROOT, ServerProcess

CHROMIUM = os.environ.get("CONSOLE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
FAILURES = Path(os.environ.get("CONSOLE_FAILURES", REPO_ROOT / "build" / "console-failures"))
VIEWPORT = {"width": 1280, "height": 800}

expect.set_options(timeout=15_000)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    setattr(item, f"report_{call.when}", report)
    return report


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("console") / "data")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def admin_api(console_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console_server.api, auth=console_server.auth, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def new_context(browser: Browser, server: ServerProcess, **options: object) -> BrowserContext:
    context = browser.new_context(
        base_url=server.url, viewport=VIEWPORT, accept_downloads=True, **options
    )
    context.set_default_timeout(15_000)
    return context


@pytest.fixture
def context(
    browser: Browser, console_server: ServerProcess, request: pytest.FixtureRequest
) -> Iterator[BrowserContext]:
    ctx = new_context(browser, console_server)
    messages: list[str] = []
    ctx.on("console", lambda message: messages.append(f"{message.type}: {message.text}"))
    ctx.on("weberror", lambda error: messages.append(f"page error: {error.error}"))
    yield ctx
    failed = getattr(request.node, "report_call", None)
    if failed is not None and failed.failed:
        FAILURES.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^\w.-]+", "_", request.node.nodeid.split("::")[-1])
        for index, page in enumerate(ctx.pages):
            try:
                page.screenshot(path=str(FAILURES / f"{name}-{index}.png"), full_page=True)
            except PlaywrightError as error:  # an SVG document cannot always be captured
                messages.append(f"no screenshot of page {index}: {error.message}")
        (FAILURES / f"{name}.log").write_text("\n".join(messages))
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def sign_in(page: Page, username: str = "admin", password: str = ADMIN_PASSWORD) -> None:
    """Open the console and sign in; waits for the bucket list."""
    page.goto("/console/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Buckets", exact=True)).to_be_visible()


@pytest.fixture
def admin_page(page: Page) -> Page:
    sign_in(page)
    return page
