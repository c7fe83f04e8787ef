"""The screenshots of docs/console.md, taken by the browser tooling of the tests.

Slow-marked (``make test-slow``, or ``pytest -m slow tests/console/test_screenshots.py``): it
seeds a small demo data set, visits the main pages at 1280x800 (and the browser at a phone
width) and writes ``docs/console/*.png``, quantised to 256 colours to keep them small.
"""

from __future__ import annotations

import io
from pathlib import Path

import av
import httpx
import pytest
from PIL import Image, ImageDraw
from playwright.sync_api import Browser, Page, Route, expect

from tests.console.conftest import new_context, sign_in
from tests.serverproc import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

OUT = REPO_ROOT / "docs" / "console"


def picture(width: int, height: int, hue: int) -> bytes:
    """A landscape-like gradient picture, distinct per ``hue``."""
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(height):
        t = y / height
        colour = (int(40 + 150 * t), int(90 + hue * t), 200 - int(80 * t))
        draw.line([(0, y), (width, y)], fill=colour)
    draw.ellipse([width * 0.65, height * 0.12, width * 0.82, height * 0.39], fill=(255, 214, 120))
    draw.polygon(
        [(0, height), (width * 0.3, height * 0.55), (width * 0.55, height), (0, height)],
        fill=(30, 60, 70),
    )
    draw.polygon(
        [
            (width * 0.35, height),
            (width * 0.7, height * 0.5),
            (width, height * 0.85),
            (width, height),
        ],
        fill=(45, 80, 90),
    )
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=88)
    return buffer.getvalue()


