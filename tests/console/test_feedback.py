"""What the console tells its user, in Chromium: an object's link is named by its key alone
(its icon is decoration), the "Uploading" note goes once the upload is done, and the
dashboard counts the files a batch upload (`svc cp -r`) stored."""

from __future__ import annotations

import io
import secrets
import tarfile
from pathlib import Path

import httpx
from PIL import Image
from playwright.sync_api import Page, expect


def make_bucket(api: httpx.Client) -> str:
    name = f"fb-{secrets.token_hex(3)}"
    assert api.post("/buckets", json={"name": name}).status_code == 201
    return name


def png() -> bytes:
    sink = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(sink, format="PNG")
    return sink.getvalue()


def test_an_objects_link_is_named_by_its_key_alone(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    bucket = make_bucket(admin_api)
    objects = {
        "notes.txt": b"n",
        "clip.mp4": b"v",
        "blob.bin": b"b",
        "pic.png": png(),
        "docs/a.txt": b"a",
    }
    for key, body in objects.items():
        assert admin_api.put(f"/buckets/{bucket}/objects/{key}", content=body).status_code == 200
    page = admin_page
    page.goto(f"/console/#/buckets/{bucket}")
    expect(page.locator("img.row-thumb")).to_have_count(1)  # the picture's preview came
    for name in ("notes.txt", "clip.mp4", "blob.bin", "pic.png", "docs/"):
        link = page.get_by_role("link", name=name, exact=True)
        expect(link).to_be_visible()
        # Its whole text is the name: no glyph for a reader that takes the text as the name.
        assert link.evaluate("(a) => a.textContent") == name
    page.goto("/console/#/buckets")
    link = page.get_by_role("link", name=bucket, exact=True)
    assert link.evaluate("(a) => a.textContent") == bucket


def test_the_uploading_note_goes_once_the_upload_is_done(
    admin_page: Page, admin_api: httpx.Client, tmp_path: Path
) -> None:
    bucket = make_bucket(admin_api)
    one = tmp_path / "one.txt"
    one.write_bytes(b"one")
    page = admin_page
    page.goto(f"/console/#/buckets/{bucket}")
    page.get_by_label("Upload files").set_input_files([one])
    expect(page.get_by_role("region", name="Uploads").get_by_role("heading")).to_have_text(
        "Uploads: 1 of 1 done"
    )
    notes = page.locator("#toasts")
    # Done: the note says so at once, and no longer says "Uploading".
    expect(notes.get_by_text(f"Uploaded 1 file to {bucket}/")).to_be_visible(timeout=1000)
    expect(notes.get_by_text("Uploading")).to_have_count(0, timeout=1000)


def test_the_dashboard_counts_the_files_of_a_batch_upload(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    bucket = make_bucket(admin_api)
    sink = io.BytesIO()
    with tarfile.open(fileobj=sink, mode="w") as archive:
        for index in range(5):
            info = tarfile.TarInfo(f"dir/file{index}.txt")
            info.size = 100
            archive.addfile(info, io.BytesIO(b"x" * 100))
    before = admin_api.get("/system/performance").json()["put"]["count"]
    sent = admin_api.post(f"/buckets/{bucket}/batch", content=sink.getvalue())  # svc cp -r
    assert sent.status_code == 200 and sent.json()["stored"] == 5, sent.text
    after = admin_api.get("/system/performance").json()["put"]["count"]
    assert after == before + 5
    page = admin_page
    page.get_by_role("link", name="Dashboard").click()
    card = page.get_by_role("region", name="Uploads (PUT)")
    expect(card.locator("strong")).to_have_text(f"{after:,}")
    expect(card).to_contain_text("objects stored")
