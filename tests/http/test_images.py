"""Black-box tests of image transforms (GET .../images/{key}) and optimize (POST) over HTTP.

Sources are made with Pillow in the test; outputs are decoded with Pillow and checked for
their size, mode, pixels and magic bytes. The shared server's default pixel cap (50 million)
is used; the pixel bomb is a PNG whose header claims 10^10 pixels in a few dozen bytes.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import struct
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from PIL import Image

from tests.http.identitykit import create_account
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

RED, BLUE, GREEN, WHITE = (220, 20, 20), (20, 20, 220), (20, 200, 20), (255, 255, 255)
MAGIC: dict[str, Callable[[bytes], bool]] = {
    "jpeg": lambda data: data[:3] == b"\xff\xd8\xff",
    "png": lambda data: data[:8] == b"\x89PNG\r\n\x1a\n",
    "webp": lambda data: data[:4] == b"RIFF" and data[8:12] == b"WEBP",
    "avif": lambda data: data[4:12] == b"ftypavif",
}


@pytest.fixture
def bucket(api: httpx.Client, bucket_name: str) -> str:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    return bucket_name


def encode(image: Image.Image, fmt: str = "PNG", **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def stripes(width: int = 40, height: int = 20) -> Image.Image:
    """Blue | red | green vertical bands: the outer quarters are blue and green."""
    image = Image.new("RGB", (width, height), RED)
    image.paste(BLUE, (0, 0, width // 4, height))
    image.paste(GREEN, (width - width // 4, 0, width, height))
    return image


def put(api: httpx.Client, bucket: str, key: str, data: bytes, ctype: str = "image/png") -> None:
    response = api.put(
        f"/buckets/{bucket}/objects/{quote(key)}", content=data, headers={"Content-Type": ctype}
    )
    assert response.status_code == 200, response.text


def get_image(api: httpx.Client, bucket: str, key: str, **params: object) -> httpx.Response:
    query = {name: str(value) for name, value in params.items()}
    return api.get(f"/buckets/{bucket}/images/{quote(key)}", params=query)


def decoded(response: httpx.Response) -> Image.Image:
    assert response.status_code == 200, response.text
    assert response.headers["Content-Length"] == str(len(response.content))
    assert response.headers["ETag"] == f'"{hashlib.sha256(response.content).hexdigest()}"'
    return Image.open(io.BytesIO(response.content))


def near(pixel: Any, colour: tuple[int, ...], tolerance: int = 40) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour, strict=False))


@pytest.fixture
def striped(api: httpx.Client, bucket: str) -> str:
    """``bucket`` holding ``s.png``: 40x20 stripes."""
    put(api, bucket, "s.png", encode(stripes()))
    return bucket


# -- geometry -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "size"),
    [
        ({}, (40, 20)),
        ({"width": 10}, (10, 5)),
        ({"height": 10}, (20, 10)),
        ({"width": 20, "height": 20}, (20, 10)),  # inside is the default
        ({"width": 20, "height": 20, "fit": "inside"}, (20, 10)),
        ({"width": 10, "height": 10, "fit": "cover"}, (10, 10)),
        ({"width": 20, "height": 20, "fit": "contain"}, (20, 20)),
        ({"width": 10, "height": 30, "fit": "fill", "enlarge": "true"}, (10, 30)),
        ({"width": 16, "height": 4, "fit": "fill"}, (16, 4)),
        # never upscaled without enlarge
        ({"width": 80}, (40, 20)),
        ({"width": 80, "height": 80}, (40, 20)),
        ({"width": 80, "height": 80, "fit": "cover"}, (20, 20)),
        ({"width": 80, "height": 80, "fit": "fill"}, (20, 20)),
        ({"width": 80, "height": 80, "fit": "contain"}, (80, 80)),  # padded, not scaled
        # upscaled with enlarge
        ({"width": 80, "enlarge": "true"}, (80, 40)),
        ({"width": 80, "height": 80, "enlarge": "true"}, (80, 40)),
        ({"width": 80, "height": 80, "fit": "cover", "enlarge": "true"}, (80, 80)),
    ],
)
def test_output_size_follows_fit_and_enlarge(
    api: httpx.Client, striped: str, params: dict[str, object], size: tuple[int, int]
) -> None:
    response = get_image(api, striped, "s.png", **params)
    image = decoded(response)
    assert image.size == size
    assert (response.headers["X-Image-Width"], response.headers["X-Image-Height"]) == tuple(
        str(side) for side in size
    )


def test_cover_crops_the_overflow_centred(api: httpx.Client, striped: str) -> None:
    image = decoded(get_image(api, striped, "s.png", width=20, height=20, fit="cover"))
    rgb = image.convert("RGB")
    # The centred 20x20 crop of the 40x20 source holds only the red middle band.
    assert near(rgb.getpixel((0, 10)), RED) and near(rgb.getpixel((19, 10)), RED)


def test_fill_stretches_without_cropping(api: httpx.Client, striped: str) -> None:
    image = decoded(get_image(api, striped, "s.png", width=20, height=20, fit="fill"))
    rgb = image.convert("RGB")
    assert near(rgb.getpixel((0, 10)), BLUE) and near(rgb.getpixel((19, 10)), GREEN)


def test_contain_pads_png_with_transparency(api: httpx.Client, striped: str) -> None:
    image = decoded(get_image(api, striped, "s.png", width=40, height=40, fit="contain"))
    assert image.format == "PNG" and image.mode == "RGBA"
    assert image.getpixel((20, 2))[3] == 0  # padding above the 40x20 picture
    assert near(image.getpixel((20, 20)), (*RED, 255))


def test_contain_pads_jpeg_with_white(api: httpx.Client, striped: str) -> None:
    image = decoded(
        get_image(api, striped, "s.png", width=40, height=40, fit="contain", format="jpeg")
    )
    assert image.format == "JPEG" and image.mode == "RGB"
    assert near(image.getpixel((20, 2)), WHITE, 10)
    assert near(image.getpixel((20, 20)), RED)


def test_contain_without_enlarge_pads_the_unscaled_picture(api: httpx.Client, striped: str) -> None:
    image = decoded(get_image(api, striped, "s.png", width=80, height=80, fit="contain"))
    # The 40x20 picture sits centred at (20, 30): its blue band starts at x=20.
    assert image.getpixel((10, 40))[3] == 0
    assert near(image.getpixel((22, 40)), (*BLUE, 255))
    assert near(image.getpixel((40, 40)), (*RED, 255))


def test_transparent_source_is_flattened_on_white_for_jpeg(api: httpx.Client, bucket: str) -> None:
    put(api, bucket, "clear.png", encode(Image.new("RGBA", (20, 20), (0, 0, 0, 0))))
    image = decoded(get_image(api, bucket, "clear.png", format="jpeg"))
    assert near(image.getpixel((10, 10)), WHITE, 10)


def test_exif_orientation_is_applied(api: httpx.Client, bucket: str) -> None:
    source = stripes()
    exif = source.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    put(api, bucket, "turned.jpg", encode(source, "JPEG", exif=exif.tobytes()), "image/jpeg")
    image = decoded(get_image(api, bucket, "turned.jpg"))
    assert image.size == (20, 40)
    assert 0x0112 not in image.getexif()  # metadata is not copied
    rgb = image.convert("RGB")
    assert near(rgb.getpixel((10, 2)), BLUE) and near(rgb.getpixel((10, 37)), GREEN)
    assert decoded(get_image(api, bucket, "turned.jpg", height=20)).size == (10, 20)


# -- formats and quality --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jpeg", "png", "webp", "avif", "JPG"])
def test_format_conversion(api: httpx.Client, striped: str, fmt: str) -> None:
    response = get_image(api, striped, "s.png", width=20, format=fmt)
    name = {"JPG": "jpeg"}.get(fmt, fmt)
    assert response.headers["Content-Type"] == f"image/{name}"
    assert MAGIC[name](response.content)
    assert decoded(response).size == (20, 10)


def test_default_format_is_the_sources(api: httpx.Client, bucket: str) -> None:
    put(api, bucket, "w.webp", encode(stripes(), "WEBP"), "image/webp")
    response = get_image(api, bucket, "w.webp", width=20)
    assert response.headers["Content-Type"] == "image/webp" and MAGIC["webp"](response.content)
    put(api, bucket, "g.gif", encode(stripes(), "GIF"), "image/gif")
    response = get_image(api, bucket, "g.gif", width=20)
    assert response.headers["Content-Type"] == "image/png" and MAGIC["png"](response.content)


def test_quality_changes_the_size(api: httpx.Client, bucket: str) -> None:
    noisy = Image.effect_noise((200, 200), 80).convert("RGB")
    put(api, bucket, "noise.png", encode(noisy))
    low = get_image(api, bucket, "noise.png", format="jpeg", quality=10)
    high = get_image(api, bucket, "noise.png", format="jpeg", quality=95)
    assert low.status_code == high.status_code == 200
    assert len(low.content) * 2 < len(high.content)


# -- cache ----------------------------------------------------------------------------------


def cache_files(server: ServerProcess) -> set[str]:
    directory = Path(server.data_dir) / "cache" / "images"
    return {path.name for path in directory.iterdir()} if directory.exists() else set()


def test_variants_are_cached_and_follow_the_source(
    server: ServerProcess, api: httpx.Client, bucket: str
) -> None:
    put(api, bucket, "c.png", encode(stripes(64, 32)))
    first = get_image(api, bucket, "c.png", width=16, format="webp")
    assert first.headers["X-Image-Cache"] == "miss"
    etag = first.headers["ETag"].strip('"')
    assert [name for name in cache_files(server) if etag in name]
    second = get_image(api, bucket, "c.png", width=16, format="webp")
    assert second.headers["X-Image-Cache"] == "hit"
    assert second.content == first.content and second.headers["ETag"] == first.headers["ETag"]
    not_modified = api.get(
        f"/buckets/{bucket}/images/c.png",
        params={"width": 16, "format": "webp"},
        headers={"If-None-Match": first.headers["ETag"]},
    )
    assert not_modified.status_code == 304 and not_modified.content == b""
    put(api, bucket, "c.png", encode(Image.new("RGB", (64, 32), GREEN)))
    third = get_image(api, bucket, "c.png", width=16, format="webp")
    assert third.headers["X-Image-Cache"] == "miss"
    assert third.headers["ETag"] != first.headers["ETag"]
    assert near(decoded(third).convert("RGB").getpixel((2, 2)), GREEN)


def test_a_deleted_or_damaged_cache_is_recomputed(
    server: ServerProcess, api: httpx.Client, bucket: str
) -> None:
    put(api, bucket, "d.png", encode(stripes(48, 24)))
    first = get_image(api, bucket, "d.png", width=12)
    etag = first.headers["ETag"].strip('"')
    [name] = [name for name in cache_files(server) if etag in name]
    damaged = Path(server.data_dir) / "cache" / "images" / name
    damaged.write_bytes(b"torn")
    again = get_image(api, bucket, "d.png", width=12)
    assert again.headers["X-Image-Cache"] == "miss" and again.content == first.content
    shutil.rmtree(Path(server.data_dir) / "cache" / "images")
    recomputed = get_image(api, bucket, "d.png", width=12)
    assert recomputed.headers["X-Image-Cache"] == "miss"
    assert recomputed.content == first.content
    assert [name for name in cache_files(server) if etag in name]


def test_concurrent_requests_get_the_same_variant(api: httpx.Client, bucket: str) -> None:
    put(api, bucket, "many.png", encode(stripes(120, 60)))
    with ThreadPoolExecutor(6) as pool:
        responses = list(
            pool.map(
                lambda _: get_image(api, bucket, "many.png", width=30, format="avif"), range(6)
            )
        )
    assert all(response.status_code == 200 for response in responses)
    assert len({response.content for response in responses}) == 1


# -- optimize -------------------------------------------------------------------------------


def test_optimize_stores_an_object_under_the_default_key(api: httpx.Client, bucket: str) -> None:
    source = encode(stripes())
    put(api, bucket, "pics/s.png", source)
    response = api.post(
        "/images/optimize",
        json={"bucket": bucket, "key": "pics/s.png", "width": 20, "format": "webp", "quality": 70},
    )
    assert response.status_code == 201, response.text
    body = response.json()
    stored = api.get(f"/buckets/{bucket}/objects/pics/s.optimized.webp")
    assert stored.status_code == 200 and MAGIC["webp"](stored.content)
    assert body == {
        "bucket": bucket,
        "source_key": "pics/s.png",
        "key": "pics/s.optimized.webp",
        "format": "webp",
        "width": 20,
        "height": 10,
        "size_bytes": len(stored.content),
        "source_size_bytes": len(source),
        "sha256_checksum": hashlib.sha256(stored.content).hexdigest(),
        "etag": hashlib.sha256(stored.content).hexdigest(),
        "content_type": "image/webp",
        "version_id": None,
    }
    assert stored.headers["Content-Type"] == "image/webp"
    assert Image.open(io.BytesIO(stored.content)).size == (20, 10)


def test_optimize_to_a_named_key_in_the_sources_format(api: httpx.Client, bucket: str) -> None:
    put(api, bucket, "photo", encode(stripes(), "JPEG"), "image/jpeg")
    response = api.post(
        "/images/optimize",
        json={"bucket": bucket, "key": "photo", "target_key": "small/p.jpg", "height": 10},
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["key"], body["format"], body["width"], body["height"]) == (
        "small/p.jpg",
        "jpeg",
        20,
        10,
    )
    stored = api.get(f"/buckets/{bucket}/objects/small/p.jpg")
    assert MAGIC["jpeg"](stored.content) and stored.headers["Content-Type"] == "image/jpeg"
    default = api.post("/images/optimize", json={"bucket": bucket, "key": "photo"})
    assert default.status_code == 201 and default.json()["key"] == "photo.optimized.jpg"


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"width": "0"},
        {"width": "-5"},
        {"width": "abc"},
        {"width": "1.5"},
        {"width": ""},
        {"width": "65537"},
        {"height": "0"},
        {"height": "9" * 30},
        {"quality": "0"},
        {"quality": "101"},
        {"quality": "high"},
        {"fit": "crop", "width": "10", "height": "10"},
        {"format": "gif"},
        {"format": ""},
        {"enlarge": "maybe"},
    ],
)
def test_bad_query_parameters_are_invalid_argument(
    api: httpx.Client, striped: str, params: dict[str, str]
) -> None:
    assert_error(get_image(api, striped, "s.png", **params), 400, "InvalidArgument")


@pytest.mark.parametrize(
    "extra",
    [
        {"width": "10"},
        {"width": 10.5},
        {"width": True},
        {"width": 0},
        {"height": 65537},
        {"quality": 0},
        {"quality": "80"},
        {"fit": "crop"},
        {"fit": 3},
        {"format": "bmp"},
        {"enlarge": "yes"},
        {"target_key": 7},
    ],
)
def test_bad_optimize_fields_are_invalid_argument(
    api: httpx.Client, striped: str, extra: dict[str, object]
) -> None:
    response = api.post("/images/optimize", json={"bucket": striped, "key": "s.png", **extra})
    assert_error(response, 400, "InvalidArgument")
    listed = api.get(f"/buckets/{striped}/objects").json()["objects"]
    assert [item["key"] for item in listed] == ["s.png"]


def test_optimize_refuses_missing_names_and_bad_json(api: httpx.Client, striped: str) -> None:
    assert_error(api.post("/images/optimize", json={"bucket": striped}), 400, "InvalidArgument")
    assert_error(api.post("/images/optimize", json={"key": "s.png"}), 400, "InvalidArgument")
    assert_error(api.post("/images/optimize", content=b"{nope"), 400, "MalformedJSON")
    bad_target = {"bucket": striped, "key": "s.png", "target_key": "bad\x00key"}
    assert_error(api.post("/images/optimize", json=bad_target), 400, "InvalidKey")


def test_an_output_over_the_webp_limit_is_invalid_argument(api: httpx.Client, bucket: str) -> None:
    put(api, bucket, "line.png", encode(Image.new("RGB", (100, 1), RED)))
    response = get_image(api, bucket, "line.png", width=17000, enlarge="true", format="webp")
    assert_error(response, 400, "InvalidArgument")


@pytest.mark.parametrize(
    "data", [b"plain text, not an image", b"", encode(stripes())[:60]], ids=["text", "empty", "cut"]
)
def test_undecodable_sources_are_unsupported_media_type(
    api: httpx.Client, bucket: str, data: bytes
) -> None:
    put(api, bucket, "not-image", data, "application/octet-stream")
    assert_error(get_image(api, bucket, "not-image", width=10), 415, "UnsupportedMediaType")
    optimize = api.post("/images/optimize", json={"bucket": bucket, "key": "not-image"})
    assert_error(optimize, 415, "UnsupportedMediaType")


def png_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid PNG header claiming ``width`` x ``height`` pixels, with a token IDAT."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


def test_pixel_bombs_are_refused_before_decoding(api: httpx.Client, bucket: str) -> None:
    bomb = png_bomb()
    assert len(bomb) < 200
    put(api, bucket, "bomb.png", bomb)
    assert_error(get_image(api, bucket, "bomb.png", width=10), 413, "EntityTooLarge")
    optimize = api.post("/images/optimize", json={"bucket": bucket, "key": "bomb.png"})
    assert_error(optimize, 413, "EntityTooLarge")
    # Just under the cap is decoded (and found to be truncated), so the cap is what refused.
    put(api, bucket, "under.png", png_bomb(5000, 5000))
    assert_error(get_image(api, bucket, "under.png", width=10), 415, "UnsupportedMediaType")


def test_an_enlarged_output_over_the_pixel_cap_is_refused(api: httpx.Client, striped: str) -> None:
    response = get_image(api, striped, "s.png", width=60000, enlarge="true")
    assert_error(response, 413, "EntityTooLarge")
    contain = get_image(api, striped, "s.png", width=60000, height=60000, fit="contain")
    assert_error(contain, 413, "EntityTooLarge")


def test_missing_bucket_and_key_are_not_found(api: httpx.Client, striped: str) -> None:
    assert_error(get_image(api, "no-such-bucket-here", "s.png"), 404, "NoSuchBucket")
    assert_error(get_image(api, striped, "missing.png"), 404, "NoSuchKey")
    optimize = api.post("/images/optimize", json={"bucket": "no-such-bucket-here", "key": "k"})
    assert_error(optimize, 404, "NoSuchBucket")
    optimize = api.post("/images/optimize", json={"bucket": striped, "key": "missing.png"})
    assert_error(optimize, 404, "NoSuchKey")


def test_head_is_not_allowed(api: httpx.Client, striped: str) -> None:
    response = api.head(f"/buckets/{striped}/images/s.png")
    assert response.status_code == 405


def test_another_user_is_denied(server: ServerProcess, api: httpx.Client, striped: str) -> None:
    stranger = create_account(api, prefix="img-stranger")
    with stranger.client(server) as client:
        assert_error(get_image(client, striped, "s.png", width=10), 403, "AccessDenied")
        request = {"bucket": striped, "key": "s.png", "target_key": "stolen.png"}
        assert_error(client.post("/images/optimize", json=request), 403, "AccessDenied")
    assert_error(api.get(f"/buckets/{striped}/objects/stolen.png"), 404, "NoSuchKey")
    owner = create_account(api, prefix="img-owner")
    with owner.client(server) as client:
        own = f"{striped}-own"
        assert client.post("/buckets", json={"name": own}).status_code == 201
        put(client, own, "mine.png", encode(stripes()))
        assert decoded(get_image(client, own, "mine.png", width=10)).size == (10, 5)
