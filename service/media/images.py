"""The image transform: plan the geometry, decode, encode (the parameters it takes are parsed
in ``service.media.image_params``).

Pure apart from Pillow: no HTTP, no engine, no files of its own. The source arrives as a
random-access file the caller opened (a payload, through the file-system seam) or as bytes;
the result is bytes in memory (``io.BytesIO``, the only reason this module imports ``io``).

Order of work, so that hostile input costs little: the header is read first and a source
over the pixel cap is refused before any pixel is decoded; the output geometry is planned
from the header too and refused when it is over the same cap or over the output format's
limits (a PNG whose eXIf chunk follows its pixels is planned again once decoded); only then
are pixels decoded (a JPEG at a reduced DCT scale when the output is much smaller). The
EXIF orientation is applied before anything else sees the pixels, and EXIF/XMP metadata is
not copied to the output (it may hold a location); an RGB source's ICC profile is kept so
colours stay right.

Semantics (docs/media.md "Images" is the user-facing page):

- One dimension given: the other follows the aspect ratio; ``fit`` does not matter.
- Both given: ``inside`` fits within the box keeping the aspect ratio, no padding;
  ``contain`` does the same and pads to exactly the box (transparent for PNG, WebP and
  AVIF, white for JPEG); ``cover`` fills the box and crops the overflow, centred; ``fill``
  stretches to the box.
- Never upscaled unless ``enlarge``: ``inside``/``contain`` keep the source's size at most
  (``contain`` still pads to the box); ``cover``/``fill`` shrink the box uniformly until it
  is no larger than the source in either dimension, so the output keeps the box's shape.

Thread-safety: functions are reentrant; ``render`` is meant for an executor thread (Pillow
releases the GIL for most of its decode, resize and encode work).
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from PIL import ExifTags, Image, ImageOps

from service.media.image_params import (
    ImageError,
    ImageFormat,
    ImageParameterError,
    ImageParams,
)
from service.media.seam_file import RandomAccessFile, SeamFileReader

CONTENT_TYPES: Mapping[ImageFormat, str] = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "avif": "image/avif",
}
ALPHA_FORMATS = frozenset({"png", "webp", "avif"})
"""Output formats with an alpha channel: ``contain`` pads them with transparency."""
MAX_SIDE: Mapping[ImageFormat, int] = {
    "jpeg": 65500,
    "png": 2**31 - 1,
    "webp": 16383,
    "avif": 65536,
}
"""The encoders' own limits on one side of the output."""
DEFAULT_QUALITY = 80
"""Quality of JPEG, WebP and AVIF output when the request names none (PNG is lossless)."""
PNG_COMPRESS_LEVEL = 6
DECODABLE = ("JPEG", "PNG", "WEBP", "AVIF", "GIF", "BMP", "TIFF")
"""Pillow decoders a source may use (JPEG covers camera MPO files); never the exotic ones
(EPS would run Ghostscript)."""
_SOURCE_DEFAULT: Mapping[str, ImageFormat] = {
    "JPEG": "jpeg",
    "MPO": "jpeg",
    "PNG": "png",
    "WEBP": "webp",
    "AVIF": "avif",
}
"""Output format when the request names none; any other source (GIF, BMP, TIFF) gives PNG."""
_SWAPS_AXES = frozenset({5, 6, 7, 8})
"""EXIF orientations that turn the image by 90 degrees."""
_DRAFT_GAP = 2.0
"""A JPEG is decoded at a reduced scale only down to twice the output size (quality)."""
_WHITE = (255, 255, 255)
_TRANSPARENT = (0, 0, 0, 0)


class UndecodableImageError(ImageError):
    """The source is not an image this server decodes (415 UnsupportedMediaType)."""


class ImageTooLargeError(ImageError):
    """The source or the output is over the pixel cap, or the source file is too big to be a
    picture of allowed dimensions (413 EntityTooLarge)."""


def source_bytes_limit(max_pixels: int) -> int:
    """The largest source file worth opening: 8 bytes a pixel (16-bit RGBA, uncompressed)
    plus 1 MiB of metadata. Anything bigger cannot be a picture within the pixel cap, and
    some decoders (WebP, AVIF) read the whole file into memory before the header check."""
    return max_pixels * 8 + 1024 * 1024


