"""The console in a real browser: sign-in, buckets and their settings, uploads of files and
folders (single PUT and multipart), the paginated object browser, and image previews."""

from __future__ import annotations

import hashlib
import io
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from PIL import Image
from playwright.sync_api import BrowserContext, Page, Route, expect
from prometheus_client.parser import text_string_to_metric_families

from tests.console.conftest import sign_in
from tests.serverproc import ServerProcess

PART_ROUTE = "/api/v1/multipart/{upload_id}/part"


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def make_bucket(api: httpx.Client, name: str | None = None) -> str:
    name = name or unique("con")
    response = api.post("/buckets", json={"name": name})
    assert response.status_code == 201, response.text
    return name


def keys_of(api: httpx.Client, bucket: str) -> dict[str, dict[str, object]]:
    body = api.get(f"/buckets/{bucket}/objects").json()
    return {item["key"]: item for item in body["objects"]}


def test_a_failed_sign_in_shows_the_consoles_own_message(page: Page) -> None:
    page.goto("/console/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text(
        "Sign-in failed: the username or password is wrong."
    )
    # The token is never a cookie, and nothing was stored for a failed attempt.
    assert page.context.cookies() == []
    assert page.evaluate("sessionStorage.getItem('console.session')") is None


def test_sign_in_keeps_the_token_in_session_storage_only(page: Page) -> None:
    sign_in(page)
    assert page.context.cookies() == []
    stored = page.evaluate("JSON.parse(sessionStorage.getItem('console.session'))")
    assert stored["user"]["username"] == "admin" and stored["token"]
    page.reload()
    expect(page.get_by_role("heading", name="Buckets", exact=True)).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('console.session')") is None


def test_create_a_bucket_and_change_its_settings(admin_page: Page, admin_api: httpx.Client) -> None:
    page = admin_page
    name = unique("made")
    page.get_by_role("button", name="Create bucket").click()
    dialog = page.get_by_role("dialog", name="Create bucket")
    dialog.get_by_label("Bucket name").fill("Bad_Name")
    dialog.get_by_role("button", name="Create bucket").click()
    expect(dialog.get_by_role("alert")).to_contain_text("lowercase")
    dialog.get_by_label("Bucket name").fill(name)
    dialog.get_by_role("button", name="Create bucket").click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()  # the empty browser
    assert admin_api.get(f"/buckets/{name}").status_code == 200

    page.get_by_role("link", name="Bucket settings").click()
    page.get_by_label("Versioning: keep every version of objects").check()
    page.get_by_label("Quota", exact=True).fill("2")
    page.get_by_role("button", name="Add tag").click()
    page.get_by_label("Tag 1 name").fill("team")
    page.get_by_label("Tag 1 value").fill("media")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Saved. Versioning is on.")).to_be_visible()
    bucket = admin_api.get(f"/buckets/{name}").json()
    assert bucket["versioning_enabled"] is True
    assert bucket["quota_bytes"] == 2 * 1024**3
    assert bucket["tags"] == {"team": "media"}


