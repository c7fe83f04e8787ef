"""Video in the console: thumbnails, a packaging job with its progress, playback of the HLS
output with hls.js in the page, and a share link played in a context with no credentials."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.conftest import new_context
from tests.http.videokit import make_clip
from tests.serverproc import ServerProcess

BUCKET = "console-videos"


@pytest.fixture(scope="module")
def video_key(admin_api: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> str:
    clip = make_clip(tmp_path_factory.mktemp("clips") / "clip.mp4", seconds=3)
    assert admin_api.post("/buckets", json={"name": BUCKET}).status_code == 201
    response = admin_api.put(
        f"/buckets/{BUCKET}/objects/clips/clip.mp4",
        content=clip,
        headers={"Content-Type": "video/mp4"},
    )
    assert response.status_code == 200, response.text
    return "clips/clip.mp4"


def assert_plays(page: Page, name: str) -> None:
    """The <video> named ``name`` plays: its currentTime advances past half a second."""
    player = page.locator(f'video[aria-label="{name}"]')
    expect(player).to_be_visible()
    page.wait_for_function(
        'name => { const v = document.querySelector(`video[aria-label="${name}"]`);'
        " return v && v.currentTime > 0.5; }",
        arg=name,
        timeout=20_000,
    )


def test_package_a_video_and_play_it_in_the_page(admin_page: Page, video_key: str) -> None:
    page = admin_page
    page.goto(f"/console/#/buckets/{BUCKET}?prefix=clips%2F")
    page.get_by_role("link", name="clip.mp4").click()
    panel = page.get_by_role("region", name="Video")
    expect(panel.get_by_role("status")).to_have_text("Not packaged for streaming yet.")

    panel.get_by_role("button", name="Make thumbnails").click()
    expect(panel.get_by_role("img", name="Frame at 0 s")).to_be_visible()
    expect(panel.get_by_role("img", name="Frame at 2 s")).to_be_visible()

    panel.get_by_role("button", name="Package for streaming").click()
    expect(panel.get_by_role("status")).to_have_text("Packaged for streaming (HLS)", timeout=60_000)
    # The job view says where the job ran: this server packages itself (no media fleet).
    expect(panel.get_by_label("Packaging worker")).to_have_text("Attempt 1, in the server")
    panel.get_by_role("button", name="Play").click()
    assert_plays(page, f"Playback of {video_key}")


def test_a_share_link_plays_without_credentials(
    admin_page: Page, browser: Browser, console_server: ServerProcess, video_key: str
) -> None:
    page = admin_page
    page.goto(f"/console/#/buckets/{BUCKET}/object?key={video_key.replace('/', '%2F')}")
    panel = page.get_by_role("region", name="Video")
    # The job of the previous test (or a new one) is found again without packaging anew.
    share = panel.get_by_role("button", name="Share video")
    package = panel.get_by_role("button", name="Package for streaming")
    expect(share.or_(package)).to_be_visible()
    if package.is_visible():
        package.click()
    share.click(timeout=60_000)
    dialog = page.get_by_role("dialog", name="Share video")
    dialog.get_by_label("Share expires after").select_option("3600")
    dialog.get_by_role("button", name="Create share link").click()
    link = dialog.get_by_label("Player link").input_value()
    hls = dialog.get_by_label("HLS URL").input_value()
    assert link.startswith(console_server.url + "/console/#/watch?src=")
    assert "/api/v1/videos/play/" in hls

    stranger = new_context(browser, console_server)
    try:
        watcher = stranger.new_page()
        watcher.goto(link)
        expect(watcher.get_by_role("heading", name="Shared video")).to_be_visible()
        assert_plays(watcher, "Shared video")
        assert watcher.evaluate("sessionStorage.getItem('console.session')") is None
        assert httpx.get(hls).status_code == 200  # no credentials anywhere
    finally:
        stranger.close()

    dialog.get_by_role("button", name="Revoke share").click()
    expect(dialog.get_by_text("The share was revoked.")).to_be_visible()
    assert httpx.get(hls).status_code == 404


def test_a_video_object_offers_a_presigned_download_link(
    admin_page: Page, video_key: str, tmp_path: Path
) -> None:
    page = admin_page
    page.goto(f"/console/#/buckets/{BUCKET}/object?key={video_key.replace('/', '%2F')}")
    page.get_by_role("button", name="Presigned link").click()
    dialog = page.get_by_role("dialog", name="Presigned link")
    dialog.get_by_label("Link expires after").select_option("900")
    dialog.get_by_role("button", name="Create link").click()
    url = dialog.get_by_label("Link", exact=True).input_value()
    assert "X-Signature=" in url and "X-Expires=" in url
    assert httpx.get(url).status_code == 200
    dialog.get_by_role("button", name="Close dialog").click()

    with page.expect_download() as info:
        page.get_by_role("button", name="Download").click()
    saved = tmp_path / "saved.mp4"
    info.value.save_as(saved)
    assert info.value.suggested_filename == "clip.mp4"
    assert saved.stat().st_size > 1000