def configure_pillow(max_pixels: int) -> None:
    """Make Pillow's own bomb check agree with ours (it raises at twice this, warns above it;
    ``render`` refuses above it before decoding either way). Process-wide: call once."""
    Image.MAX_IMAGE_PIXELS = max_pixels


# -- geometry -----------------------------------------------------------------------------


Box = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class Geometry:
    """Where the pixels go: the source ``region`` (oriented source pixels, left, top, right,
    bottom) is resized to ``scaled`` and placed at ``offset`` on a ``width`` x ``height``
    canvas (bigger than ``scaled`` only for ``contain``)."""

    width: int
    height: int
    region: Box
    scaled: tuple[int, int]
    offset: tuple[int, int] = (0, 0)

    @property
    def padded(self) -> bool:
        return self.scaled != (self.width, self.height)


def plan_geometry(source_width: int, source_height: int, params: ImageParams) -> Geometry:
    """The output geometry for a source of the given (oriented) size.

    >>> plan_geometry(40, 20, ImageParams(width=10))
    Geometry(width=10, height=5, region=(0.0, 0.0, 40.0, 20.0), scaled=(10, 5), offset=(0, 0))
    >>> plan_geometry(40, 20, ImageParams(width=10, height=10, fit="cover")).region
    (10.0, 0.0, 30.0, 20.0)
    >>> plan_geometry(40, 20, ImageParams(width=10, height=10, fit="contain")).offset
    (0, 2)
    >>> plan_geometry(40, 20, ImageParams(width=80, height=80, fit="fill")).scaled
    (20, 20)
    """
    w, h = source_width, source_height
    whole: Box = (0.0, 0.0, float(w), float(h))
    want_w, want_h = params.width, params.height
    if want_w is None and want_h is None:
        return Geometry(w, h, whole, (w, h))
    if want_w is None or want_h is None:
        scale = want_w / w if want_w is not None else cast(int, want_h) / h
        scale = scale if params.enlarge else min(scale, 1.0)
        size = (_px(w * scale), _px(h * scale))
        return Geometry(*size, whole, size)
    if params.fit in ("inside", "contain"):
        scale = min(want_w / w, want_h / h)
        scale = scale if params.enlarge else min(scale, 1.0)
        size = (min(want_w, _px(w * scale)), min(want_h, _px(h * scale)))
        if params.fit == "inside":
            return Geometry(*size, whole, size)
        offset = ((want_w - size[0]) // 2, (want_h - size[1]) // 2)
        return Geometry(want_w, want_h, whole, size, offset)
    # cover and fill: without enlarge, shrink the box uniformly to fit within the source.
    shrink = 1.0 if params.enlarge else min(1.0, w / want_w, h / want_h)
    box_w, box_h = _px(want_w * shrink), _px(want_h * shrink)
    if params.fit == "fill":
        return Geometry(box_w, box_h, whole, (box_w, box_h))
    scale = max(box_w / w, box_h / h)
    region_w, region_h = min(w, box_w / scale), min(h, box_h / scale)
    left, top = (w - region_w) / 2, (h - region_h) / 2
    return Geometry(box_w, box_h, (left, top, left + region_w, top + region_h), (box_w, box_h))


def _px(value: float) -> int:
    """A pixel count: rounded half up, at least 1."""
    return max(1, math.floor(value + 0.5))


def check_output(geometry: Geometry, image_format: ImageFormat, max_pixels: int) -> None:
    """Refuse an output over the pixel cap (it would be allocated whole) or the encoder's
    limits, before anything is decoded."""
    if geometry.width * geometry.height > max_pixels:
        raise ImageTooLargeError(
            f"the output would be {geometry.width}x{geometry.height} pixels, over the limit "
            f"of {max_pixels}"
        )
    side = MAX_SIDE[image_format]
    if max(geometry.width, geometry.height) > side:
        raise ImageParameterError(
            f"{image_format} output is limited to {side} pixels a side; "
            f"{geometry.width}x{geometry.height} was asked for"
        )


# -- the transform ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RenderedImage:
    """A transform's output."""

    data: bytes
    format: ImageFormat
    width: int
    height: int

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.format]


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """What a source's header says: enough to plan the work and estimate its memory."""

    format: str
    width: int
    height: int
    mode: str
    orientation: int


