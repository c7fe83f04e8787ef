"""Black-box tests of video thumbnails: POST /videos/thumbnails (clips: ``videokit``)."""

from __future__ import annotations

from io import BytesIO
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.http.test_buckets import assert_error
from tests.http.videokit import HEIGHT, WIDTH, output_keys


def test_a_thumbnail_is_stored_as_an_object_of_the_asked_width(
    api: httpx.Client, bucket: str
) -> None:
    made = api.post(
        "/videos/thumbnails",
        json={"bucket": bucket, "key": "clip.mp4", "at_seconds": 0.5, "width": 32},
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["key"] == "clip.mp4.thumb.jpg" and body["content_type"] == "image/jpeg"
    assert made.headers["ETag"] == f'"{body["etag"]}"'
    stored = api.get(f"/buckets/{bucket}/objects/clip.mp4.thumb.jpg")
    assert stored.status_code == 200 and stored.content[:3] == b"\xff\xd8\xff"
    assert len(stored.content) == body["size_bytes"]
    picture = Image.open(BytesIO(stored.content))
    assert picture.size == (32, 24)
    assert 30 <= picture.convert("L").getpixel((16, 12)) <= 60  # frame 5: luma 50


def test_a_webp_thumbnail_goes_to_the_target_key_and_never_upscales(
    api: httpx.Client, bucket: str
) -> None:
    made = api.post(
        "/videos/thumbnails",
        json={
            "bucket": bucket,
            "key": "clip.mp4",
            "format": "webp",
            "quality": 50,
            "width": 1000,
            "target_key": "thumbs/a.webp",
        },
    )
    assert made.status_code == 201, made.text
    assert made.json()["content_type"] == "image/webp"
    data = api.get(f"/buckets/{bucket}/objects/thumbs/a.webp").content
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    assert Image.open(BytesIO(data)).size == (WIDTH, HEIGHT)


def test_at_seconds_past_the_end_gives_the_last_frame(api: httpx.Client, bucket: str) -> None:
    made = api.post(
        "/videos/thumbnails",
        json={"bucket": bucket, "key": "clip.mp4", "at_seconds": 3600, "target_key": "last.jpg"},
    )
    assert made.status_code == 201, made.text
    picture = Image.open(BytesIO(api.get(f"/buckets/{bucket}/objects/last.jpg").content))
    assert picture.convert("L").getpixel((32, 24)) > 170  # frame 19: luma 190


def test_an_undecodable_source_is_415_and_a_missing_one_404(api: httpx.Client, bucket: str) -> None:
    api.put(f"/buckets/{bucket}/objects/junk.mp4", content=b"\x00not a video" * 500)
    junk = api.post("/videos/thumbnails", json={"bucket": bucket, "key": "junk.mp4"})
    assert_error(junk, 415, "UnsupportedMediaType")
    missing = api.post("/videos/thumbnails", json={"bucket": bucket, "key": "nope.mp4"})
    assert_error(missing, 404, "NoSuchKey")
    no_bucket = api.post("/videos/thumbnails", json={"bucket": "no-such-b", "key": "a"})
    assert_error(no_bucket, 404, "NoSuchBucket")
    assert output_keys(api, bucket, "junk") == ["junk.mp4"]


@pytest.mark.parametrize(
    "fields",
    [
        {"at_seconds": -1},
        {"at_seconds": "1"},
        {"width": 0},
        {"width": 2.5},
        {"width": True},
        {"format": "png"},
        {"quality": 101},
        {"target_key": ""},
        {"key": None},
    ],
)
def test_bad_thumbnail_parameters_are_400(
    api: httpx.Client, bucket: str, fields: dict[str, Any]
) -> None:
    body = {"bucket": bucket, "key": "clip.mp4", **fields}
    assert_error(api.post("/videos/thumbnails", json=body), 400, "InvalidArgument")


def test_a_bad_target_key_is_invalid_key(api: httpx.Client, bucket: str) -> None:
    body = {"bucket": bucket, "key": "clip.mp4", "target_key": "a\x00b"}
    assert_error(api.post("/videos/thumbnails", json=body), 400, "InvalidKey")