def demo_clip(path: Path, seconds: int = 4, fps: int = 12) -> bytes:
    """A small H.264 MP4 of a landscape whose sun crosses the sky (nicer than a flat test clip)."""
    width, height = 320, 180
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for index in range(seconds * fps):
            image = Image.new("RGB", (width, height))
            draw = ImageDraw.Draw(image)
            for y in range(height):
                t = y / height
                draw.line([(0, y), (width, y)], fill=(int(40 + 170 * t), int(80 + 60 * t), 190))
            x = 20 + index * (width - 60) / (seconds * fps)
            draw.ellipse([x, 25, x + 34, 59], fill=(255, 210, 110))
            draw.polygon([(0, height), (120, 95), (230, height)], fill=(32, 62, 72))
            ridge = [(140, height), (250, 105), (width, 150), (width, height)]
            draw.polygon(ridge, fill=(48, 84, 92))
            for packet in stream.encode(av.VideoFrame.from_image(image)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path.read_bytes()


def save(page: Page, name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    raw = page.screenshot()
    image = Image.open(io.BytesIO(raw)).convert("RGB").quantize(256)
    image.save(OUT / f"{name}.png", optimize=True)


@pytest.fixture(scope="module")
def demo(admin_api: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name, versioning, quota in (
        ("photos", True, 5 * 1024**3),
        ("videos", False, None),
        ("backups", True, None),
        ("website-assets", False, 1024**3),
    ):
        body: dict[str, object] = {"name": name, "versioning_enabled": versioning}
        if quota:
            body["quota_bytes"] = quota
        assert admin_api.post("/buckets", json=body).status_code == 201
    for index, place in enumerate(("alps", "coast", "desert", "forest", "lake", "valley")):
        admin_api.put(
            f"/buckets/photos/objects/2026/trips/{place}.jpg",
            content=picture(1600, 1000, 40 + 25 * index),
            headers={"Content-Type": "image/jpeg"},
        )
    for folder in ("2024", "2025", "portraits"):
        admin_api.put(f"/buckets/photos/objects/{folder}/index.json", content=b"{}")
    admin_api.put("/buckets/photos/objects/2026/trips/notes.txt", content=b"packing list")
    clip = demo_clip(tmp_path_factory.mktemp("clip") / "clip.mp4")
    admin_api.put(
        "/buckets/videos/objects/launch/teaser.mp4",
        content=clip,
        headers={"Content-Type": "video/mp4"},
    )
    for index in range(12):
        admin_api.put(f"/buckets/backups/objects/db/{index:03d}.dump", content=b"d" * 40_000)
    admin_api.put("/buckets/website-assets/objects/site.css", content=b"body{}" * 500)
    for username, role in (("maria", "admin"), ("deploy-bot", "user"), ("jonas", "user")):
        body = {"username": username, "password": f"{username}-password", "role": role}
        assert admin_api.post("/users", json=body).status_code == 201


def test_take_the_screenshots_of_the_docs(
    demo: None, browser: Browser, console_server: ServerProcess, tmp_path: Path
) -> None:
    context = new_context(browser, console_server)
    page = context.new_page()
    try:
        page.goto("/console/")
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        save(page, "sign-in")
        sign_in(page)
        expect(page.get_by_role("link", name="website-assets", exact=True)).to_be_visible()
        save(page, "buckets")

        page.goto("/console/#/buckets/photos?prefix=2026%2Ftrips%2F")
        expect(page.get_by_role("link", name="valley.jpg")).to_be_visible()
        save(page, "object-browser")

        # Uploads in progress: parts after the sixth are held until the screenshot is taken.
        page.evaluate(
            "() => { sessionStorage.setItem('console.multipartThresholdBytes', '262144');"
            " sessionStorage.setItem('console.partSizeBytes', '65536'); }"
        )
        passed: list[str] = []
        held: list[Route] = []
        released: list[bool] = []

        def throttle(route: Route) -> None:
            if len(passed) < 6 or released:
                passed.append(route.request.url)
                route.continue_()
            else:
                held.append(route)

        page.route("**/api/v1/multipart/*/part?*", throttle)
        (tmp_path / "drone-flight.mov").write_bytes(bytes(1024 * 1024))
        (tmp_path / "itinerary.txt").write_text("day 1: fly\n" * 200)
        (tmp_path / "route-map.jpg").write_bytes(picture(800, 500, 120))
        page.get_by_label("Upload files").set_input_files(
            [tmp_path / name for name in ("drone-flight.mov", "itinerary.txt", "route-map.jpg")]
        )
        uploads = page.get_by_role("region", name="Uploads")
        expect(uploads.get_by_text("Uploaded")).to_have_count(2)
        page.wait_for_timeout(300)
        save(page, "uploads")
        released.append(True)
        for route in held[:]:
            route.continue_()
        expect(uploads.get_by_role("heading")).to_have_text("Uploads: 3 of 3 done")
        uploads.get_by_role("button", name="Clear finished").click()

        page.get_by_role("link", name="alps.jpg").click()
        page.wait_for_function("() => document.querySelector('.preview-image')?.naturalWidth > 0")
        save(page, "image-preview")

        page.goto("/console/#/buckets/videos/object?key=launch%2Fteaser.mp4")
        panel = page.get_by_role("region", name="Video")
        panel.get_by_role("button", name="Make thumbnails").click()
        expect(panel.get_by_role("img", name="Frame at 4 s")).to_be_visible()
        panel.get_by_role("button", name="Package for streaming").click()
        panel.get_by_role("button", name="Play").click(timeout=60_000)
        page.wait_for_function("() => document.querySelector('video.player')?.currentTime > 1.5")
        page.evaluate("document.querySelector('video.player').pause()")
        save(page, "video-playback")

        page.get_by_role("link", name="Dashboard").click()
        expect(page.get_by_role("heading", name="Uploads (PUT)")).to_be_visible()
        save(page, "dashboard")

        page.get_by_role("link", name="Users").click()
        expect(page.get_by_role("button", name="Disable admin")).to_be_visible()
        save(page, "users")

        page.set_viewport_size({"width": 390, "height": 800})
        page.goto("/console/#/buckets/photos?prefix=2026%2Ftrips%2F")
        expect(page.get_by_role("link", name="valley.jpg")).to_be_visible()
        save(page, "phone-object-browser")
    finally:
        context.close()
    assert sorted(path.name for path in OUT.glob("*.png")) == sorted(
        f"{name}.png"
        for name in (
            "sign-in",
            "buckets",
            "object-browser",
            "image-preview",
            "video-playback",
            "dashboard",
            "users",
            "phone-object-browser",
            "uploads",
        )
    )
    assert all(Path(path).stat().st_size < 400_000 for path in OUT.glob("*.png"))