def probe(source: RandomAccessFile, max_pixels: int) -> SourceInfo:
    """Read only the header of ``source``; the same refusals as ``render`` makes before it
    decodes (over the pixel cap, undecodable). Blocking but cheap: a few KiB are read."""
    reader = SeamFileReader(source)
    fp: Any = reader
    with _decoding(reader):
        image = Image.open(fp, formats=DECODABLE)
    with image:
        width, height = image.size
        if width * height > max_pixels:
            raise ImageTooLargeError(
                f"the image is {width}x{height} pixels, over the limit of {max_pixels}"
            )
        with _decoding(reader):
            orientation = _orientation(image)
        return SourceInfo(image.format or "", width, height, image.mode, orientation)


def render(
    source: RandomAccessFile | bytes, params: ImageParams, *, max_pixels: int
) -> RenderedImage:
    """Transform ``source`` as ``params`` ask (blocking, CPU-bound: run on an executor).

    Raises ``ImageTooLargeError`` (source or output over ``max_pixels``, checked from the
    header before decoding), ``UndecodableImageError``, ``ImageParameterError`` (the output
    is over the format's limits), and ``OSError`` when the source file itself fails.
    """
    reader = None if isinstance(source, bytes) else SeamFileReader(source)
    fp: Any = io.BytesIO(source) if isinstance(source, bytes) else reader
    with _decoding(reader):
        image = Image.open(fp, formats=DECODABLE)
    with image:
        width, height = image.size
        if width * height > max_pixels:
            raise ImageTooLargeError(
                f"the image is {width}x{height} pixels, over the limit of {max_pixels}"
            )
        return _transform(image, reader, params, max_pixels)


def _transform(
    image: Image.Image, reader: SeamFileReader | None, params: ImageParams, max_pixels: int
) -> RenderedImage:
    output_format = params.format or _SOURCE_DEFAULT.get(image.format or "", "png")
    with _decoding(reader):
        orientation = _orientation(image)
    swapped = orientation in _SWAPS_AXES
    raw_width, raw_height = image.size
    width, height = (raw_height, raw_width) if swapped else (raw_width, raw_height)
    geometry = plan_geometry(width, height, params)
    check_output(geometry, output_format, max_pixels)
    icc_profile = image.info.get("icc_profile") if image.mode in ("RGB", "RGBA") else None
    with _decoding(reader):
        factor = _draft(image, geometry)
        image.load()
        # In place: an upright image is not copied (a copy of 49 megapixels is ~200 MB).
        ImageOps.exif_transpose(image, in_place=True)
        oriented = image
    if oriented.size != (width, height) and factor == 1.0:
        # The orientation showed up only while decoding (a PNG's eXIf chunk after its pixels).
        geometry = plan_geometry(oriented.width, oriented.height, params)
        check_output(geometry, output_format, max_pixels)
    picture = _place(oriented, geometry, factor, output_format)
    data = _encode(picture, output_format, params.quality, icc_profile)
    return RenderedImage(data, output_format, picture.width, picture.height)


@contextlib.contextmanager
def _decoding(reader: SeamFileReader | None) -> Iterator[None]:
    """Turn whatever a decoder raises into ``UndecodableImageError``, except a failure of the
    source file itself, memory exhaustion, and Pillow's own pixel-bomb check."""
    try:
        yield
    except (ImageError, MemoryError):
        raise
    except Image.DecompressionBombError:
        raise ImageTooLargeError("the image is over the pixel limit") from None
    except Exception:
        if reader is not None and reader.failure is not None:
            raise reader.failure from None
        raise UndecodableImageError(
            "the object is not an image this server can decode "
            "(JPEG, PNG, WebP, AVIF, GIF, BMP or TIFF)"
        ) from None


