"""One still picture of a stored video: seek, decode one frame, scale, encode, store.

``render_thumbnail`` is the blocking part and runs on the engine's executor (a thumbnail
decodes a handful of frames, not a whole video), at most ``concurrency`` at once so
decoding never takes every executor thread from the payload I/O. The payload is read
through the file-system seam (``SeamFileReader`` gives PyAV the ``read``/``seek``/``tell`` it
wants over a seam file), so nothing here opens a path. ``ThumbnailMaker.make`` is the async
glue: find the source, render, store the result as an object with the normal PUT path.

Decisions where the contract is silent (docs/media.md "Videos"):

- ``at_seconds`` past the end is clamped: the last frame of the video is used.
- The picture is never enlarged: a ``width`` above the source's (display) width gives that
  width. The height follows the display aspect ratio (at least 1 pixel).
- A frame larger than ``max_pixels`` (``SERVICE_IMAGE_MAX_PIXELS``) is refused before it is
  decoded (VideoTooLargeError, 413), as the image endpoints do.
- The result goes to ``target_key``, by default ``<key>.thumb.jpg`` (``.webp``), replacing
  an earlier thumbnail there; it is stored as ``image/jpeg`` or ``image/webp``.

Thread-safety: ``render_thumbnail`` shares nothing (one call per thread);
``ThumbnailMaker`` lives on the event-loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import IO, cast

import av
from av.container import InputContainer
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from PIL import Image

from service.engine.core import Engine
from service.media.seam_file import RandomAccessFile, SeamFileReader
from service.media.video_errors import UndecodableVideoError
from service.media.video_input import describe, open_video
from service.media.video_package import duration_seconds, first_video_stream
from service.media.video_params import ThumbnailParams
from service.meta import ObjectVersion
from service.ops.objects import PutIntent, require_key, resolve_version, store_server_made


class _Sink:
    """Where Pillow writes the encoded picture: chunks kept in memory."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass


def _decode_from(
    container: InputContainer, stream: VideoStream, target: float
) -> VideoFrame | None:
    """The first frame at or after ``target`` seconds, else the last one decoded."""
    last: VideoFrame | None = None
    for frame in container.decode(stream):
        if frame.time is not None and frame.time >= target - 0.001:
            return frame
        last = frame
    return last


def _start(container: InputContainer, stream: VideoStream) -> float:
    """Where the video's timeline starts (an MPEG-TS cut from a stream rarely starts at 0)."""
    if stream.start_time is not None and stream.time_base:
        return float(stream.start_time * stream.time_base)
    if container.start_time is not None:
        return container.start_time / av.time_base
    return 0.0


def _frame_at(container: InputContainer, stream: VideoStream, at_seconds: float) -> VideoFrame:
    duration = duration_seconds(container, stream)
    offset = at_seconds if duration is None else min(at_seconds, duration)
    target = _start(container, stream) + offset
    frame = None
    if offset > 0 and stream.time_base:
        # Lands on the keyframe at or before the target; decoding moves forward from it.
        container.seek(int(target / stream.time_base), stream=stream, backward=True)
        frame = _decode_from(container, stream, target)
    if frame is None:
        if offset > 0:
            container.seek(0, stream=stream, backward=True)  # the seek overshot: start over
        frame = _decode_from(container, stream, target)
    if frame is None:
        raise UndecodableVideoError("no frame of the video could be decoded")
    return frame


def _scaled(image: Image.Image, width: int | None, pixel_aspect: float) -> Image.Image:
    """At most ``width`` wide, square pixels, the source's display shape (a source with
    non-square pixels, say anamorphic DVD video, is widened to its display width first)."""
    display_width = max(1, round(image.width * pixel_aspect))
    target = display_width if width is None else min(width, display_width)
    height = max(1, round(image.height * target / display_width))
    if (target, height) == image.size:
        return image
    return image.resize((target, height), Image.Resampling.LANCZOS)


def _encode(image: Image.Image, params: ThumbnailParams) -> bytes:
    sink = _Sink()
    # Pillow writes into any object with ``write``; ``IO`` is only what its stubs expect.
    target = cast("IO[bytes]", sink)
    image.convert("RGB").save(target, format=params.format.upper(), quality=params.quality)
    return b"".join(sink.chunks)


def render_thumbnail(source: RandomAccessFile, params: ThumbnailParams, max_pixels: int) -> bytes:
    """The encoded thumbnail of the video in ``source``.

    Raises UndecodableVideoError (415) or VideoTooLargeError (413).
    """
    container = open_video(cast("IO[bytes]", SeamFileReader(source)))
    try:
        stream = first_video_stream(container, max_pixels)
        sar = stream.codec_context.sample_aspect_ratio
        pixel_aspect = float(sar) if sar is not None and sar > 0 else 1.0
        frame = _frame_at(container, stream, params.at_seconds)
        image = frame.to_image()  # type: ignore[no-untyped-call]
    except av.FFmpegError as exc:
        raise UndecodableVideoError(f"the video could not be decoded: {describe(exc)}") from None
    finally:
        container.close()
    return _encode(_scaled(image, params.width, pixel_aspect), params)


class ThumbnailMaker:
    """Thumbnails as an operation: at most ``concurrency`` rendered at once."""

    def __init__(self, engine: Engine, *, max_pixels: int, concurrency: int) -> None:
        self._engine = engine
        self._max_pixels = max_pixels
        self._slots = asyncio.Semaphore(max(1, concurrency))

    async def make(
        self, params: ThumbnailParams, custom_metadata: Mapping[str, str] | None = None
    ) -> ObjectVersion:
        """Render the thumbnail ``params`` ask for and store it; the stored object.

        404 for a missing source, 400 InvalidKey for a bad target key (checked before any
        decoding), 415/413 from ``render_thumbnail``.
        """
        engine = self._engine
        engine.ensure_writable()
        source = resolve_version(engine, params.bucket, params.key, None)
        target = params.target_key or params.default_target_key()
        require_key(target)
        async with self._slots:
            data = await engine.run_blocking(self._render, source, params)
        intent = PutIntent(
            bucket=params.bucket,
            key=target,
            content_type=params.content_type,
            custom_metadata=custom_metadata or {},
        )
        return await store_server_made(engine, intent, data)

    def _render(self, source: ObjectVersion, params: ThumbnailParams) -> bytes:
        assert source.payload_id is not None
        payload = self._engine.store.open_payload(source.payload_id)
        try:
            return render_thumbnail(payload, params, self._max_pixels)
        finally:
            payload.close()
