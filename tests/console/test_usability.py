"""The console used as people use it: by keyboard, at a phone's width, by dragging files in;
cancelling an upload and trying again; versions; and an accessible name on every control."""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, Route, expect
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.console.conftest import sign_in
from tests.serverproc import ADMIN_PASSWORD

UNNAMED_CONTROLS = """() => {
  const named = (el) => {
    const label = el.getAttribute("aria-label")
      || (el.labels ? [...el.labels].map((l) => l.textContent).join(" ") : "")
      || (el.getAttribute("aria-labelledby")
          ? document.getElementById(el.getAttribute("aria-labelledby"))?.textContent : "")
      || (["BUTTON", "A"].includes(el.tagName) ? el.textContent : "");
    return Boolean(label && label.trim());
  };
  return [...document.querySelectorAll("button, input, select, textarea, a[href]")]
    .filter((el) => !named(el)).map((el) => el.outerHTML.slice(0, 160));
}"""


def make_bucket(api: httpx.Client, versioning: bool = False) -> str:
    name = f"use-{secrets.token_hex(3)}"
    response = api.post("/buckets", json={"name": name, "versioning_enabled": versioning})
    assert response.status_code == 201, response.text
    return name


def test_every_control_on_every_page_has_an_accessible_name(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    name = make_bucket(admin_api, versioning=True)
    admin_api.put(f"/buckets/{name}/objects/docs/a.txt", content=b"a")
    admin_api.put(f"/buckets/{name}/objects/top.txt", content=b"t")
    page = admin_page
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text))
    pages = {
        "/console/#/buckets": "Buckets",
        f"/console/#/buckets/{name}": "Per page",
        f"/console/#/buckets/{name}/object?key=top.txt": "Versions",
        f"/console/#/buckets/{name}/settings": "Lifecycle rules",
        "/console/#/keys": "Access keys",
        "/console/#/users": "Users",
        "/console/#/dashboard": "Uploads (PUT)",
    }
    for address, landmark in pages.items():
        page.goto(address)
        expect(page.get_by_text(landmark, exact=True).first).to_be_visible()
        page.wait_for_load_state("networkidle")
        assert page.evaluate(UNNAMED_CONTROLS) == [], address
    page.goto(f"/console/#/buckets/{name}")
    page.get_by_role("button", name="Link to top.txt").click()
    expect(page.get_by_role("dialog", name="Presigned link")).to_be_visible()
    assert page.evaluate(UNNAMED_CONTROLS) == []
    refused = [text for text in messages if "Content Security Policy" in text]
    assert refused == [], "the page broke its own Content Security Policy"