def test_lifecycle_rules_say_clearly_when_the_server_lacks_them(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    name = make_bucket(admin_api)
    answer = admin_api.get(f"/buckets/{name}/lifecycle")
    admin_page.goto(f"/console/#/buckets/{name}/settings")
    section = admin_page.get_by_role("region", name="Lifecycle rules")
    if answer.status_code in (404, 405):
        expect(section.get_by_role("status")).to_have_text(
            "Lifecycle rules are not available on this server: it does not offer the "
            "lifecycle endpoint yet."
        )
    else:  # the server has the endpoint: the editor saves a rule through it
        section.get_by_role("button", name="Add rule").click()
        section.get_by_label("Rule 1: id").fill("old")
        section.get_by_label("Rule 1: expire current versions after days").fill("30")
        section.get_by_role("button", name="Save lifecycle rules").click()
        expect(section.get_by_text("Lifecycle rules saved.")).to_be_visible()
        rules = admin_api.get(f"/buckets/{name}/lifecycle").json()["rules"]
        assert [rule["id"] for rule in rules] == ["old"]


def test_delete_a_bucket_from_the_list(admin_page: Page, admin_api: httpx.Client) -> None:
    name = make_bucket(admin_api)
    admin_api.put(f"/buckets/{name}/objects/a.txt", content=b"a")
    admin_page.reload()
    admin_page.get_by_role("button", name=f"Delete bucket {name}").click()
    admin_page.get_by_role("dialog").get_by_role("button", name="Delete bucket").click()
    expect(admin_page.get_by_role("link", name=name)).to_have_count(0)
    assert admin_api.get(f"/buckets/{name}").status_code == 404


def test_upload_files_and_a_folder_keeping_relative_paths(
    admin_page: Page, admin_api: httpx.Client, tmp_path: Path
) -> None:
    name = make_bucket(admin_api)
    one, two = tmp_path / "one.txt", tmp_path / "two.bin"
    one.write_bytes(b"hello console")
    two.write_bytes(secrets.token_bytes(5000))
    folder = tmp_path / "album"
    (folder / "day 1").mkdir(parents=True)
    (folder / "cover.txt").write_text("cover")
    (folder / "day 1" / "note.txt").write_text("note")

    page = admin_page
    page.goto(f"/console/#/buckets/{name}")
    page.get_by_label("Upload files").set_input_files([one, two])
    expect(page.get_by_role("link", name="two.bin")).to_be_visible()
    expect(page.get_by_role("link", name="one.txt")).to_be_visible()
    page.get_by_label("Upload folder").set_input_files(folder)
    expect(page.get_by_role("link", name="album/")).to_be_visible()
    uploads = page.get_by_role("region", name="Uploads")
    expect(uploads.get_by_role("heading")).to_have_text("Uploads: 4 of 4 done")

    stored = keys_of(admin_api, name)
    assert set(stored) == {"one.txt", "two.bin", "album/cover.txt", "album/day 1/note.txt"}
    assert stored["two.bin"]["sha256_checksum"] == hashlib.sha256(two.read_bytes()).hexdigest()
    assert stored["one.txt"]["content_type"] == "text/plain"

    page.get_by_role("link", name="album/").click()
    expect(page.get_by_role("link", name="day 1/")).to_be_visible()
    expect(page.get_by_role("link", name="cover.txt")).to_be_visible()


def part_requests(api: httpx.Client) -> int:
    """How many multipart part uploads the server has answered 200 (from its metrics)."""
    total = 0
    for family in text_string_to_metric_families(api.get("/metrics").text):
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name == "service_http_requests_total"
                and labels.get("route") == PART_ROUTE
                and labels.get("status") == "200"
            ):
                total += int(sample.value)
    return total


def test_a_large_file_goes_up_in_parallel_multipart_parts(
    context: BrowserContext, admin_api: httpx.Client, tmp_path: Path
) -> None:
    # Lower the multipart threshold and part size for this page (the defaults are 16 MiB and
    # the session's recommended part size).
    context.add_init_script(
        "sessionStorage.setItem('console.multipartThresholdBytes', String(256 * 1024));"
        "sessionStorage.setItem('console.partSizeBytes', String(64 * 1024));"
    )
    page = context.new_page()
    sign_in(page)
    name = make_bucket(admin_api)
    before = part_requests(admin_api)
    big = tmp_path / "big.bin"
    big.write_bytes(secrets.token_bytes(700 * 1024))
    # Part requests are held until three are in flight at once: a console that sent parts
    # one after another would never get past the first.
    held: list[Route] = []
    seen: list[str] = []
    most_at_once = 0

    def gather(route: Route) -> None:
        nonlocal most_at_once
        held.append(route)
        seen.append(route.request.url)
        most_at_once = max(most_at_once, len(held))
        if len(held) >= 3 or len(seen) > 8:
            batch = held[:]  # handlers interleave while continue_() waits: take, then clear
            held.clear()
            for waiting in batch:
                waiting.continue_()

    page.route("**/api/v1/multipart/*/part?*", gather)
    page.goto(f"/console/#/buckets/{name}")
    page.get_by_label("Upload files").set_input_files(big)
    expect(page.get_by_role("link", name="big.bin")).to_be_visible()
    assert most_at_once >= 3 and len(seen) == 11
    stored = keys_of(admin_api, name)["big.bin"]
    assert stored["sha256_checksum"] == hashlib.sha256(big.read_bytes()).hexdigest()
    assert stored["size_bytes"] == 700 * 1024
    # It went through multipart, 11 parts of 64 KiB; no open session is left behind.
    assert part_requests(admin_api) - before == 11
    assert admin_api.get("/multipart", params={"bucket": name}).json()["uploads"] == []


