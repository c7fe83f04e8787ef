"""Parameters of thumbnail and packaging requests: parsed, checked, defaulted. Pure.

A request body is a JSON object; each parser reads the fields it knows, raises
``VideoParamsError`` (400 InvalidArgument) naming the first field that is wrong, and
ignores fields it does not know (the contract may add some). Bucket and key names are only
checked to be strings here: their own rules (and 404s) belong to the object layer.

Defaults, where the contract is silent (docs/media.md "Videos"):

- thumbnail: ``at_seconds`` 1.0, ``format`` jpeg, ``quality`` 80, ``width`` the source's;
- job: ``segment_seconds`` 4, ``hls_segment_type`` mpegts, ``renditions`` None, meaning one
  rendition at the source's height; a rendition without ``video_bitrate_kbps`` gets
  ``default_bitrate_kbps(height)``.

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from service.common.names import key_problem
from service.media.video_errors import VideoParamsError

THUMBNAIL_FORMATS = ("jpeg", "webp")
PACKAGING_FORMATS = ("hls", "dash")
HLS_SEGMENT_TYPES = ("mpegts", "fmp4")
MAX_THUMBNAIL_WIDTH = 8192
MAX_AT_SECONDS = 1e7
MIN_SEGMENT_SECONDS = 1.0
MAX_SEGMENT_SECONDS = 60.0
MAX_RENDITIONS = 6
MIN_HEIGHT, MAX_HEIGHT = 16, 4320
MIN_BITRATE_KBPS, MAX_BITRATE_KBPS = 50, 100_000
MAX_PREFIX_BYTES = 960
"""An output prefix leaves room for the longest name a job writes under it (1024-byte keys)."""
RENDITION_FIELDS = frozenset({"height", "video_bitrate_kbps"})


@dataclass(frozen=True, slots=True)
class ThumbnailParams:
    bucket: str
    key: str
    at_seconds: float = 1.0
    width: int | None = None
    format: str = "jpeg"
    quality: int = 80
    target_key: str | None = None

    @property
    def extension(self) -> str:
        return "jpg" if self.format == "jpeg" else "webp"

    @property
    def content_type(self) -> str:
        return f"image/{self.format}"

    def default_target_key(self) -> str:
        """``<key>.thumb.jpg`` (or ``.webp``): next to its video, one per format."""
        return f"{self.key}.thumb.{self.extension}"


@dataclass(frozen=True, slots=True)
class Rendition:
    """One output quality: a height (the width follows the source's aspect) and a bitrate."""

    height: int
    video_bitrate_kbps: int


@dataclass(frozen=True, slots=True)
class JobParams:
    """What a packaging job was asked to do; ``renditions`` None means the source height."""

    formats: tuple[str, ...]
    renditions: tuple[Rendition, ...] | None = None
    segment_seconds: float = 4.0
    hls_segment_type: str = "mpegts"

    def to_document(self) -> dict[str, Any]:
        """The journaled (and rendered) form: plain JSON/msgpack values."""
        return {
            "formats": list(self.formats),
            "renditions": None
            if self.renditions is None
            else [
                {"height": r.height, "video_bitrate_kbps": r.video_bitrate_kbps}
                for r in self.renditions
            ],
            "segment_seconds": self.segment_seconds,
            "hls_segment_type": self.hls_segment_type,
        }

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> JobParams:
        """Back from ``to_document`` (a journaled job); raises VideoParamsError if damaged."""
        return parse_job_params(doc)


def default_bitrate_kbps(height: int) -> int:
    """About 0.07 bits per pixel at 30 frames/s of a 16:9 picture, at least 150 kbit/s.

    >>> default_bitrate_kbps(1080), default_bitrate_kbps(720), default_bitrate_kbps(48)
    (4354, 1935, 150)
    """
    width = height * 16 / 9
    return max(150, int(width * height * 30 * 0.07 / 1000))


def _string(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise VideoParamsError(f"{name} must be a non-empty string")
    return value


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise VideoParamsError(f"{name} must be an integer from {low} to {high}")
    return value


def _number(value: Any, name: str, low: float, high: float) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise VideoParamsError(f"{name} must be a number from {low:g} to {high:g}")
    return float(value)


def _or(body: Mapping[str, Any], name: str, default: Any) -> Any:
    """``body[name]``, or ``default`` when it is absent or null."""
    value = body.get(name)
    return default if value is None else value


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise VideoParamsError(f"{name} must be one of {', '.join(choices)}")
    return str(value)


def parse_thumbnail_params(body: Mapping[str, Any]) -> ThumbnailParams:
    """The thumbnail request in ``body``; raises VideoParamsError."""
    width = body.get("width")
    quality = body.get("quality")
    target_key = body.get("target_key")
    if target_key is not None and (not isinstance(target_key, str) or not target_key):
        raise VideoParamsError("target_key must be a non-empty string")
    at_seconds = body.get("at_seconds")
    return ThumbnailParams(
        bucket=_string(body, "bucket"),
        key=_string(body, "key"),
        at_seconds=1.0
        if at_seconds is None
        else _number(at_seconds, "at_seconds", 0.0, MAX_AT_SECONDS),
        width=None if width is None else _integer(width, "width", 1, MAX_THUMBNAIL_WIDTH),
        format=_choice(_or(body, "format", "jpeg"), "format", THUMBNAIL_FORMATS),
        quality=80 if quality is None else _integer(quality, "quality", 1, 100),
        target_key=target_key,
    )


def _formats(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise VideoParamsError('formats must be a non-empty list such as ["hls", "dash"]')
    formats = tuple(_choice(item, "formats[]", PACKAGING_FORMATS) for item in value)
    if len(set(formats)) != len(formats):
        raise VideoParamsError("formats must not repeat a format")
    return formats


def _rendition(value: Any, index: int) -> Rendition:
    name = f"renditions[{index}]"
    if not isinstance(value, Mapping):
        raise VideoParamsError(f"{name} must be an object with height and video_bitrate_kbps")
    unknown = set(value) - RENDITION_FIELDS
    if unknown:
        raise VideoParamsError(f"{name} has unknown fields: {', '.join(sorted(map(str, unknown)))}")
    height = _integer(value.get("height"), f"{name}.height", MIN_HEIGHT, MAX_HEIGHT)
    bitrate = value.get("video_bitrate_kbps")
    return Rendition(
        height=height,
        video_bitrate_kbps=default_bitrate_kbps(height)
        if bitrate is None
        else _integer(bitrate, f"{name}.video_bitrate_kbps", MIN_BITRATE_KBPS, MAX_BITRATE_KBPS),
    )


def _renditions(value: Any) -> tuple[Rendition, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_RENDITIONS:
        raise VideoParamsError(f"renditions must be a list of 1 to {MAX_RENDITIONS} objects")
    renditions = tuple(_rendition(item, index) for index, item in enumerate(value))
    if len({r.height for r in renditions}) != len(renditions):
        raise VideoParamsError("renditions must have different heights")
    return renditions


def parse_job_params(body: Mapping[str, Any]) -> JobParams:
    """The packaging parameters in ``body`` (not bucket, key or prefix); raises
    VideoParamsError."""
    segment_seconds = body.get("segment_seconds")
    return JobParams(
        formats=_formats(body.get("formats")),
        renditions=_renditions(body.get("renditions")),
        segment_seconds=4.0
        if segment_seconds is None
        else _number(segment_seconds, "segment_seconds", MIN_SEGMENT_SECONDS, MAX_SEGMENT_SECONDS),
        hls_segment_type=_choice(
            _or(body, "hls_segment_type", "mpegts"), "hls_segment_type", HLS_SEGMENT_TYPES
        ),
    )


def parse_output_prefix(value: Any) -> str | None:
    """A client's ``output_prefix`` with a trailing ``/`` added; None when absent."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise VideoParamsError("output_prefix must be a non-empty string")
    prefix = value if value.endswith("/") else value + "/"
    problem = key_problem(prefix)
    if problem is not None:
        raise VideoParamsError(f"output_prefix: {problem}")
    if len(prefix.encode("utf-8")) > MAX_PREFIX_BYTES:
        raise VideoParamsError(f"output_prefix must be at most {MAX_PREFIX_BYTES} bytes")
    return prefix
