"""Image parameters: what a transform request may ask, parsed and validated.

The query string of ``GET /buckets/{bucket}/images/{key}`` (``parse_query``) and the JSON
body of ``POST /images/optimize`` (``parse_json``) give one ``ImageParams``; a bad value is
``ImageParameterError`` (400 InvalidArgument at the HTTP edge). The formats and fits named
here are the contract's (docs/media.md "Images"); the transform itself is
``service.media.images``.

Pure apart from asking Pillow which encoders it has (``can_encode``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from PIL import features

from service.common.numbers import bounded_int

ImageFormat = Literal["jpeg", "png", "webp", "avif"]
Fit = Literal["cover", "contain", "fill", "inside"]

FORMATS: tuple[ImageFormat, ...] = ("jpeg", "png", "webp", "avif")
FITS: tuple[Fit, ...] = ("cover", "contain", "fill", "inside")
FORMAT_ALIASES: Mapping[str, ImageFormat] = {"jpg": "jpeg"}
EXTENSIONS: Mapping[ImageFormat, str] = {
    "jpeg": "jpg",
    "png": "png",
    "webp": "webp",
    "avif": "avif",
}
MAX_DIMENSION = 65536
"""Largest width or height a request may name (beyond it: InvalidArgument)."""
QUALITY_RANGE = (1, 100)
_QUERY_INT_MAX = 999_999_999
_TRUE, _FALSE = frozenset({"true", "1"}), frozenset({"false", "0"})


class ImageError(Exception):
    """Base of the image errors; the message is safe to show to the client."""


class ImageParameterError(ImageError):
    """A parameter is missing its proper shape or range (400 InvalidArgument)."""


@dataclass(frozen=True, slots=True)
class ImageParams:
    """A validated transform request. Build with ``parse_query`` or ``parse_json``."""

    width: int | None = None
    height: int | None = None
    fit: Fit = "inside"
    format: ImageFormat | None = None
    """None: the source's format (PNG for sources other than JPEG, PNG, WebP, AVIF)."""
    quality: int | None = None
    """None: ``DEFAULT_QUALITY``. Ignored for PNG."""
    enlarge: bool = False

    def cache_token(self) -> str:
        """These parameters in a canonical form: requests that give the same output from the
        same source give the same token (``fit`` is dropped unless both dimensions are set,
        ``quality`` for PNG, defaults are spelled out). Bump the ``v`` when the transform
        changes its output."""
        fit = self.fit if self.width is not None and self.height is not None else "inside"
        quality: int | str = self.quality if self.quality is not None else "default"
        if self.format == "png":
            quality = "-"
        return (
            f"v1;w={self.width or '-'};h={self.height or '-'};fit={fit};"
            f"fmt={self.format or 'source'};q={quality};enlarge={int(self.enlarge)}"
        )


def parse_query(arguments: Mapping[str, str]) -> ImageParams:
    """Parameters from a query string (``width=320&fit=cover``); unknown names are ignored
    (a cache-busting ``?v=3`` is common), a known name with a bad value is refused."""
    return _validated(
        width=_query_int(arguments, "width"),
        height=_query_int(arguments, "height"),
        fit=arguments.get("fit"),
        format=arguments.get("format"),
        quality=_query_int(arguments, "quality"),
        enlarge=_query_bool(arguments, "enlarge"),
    )


def parse_json(body: Mapping[str, Any]) -> ImageParams:
    """Parameters from a JSON body: integers are JSON integers, ``null`` means absent."""
    enlarge = body.get("enlarge")
    if enlarge is not None and not isinstance(enlarge, bool):
        raise ImageParameterError("enlarge must be true or false")
    return _validated(
        width=_json_int(body, "width"),
        height=_json_int(body, "height"),
        fit=_json_str(body, "fit"),
        format=_json_str(body, "format"),
        quality=_json_int(body, "quality"),
        enlarge=bool(enlarge),
    )


def _validated(
    *,
    width: int | None,
    height: int | None,
    fit: str | None,
    format: str | None,
    quality: int | None,
    enlarge: bool,
) -> ImageParams:
    for name, value in (("width", width), ("height", height)):
        if value is not None and not 1 <= value <= MAX_DIMENSION:
            raise ImageParameterError(f"{name} must be an integer from 1 to {MAX_DIMENSION}")
    low, high = QUALITY_RANGE
    if quality is not None and not low <= quality <= high:
        raise ImageParameterError(f"quality must be an integer from {low} to {high}")
    fit_value = (fit or "inside").lower()
    if fit_value not in FITS:
        raise ImageParameterError(f"fit must be one of {', '.join(FITS)}")
    format_value = None if format is None else FORMAT_ALIASES.get(format.lower(), format.lower())
    if format_value is not None:
        if format_value not in FORMATS:
            raise ImageParameterError(f"format must be one of {', '.join(FORMATS)}")
        if not can_encode(format_value):
            raise ImageParameterError(
                f"this server cannot encode {format_value} (its Pillow lacks the codec)"
            )
    return ImageParams(
        width=width,
        height=height,
        fit=fit_value,
        format=format_value,
        quality=quality,
        enlarge=enlarge,
    )


def _query_int(arguments: Mapping[str, str], name: str) -> int | None:
    raw = arguments.get(name)
    if raw is None:
        return None
    value = bounded_int(raw, 0, _QUERY_INT_MAX)
    if value is None:
        raise ImageParameterError(f"{name} must be a positive integer, not {raw[:20]!r}")
    return value


def _query_bool(arguments: Mapping[str, str], name: str) -> bool:
    raw = arguments.get(name)
    if raw is None:
        return False
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImageParameterError(f"{name} must be true or false, not {raw[:20]!r}")


def _json_int(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ImageParameterError(f"{name} must be an integer")
    return value


def _json_str(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ImageParameterError(f"{name} must be a string")
    return value


def default_target_key(source_key: str, image_format: ImageFormat) -> str:
    """Where ``optimize`` stores its result when the request names no ``target_key``: next to
    the source, its extension replaced by ``.optimized.<ext>``.

    >>> default_target_key("photos/cat.jpg", "webp")
    'photos/cat.optimized.webp'
    >>> default_target_key("scan", "jpeg")
    'scan.optimized.jpg'
    """
    folder, slash, name = source_key.rpartition("/")
    stem, dot, _ = name.rpartition(".")
    if not dot or not stem:
        stem = name
    return f"{folder}{slash}{stem}.optimized.{EXTENSIONS[image_format]}"


def can_encode(image_format: ImageFormat) -> bool:
    """Whether this Pillow build writes ``image_format`` (AVIF and WebP are optional)."""
    if image_format in ("avif", "webp"):
        return bool(features.check(image_format))
    return True