def test_sign_in_and_create_a_bucket_by_keyboard_alone(page: Page, admin_api: httpx.Client) -> None:
    # Playwright turns the browser's file-chooser interception on when the first listener
    # is added, by a message it does not wait for; ``expect_file_chooser`` just before the
    # key press raced it, and on a loaded machine Chromium opened its own (invisible)
    # picker instead of reporting one. A listener from the start settles that first.
    page.on("filechooser", lambda chooser: None)
    page.goto("/console/")
    expect(page.get_by_label("Username")).to_be_focused()
    page.keyboard.type("admin")
    page.keyboard.press("Tab")
    page.keyboard.type(ADMIN_PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Buckets", exact=True)).to_be_visible()

    create = page.get_by_role("button", name="Create bucket")
    create.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Create bucket")
    expect(dialog.get_by_label("Bucket name")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)

    name = f"keys-{secrets.token_hex(3)}"
    create.focus()
    page.keyboard.press("Enter")
    page.keyboard.type(name)
    page.keyboard.press("Enter")  # submits the dialog's form
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    assert admin_api.get(f"/buckets/{name}").status_code == 200

    # The upload pickers are reached with Tab and opened with Space.
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.id") == "upload-files":
            break
    expect(page.get_by_label("Upload files")).to_be_focused()
    try:
        with page.expect_file_chooser() as chooser:
            page.keyboard.press("Space")
    except PlaywrightTimeoutError:  # say where the focus was, so a failure can be read
        focused = page.evaluate("() => document.activeElement && document.activeElement.outerHTML")
        pytest.fail(f"Space on the focused upload input opened no picker; focus on {focused}")
    chooser.value.set_files(
        files=[{"name": "typed.txt", "mimeType": "text/plain", "buffer": b"by keyboard"}]
    )
    expect(page.get_by_role("link", name="typed.txt")).to_be_visible()


def test_at_a_phone_width_the_menu_opens_the_navigation(context: BrowserContext) -> None:
    page = context.new_page()
    page.set_viewport_size({"width": 390, "height": 800})
    sign_in(page)
    users = page.get_by_role("link", name="Users")
    expect(users).to_be_hidden()
    menu = page.get_by_role("button", name="Menu")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    users.click()
    expect(page.get_by_role("heading", name="Users", exact=True)).to_be_visible()
    expect(users).to_be_hidden()  # the menu closes after a choice
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways at a phone width ({width} px)"


def test_files_dropped_on_the_browser_are_uploaded_into_the_open_folder(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    name = make_bucket(admin_api)
    page = admin_page
    page.goto(f"/console/#/buckets/{name}?prefix=inbox%2F")
    expect(page.get_by_text("This folder is empty")).to_be_visible()
    page.evaluate(
        """(names) => {
          const data = new DataTransfer();
          for (const n of names) {
            data.items.add(new File([`content of ${n}`], n, {type: "text/plain"}));
          }
          const zone = document.querySelector(".dropzone");
          zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: data, bubbles: true}));
          zone.dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true}));
        }""",
        ["first.txt", "second.txt"],
    )
    expect(page.get_by_role("link", name="second.txt")).to_be_visible()
    listed = admin_api.get(f"/buckets/{name}/objects", params={"prefix": "inbox/"}).json()
    assert [o["key"] for o in listed["objects"]] == ["inbox/first.txt", "inbox/second.txt"]
    body = admin_api.get(f"/buckets/{name}/objects/inbox/first.txt")
    assert body.content == b"content of first.txt"


def test_cancel_a_multipart_upload_then_try_again(
    context: BrowserContext, admin_api: httpx.Client, tmp_path: Path
) -> None:
    context.add_init_script(
        "sessionStorage.setItem('console.multipartThresholdBytes', String(128 * 1024));"
        "sessionStorage.setItem('console.partSizeBytes', String(64 * 1024));"
    )
    page = context.new_page()
    sign_in(page)
    name = make_bucket(admin_api)
    big = tmp_path / "movie.bin"
    big.write_bytes(secrets.token_bytes(300 * 1024))
    held: list[Route] = []
    pattern = "**/api/v1/multipart/*/part?*"

    def hold(route: Route) -> None:
        held.append(route)  # never continued: the part stays in flight until cancelled

    page.route(pattern, hold)
    page.goto(f"/console/#/buckets/{name}")
    page.get_by_label("Upload files").set_input_files(big)
    uploads = page.get_by_role("region", name="Uploads")
    expect(uploads.get_by_text("Uploading")).to_be_visible()
    for _ in range(100):  # until the first part request is held (the session exists by then)
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "no part request was sent"
    sessions = admin_api.get("/multipart", params={"bucket": name}).json()["uploads"]
    assert [s["key"] for s in sessions] == ["movie.bin"]

    uploads.get_by_role("button", name="Cancel upload of movie.bin").click()
    expect(uploads.get_by_text("Cancelled")).to_be_visible()
    for _ in range(100):  # the console aborts the session right after the requests
        open_sessions = admin_api.get("/multipart", params={"bucket": name}).json()["uploads"]
        if not open_sessions:
            break
        page.wait_for_timeout(50)
    assert open_sessions == []
    page.unroute(pattern)
    for route in held:
        with contextlib.suppress(PlaywrightError):  # the browser already dropped it
            route.abort()

    uploads.get_by_role("button", name="Retry upload of movie.bin").click()
    expect(uploads.get_by_role("heading")).to_have_text("Uploads: 1 of 1 done")
    stored = admin_api.get(f"/buckets/{name}/objects/movie.bin")
    assert stored.content == big.read_bytes()


def test_versions_of_an_object_are_listed_and_one_can_be_deleted(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    name = make_bucket(admin_api, versioning=True)
    first = admin_api.put(f"/buckets/{name}/objects/report.txt", content=b"draft").json()
    admin_api.put(f"/buckets/{name}/objects/report.txt", content=b"final version")
    page = admin_page
    page.goto(f"/console/#/buckets/{name}/object?key=report.txt")
    versions = page.get_by_role("region", name="Versions")
    expect(versions.get_by_role("row")).to_have_count(3)  # header and two versions
    expect(versions.get_by_text("latest")).to_have_count(1)
    versions.get_by_role("button", name=f"Delete version {first['version_id']}").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(versions.get_by_role("row")).to_have_count(2)
    left = admin_api.get(f"/buckets/{name}/versions").json()["versions"]
    assert [v["size_bytes"] for v in left] == [len(b"final version")]

    page.get_by_role("button", name="Delete object").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_text("This bucket is empty")).to_be_visible()
    assert admin_api.get(f"/buckets/{name}/objects/report.txt").status_code == 404


def test_an_expired_or_revoked_token_returns_to_the_sign_in_page(admin_page: Page) -> None:
    page = admin_page
    # A token the server no longer accepts (as after a password change or its expiry): the
    # API answers 401 with a Bearer challenge, so the browser shows no dialog of its own and
    # the console shows its sign-in page with a message.
    page.evaluate(
        """() => {
          const session = JSON.parse(sessionStorage.getItem("console.session"));
          session.token = session.token.slice(0, -4) + "AAAA";
          sessionStorage.setItem("console.session", JSON.stringify(session));
        }"""
    )
    page.reload()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text("Your session has ended. Sign in again.")
    assert page.evaluate("() => sessionStorage.getItem('console.session')") is None


def test_the_consoles_bucket_name_check_agrees_with_the_server(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    token = secrets.token_hex(3)
    candidates = [
        f"ok{token}",
        f"a.b-{token}",
        "x" * 57 + token,
        "ab",
        "x" * 64,
        f"-lead{token}",
        f"trail{token}-",
        f"two..dots{token}",
        "192.168.10.1",
        f"Upper{token}",
        f"under_score{token}",
    ]
    verdicts = admin_page.evaluate(
        """async (names) => {
          const { bucketNameProblem } = await import("/console/views/buckets.js");
          return names.map((name) => bucketNameProblem(name) === "");
        }""",
        candidates,
    )
    for name, console_accepts in zip(candidates, verdicts, strict=True):
        status = admin_api.post("/buckets", json={"name": name}).status_code
        assert status in (201, 400), (name, status)
        assert console_accepts == (status == 201), name