def test_browse_past_a_thousand_keys_in_cursor_pages(
    admin_page: Page, admin_api: httpx.Client, console_server: ServerProcess
) -> None:
    name = make_bucket(admin_api)
    keys = [f"logs/entry-{index:04d}.txt" for index in range(1050)]

    def put(key: str) -> int:
        return admin_api.put(f"/buckets/{name}/objects/{key}", content=b"x").status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(put, keys)) == {200}
    page = admin_page
    page.goto(f"/console/#/buckets/{name}")
    page.get_by_role("link", name="logs/").click()
    expect(page.get_by_role("link", name="entry-0000.txt")).to_be_visible()
    page.get_by_label("Per page").select_option("1000")
    expect(page.get_by_role("link", name="entry-0999.txt")).to_be_visible()
    expect(page.get_by_role("link", name="entry-1000.txt")).to_have_count(0)
    page.get_by_role("button", name="Next page").click()
    expect(page.get_by_role("link", name="entry-1049.txt")).to_be_visible()
    expect(page.get_by_role("link", name="entry-0999.txt")).to_have_count(0)
    expect(page.get_by_text("Page 2 · items 1,001\u20131,050")).to_be_visible()
    expect(page.get_by_role("button", name="Next page")).to_be_disabled()
    page.get_by_role("button", name="Previous page").click()
    expect(page.get_by_role("link", name="entry-0000.txt")).to_be_visible()


def test_preview_an_image_through_the_image_endpoint(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    name = make_bucket(admin_api)
    buffer = io.BytesIO()
    Image.new("RGB", (1600, 1000), (200, 40, 90)).save(buffer, "PNG")
    admin_api.put(
        f"/buckets/{name}/objects/photos/red.png",
        content=buffer.getvalue(),
        headers={"Content-Type": "image/png"},
    )
    page = admin_page
    page.goto(f"/console/#/buckets/{name}?prefix=photos%2F")
    page.get_by_role("link", name="red.png").click()
    image = page.get_by_role("img", name="Preview of photos/red.png")
    expect(image).to_be_visible()
    # Resized by the image endpoint to fit 1200x900, keeping the aspect ratio.
    page.wait_for_function("() => document.querySelector('.preview-image')?.naturalWidth > 0")
    assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [1200, 750]
    expect(page.get_by_text("image/png")).to_be_visible()


def test_a_failed_multipart_upload_is_retried_without_resending_stored_parts(
    context: BrowserContext, admin_api: httpx.Client, tmp_path: Path
) -> None:
    context.add_init_script(
        "sessionStorage.setItem('console.multipartThresholdBytes', String(256 * 1024));"
        "sessionStorage.setItem('console.partSizeBytes', String(64 * 1024));"
    )
    page = context.new_page()
    sign_in(page)
    name = make_bucket(admin_api)
    big = tmp_path / "flaky.bin"
    big.write_bytes(secrets.token_bytes(700 * 1024))
    seen: list[str] = []

    def fail_the_fourth_part(route: Route) -> None:
        seen.append(route.request.url)
        if len(seen) == 4:
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/api/v1/multipart/*/part?*", fail_the_fourth_part)
    before = part_requests(admin_api)
    page.goto(f"/console/#/buckets/{name}")
    page.get_by_label("Upload files").set_input_files(big)
    uploads = page.get_by_role("region", name="Uploads")
    expect(uploads.get_by_text("Failed: the connection failed")).to_be_visible()
    assert "flaky.bin" not in keys_of(admin_api, name)
    uploads.get_by_role("button", name="Retry upload of flaky.bin").click()
    expect(uploads.get_by_role("heading")).to_have_text("Uploads: 1 of 1 done")
    stored = keys_of(admin_api, name)["flaky.bin"]
    assert stored["sha256_checksum"] == hashlib.sha256(big.read_bytes()).hexdigest()
    # The retry resumed the session: the parts the server held were not sent again, and the
    # parts in flight when one failed were let finish first, so none was sent twice.
    assert part_requests(admin_api) - before == 11
    assert admin_api.get("/multipart", params={"bucket": name}).json()["uploads"] == []