def _orientation(image: Image.Image) -> int:
    """The EXIF orientation as the header states it (1 when absent or odd).

    A PNG's eXIf chunk may follow the pixels; Pillow would decode the whole image to look for
    it, so a PNG without one in its header counts as upright until it is decoded."""
    if image.format == "PNG" and "exif" not in image.info:
        return 1
    value = image.getexif().get(ExifTags.Base.Orientation, 1)
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _draft(image: Image.Image, geometry: Geometry) -> float:
    """Let a JPEG decode at 1/2, 1/4 or 1/8 scale when the output is that much smaller;
    return the scale of the decoded pixels relative to the header's size.

    The scale is the same on both axes, so it holds for the oriented image too."""
    if image.format not in ("JPEG", "MPO"):
        return 1.0
    left, top, right, bottom = geometry.region
    scale = max(geometry.scaled[0] / (right - left), geometry.scaled[1] / (bottom - top))
    if scale * _DRAFT_GAP >= 0.5:
        return 1.0
    raw_width, raw_height = image.size
    wanted = (
        max(1, math.ceil(raw_width * scale * _DRAFT_GAP)),
        max(1, math.ceil(raw_height * scale * _DRAFT_GAP)),
    )
    result = image.draft(None, wanted)
    if result is None:
        return 1.0
    return float(result[1][2]) / raw_width


def decoded_size(info: SourceInfo, geometry: Geometry) -> tuple[int, int]:
    """The size ``render`` decodes ``info``'s pixels at: a JPEG at the reduced DCT scale
    ``_draft`` would pick (1/2, 1/4 or 1/8), any other format whole."""
    if info.format not in ("JPEG", "MPO"):
        return info.width, info.height
    left, top, right, bottom = geometry.region
    scale = max(geometry.scaled[0] / (right - left), geometry.scaled[1] / (bottom - top))
    for divisor in (8, 4, 2):
        if scale * _DRAFT_GAP <= 1 / divisor:
            return math.ceil(info.width / divisor), math.ceil(info.height / divisor)
    return info.width, info.height


def _place(
    image: Image.Image, geometry: Geometry, factor: float, output_format: ImageFormat
) -> Image.Image:
    """Resize the region and place it on the canvas, in RGB or (with alpha) RGBA."""
    alpha = image.has_transparency_data
    mode = "RGBA" if alpha else "RGB"
    work = image if image.mode == mode else image.convert(mode)
    left, top, right, bottom = geometry.region
    box = (left * factor, top * factor, right * factor, bottom * factor)
    if box == (0.0, 0.0, float(work.width), float(work.height)) and geometry.scaled == work.size:
        resized = work
    else:
        resized = work.resize(geometry.scaled, Image.Resampling.LANCZOS, box=box, reducing_gap=3.0)
    if alpha and output_format not in ALPHA_FORMATS:
        resized = _flatten(resized)
    if not geometry.padded:
        return resized
    size = (geometry.width, geometry.height)
    if output_format in ALPHA_FORMATS:
        canvas = Image.new("RGBA", size, _TRANSPARENT)
    else:
        canvas = Image.new("RGB", size, _WHITE)
    canvas.paste(resized, geometry.offset)  # converted to the canvas's mode
    return canvas


def _flatten(image: Image.Image) -> Image.Image:
    """An RGBA image over white, as RGB (for formats without alpha)."""
    background = Image.new("RGB", image.size, _WHITE)
    background.paste(image, (0, 0), image)
    return background


def _encode(
    image: Image.Image, image_format: ImageFormat, quality: int | None, icc_profile: Any
) -> bytes:
    """The picture in ``image_format``; metadata other than the ICC profile is left out."""
    options: dict[str, Any] = {}
    if icc_profile:
        options["icc_profile"] = icc_profile
    if image_format == "png":
        options["compress_level"] = PNG_COMPRESS_LEVEL
    else:
        options["quality"] = DEFAULT_QUALITY if quality is None else quality
    if image_format == "jpeg":
        options["optimize"] = True
    sink = io.BytesIO()
    image.save(sink, format=image_format.upper(), **options)
    return sink.getvalue()
