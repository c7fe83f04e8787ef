"""Unit tests of the image modules without a server: parameters, geometry, the transform's
decode paths, and the variant cache on a simulated file system (including power loss)."""

from __future__ import annotations

import doctest
import errno
import io
from typing import Any

import pytest
from PIL import Image

import service.http.image_handlers as http_images
from fsseam.simfs import CRASH_MODES, ManualClock, SimFileSystem
from service.media import image_params, images
from service.media.image_cache import CachedVariant, ImageCache, variant_key
from service.media.image_params import ImageParameterError, ImageParams, parse_json, parse_query
from service.media.images import ImageTooLargeError, UndecodableImageError, render

BLUE, RED, GREEN = (20, 20, 220), (220, 20, 20), (20, 200, 20)
CACHE = "/data/cache/images"


def encode(image: Image.Image, fmt: str = "PNG", **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def stripes(width: int, height: int) -> Image.Image:
    image = Image.new("RGB", (width, height), RED)
    image.paste(BLUE, (0, 0, width // 4, height))
    image.paste(GREEN, (width - width // 4, 0, width, height))
    return image


def near(pixel: Any, colour: tuple[int, ...], tolerance: int = 40) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour, strict=False))


@pytest.mark.parametrize("module", [images, image_params, http_images])
def test_doctests_pass(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# -- parameters -----------------------------------------------------------------------------


def test_query_and_json_give_the_same_parameters() -> None:
    from_query = parse_query(
        {
            "width": "10",
            "height": "20",
            "fit": "Cover",
            "format": "JPG",
            "quality": "70",
            "enlarge": "1",
            "v": "cache-buster",
        }
    )
    from_json = parse_json(
        {
            "width": 10,
            "height": 20,
            "fit": "cover",
            "format": "jpeg",
            "quality": 70,
            "enlarge": True,
            "bucket": "b",
            "key": "k",
        }
    )
    assert from_query == from_json == ImageParams(10, 20, "cover", "jpeg", 70, True)
    assert parse_json({"width": None, "fit": None}) == ImageParams()


def test_the_cache_token_is_canonical() -> None:
    one_side = parse_query({"width": "10", "fit": "cover"})
    assert one_side.cache_token() == parse_query({"width": "10"}).cache_token()
    png = parse_query({"format": "png", "quality": "10"})
    assert png.cache_token() == parse_query({"format": "png"}).cache_token()
    jpeg = parse_query({"format": "jpeg", "quality": "10"})
    assert jpeg.cache_token() != parse_query({"format": "jpeg"}).cache_token()
    assert variant_key("a" * 64, jpeg) != variant_key("b" * 64, jpeg)


def test_a_format_pillow_cannot_write_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_params.features, "check", lambda name: False)
    with pytest.raises(ImageParameterError, match="cannot encode avif"):
        parse_query({"format": "avif"})
    assert parse_query({"format": "jpeg"}).format == "jpeg"


@pytest.mark.parametrize(
    ("source", "params", "size"),
    [
        ((40, 20), ImageParams(width=10, height=10, fit="fill"), (10, 10)),
        ((40, 20), ImageParams(width=100, height=10, fit="fill"), (40, 4)),
        ((40, 20), ImageParams(width=100, height=10, fit="cover"), (40, 4)),
        ((40, 20), ImageParams(width=30, height=30, fit="contain"), (30, 30)),
        ((3, 1000), ImageParams(width=1), (1, 333)),
        ((1000, 3), ImageParams(width=10), (10, 1)),  # never below one pixel
    ],
)
def test_plan_geometry(source: tuple[int, int], params: ImageParams, size: tuple[int, int]) -> None:
    geometry = images.plan_geometry(*source, params)
    assert (geometry.width, geometry.height) == size
    left, top, right, bottom = geometry.region
    assert 0 <= left < right <= source[0] and 0 <= top < bottom <= source[1]


# -- the transform --------------------------------------------------------------------------


def test_a_large_jpeg_is_drafted_and_still_cropped_right() -> None:
    source = encode(stripes(2400, 1600), "JPEG", quality=90)
    cover = render(source, ImageParams(width=100, height=100, fit="cover"), max_pixels=10**8)
    picture = Image.open(io.BytesIO(cover.data)).convert("RGB")
    assert picture.size == (100, 100)
    # The centred 1600x1600 crop: blue for its first eighth, green for its last.
    assert near(picture.getpixel((3, 50)), BLUE)
    assert near(picture.getpixel((50, 50)), RED)
    assert near(picture.getpixel((96, 50)), GREEN)


def test_a_turned_jpeg_is_drafted_along_its_upright_axes() -> None:
    source = stripes(2400, 1600)
    exif = source.getexif()
    exif[0x0112] = 6
    data = encode(source, "JPEG", exif=exif.tobytes())
    result = render(data, ImageParams(width=100), max_pixels=10**8)
    picture = Image.open(io.BytesIO(result.data)).convert("RGB")
    assert (result.width, result.height) == picture.size == (100, 150)
    assert near(picture.getpixel((50, 5)), BLUE) and near(picture.getpixel((50, 145)), GREEN)


def test_a_source_file_is_read_through_a_seam_file() -> None:
    fs = SimFileSystem()
    fs.write_bytes("/p/image.png", encode(stripes(40, 20)))
    source = fs.open_read("/p/image.png")
    result = render(source, ImageParams(width=20, format="webp"), max_pixels=10**6)
    assert (result.format, result.width, result.height) == ("webp", 20, 10)


class FailingFile:
    """A source file whose reads fail, as a disk with a bad sector does."""

    def read(self, size: int = -1) -> bytes:
        raise OSError(errno.EIO, "I/O error")

    def seek(self, offset: int) -> None:
        return None

    def size(self) -> int:
        return 1000


def test_a_failing_source_file_is_an_os_error_not_an_undecodable_image() -> None:
    with pytest.raises(OSError) as caught:
        render(FailingFile(), ImageParams(), max_pixels=10**6)
    assert not isinstance(caught.value, images.ImageError)
    assert caught.value.errno == errno.EIO


def test_undecodable_and_oversized_sources() -> None:
    with pytest.raises(UndecodableImageError):
        render(b"%!PS-Adobe-3.0 EPSF-3.0\n", ImageParams(), max_pixels=10**6)
    with pytest.raises(ImageTooLargeError):
        render(encode(stripes(200, 100)), ImageParams(), max_pixels=19_999)
    assert render(encode(stripes(200, 100)), ImageParams(), max_pixels=20_000).width == 200


# -- the cache ------------------------------------------------------------------------------


def variant(key: str, size: int = 10) -> CachedVariant:
    return CachedVariant(key * 64, "0" * 64, 1, 1, "png", size)


def test_the_index_evicts_the_least_recently_used() -> None:
    cache = ImageCache(SimFileSystem(), CACHE, max_bytes=30)
    for key in "abc":
        assert cache.admit(variant(key)) == []
    assert cache.lookup("a" * 64) is not None  # a is now the most recently used
    assert cache.admit(variant("d")) == [variant("b")]
    assert cache.total_bytes == 30 and len(cache) == 3
    assert cache.lookup("b" * 64) is None
    cache.forget("a" * 64)
    assert cache.total_bytes == 20
    assert cache.keeps(7) and not cache.keeps(8)  # a quarter of the bound at most


def write(cache: ImageCache, data: bytes, key: str = "a" * 64) -> CachedVariant:
    import hashlib

    return cache.write(key, data, hashlib.sha256(data).hexdigest(), 2, 3, "png")


def test_write_read_and_rebuild_the_index_from_the_files() -> None:
    clock = ManualClock()
    fs = SimFileSystem(clock=clock)
    cache = ImageCache(fs, CACHE, max_bytes=1000)
    first = write(cache, b"first", "a" * 64)
    clock.advance(5)
    second = write(cache, b"second", "b" * 64)
    fs.write_bytes(f"{CACHE}/.{'c' * 64}.0badf00d.tmp", b"left by a crash")
    fs.write_bytes(f"{CACHE}/unrelated.txt", b"not ours")
    assert cache.read(first) == b"first" and cache.read(second) == b"second"
    rebuilt = ImageCache(fs, CACHE, max_bytes=1000)
    assert rebuilt.load(rebuilt.scan()) == []
    assert rebuilt.lookup("a" * 64) == first and rebuilt.total_bytes == 11
    assert not any(name.endswith(".tmp") for name in fs.listdir(CACHE))
    assert "unrelated.txt" in fs.listdir(CACHE)
    # Over a smaller bound, the oldest file goes first.
    small = ImageCache(fs, CACHE, max_bytes=8)
    assert small.load(small.scan()) == [first]


def test_a_damaged_or_missing_file_reads_as_none() -> None:
    fs = SimFileSystem()
    cache = ImageCache(fs, CACHE, max_bytes=1000)
    entry = write(cache, b"picture bytes")
    fs.write_bytes(f"{CACHE}/{entry.filename}", b"picture byteZ")
    assert cache.read(entry) is None
    assert entry.filename not in fs.listdir(CACHE)
    assert cache.read(entry) is None
    cache.remove([entry])  # already gone is fine


def test_a_deleted_cache_directory_is_recreated_by_the_next_write() -> None:
    fs = SimFileSystem()
    cache = ImageCache(fs, CACHE, max_bytes=1000)
    entry = write(cache, b"one")
    fs.unlink(f"{CACHE}/{entry.filename}")
    fs.rmdir(CACHE)
    assert cache.scan() == []
    again = write(cache, b"one")
    assert cache.read(again) == b"one"


@pytest.mark.parametrize("mode", CRASH_MODES)
@pytest.mark.parametrize("seed", range(4))
def test_after_a_power_loss_a_variant_is_whole_or_absent(mode: Any, seed: int) -> None:
    fs = SimFileSystem()
    cache = ImageCache(fs, CACHE, max_bytes=10**6)
    data = bytes(range(256)) * 64
    write(cache, data)
    survivor = ImageCache(fs.crash_image(mode, seed), CACHE, max_bytes=10**6)
    for entry in survivor.scan():
        assert survivor.read(entry) in (None, data)


def test_a_png_whose_exif_follows_its_pixels_is_planned_upright() -> None:
    source = stripes(40, 20)
    exif = source.getexif()
    exif[0x0112] = 6
    data = encode(source, exif=exif.tobytes())
    chunks, offset = [], 8
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 4], "big")
        chunks.append(data[offset : offset + 12 + length])
        offset += 12 + length
    exif_chunk = next(chunk for chunk in chunks if chunk[4:8] == b"eXIf")
    others = [chunk for chunk in chunks if chunk[4:8] != b"eXIf"]
    late = data[:8] + b"".join(others[:-1]) + exif_chunk + others[-1]  # before IEND
    assert late.index(b"eXIf") > late.index(b"IDAT")
    result = render(late, ImageParams(width=10), max_pixels=10**6)
    assert (result.width, result.height) == (10, 20)
    with pytest.raises(ImageTooLargeError):
        render(late, ImageParams(width=1000, enlarge=True), max_pixels=1000 * 1999)
