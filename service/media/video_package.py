"""Packaging one source video into HLS and/or DASH with FFmpeg's own muxers. Blocking.

Runs in the job worker process (``service.media.video_worker``), never in the server: it
decodes and encodes for as long as the video lasts and is cancelled by killing its process.

One decode pass. Each rendition is encoded once with libx264 (scaled to its height, the width
following the source's aspect ratio, both even); the source's first audio stream, if any, is
resampled once and encoded to AAC. The first output (HLS when asked for) owns the encoders;
the second gets streams copied from them once they are open (codec extradata included), and
every packet is muxed into both. In HLS each rendition is a self-contained variant (video and
its own AAC stream, so any player plays any variant); DASH has one video adaptation set with
every rendition and one audio adaptation set.

Timestamps: the outputs start at 0 (a source cut from a stream may start anywhere); audio
before the first video frame is dropped. Segments: keyframes (IDR) are forced at every
multiple of ``segment_seconds`` and scene-cut keyframes are off, so each segment of each
rendition starts with a keyframe at the same instant, and FFmpeg's muxers cut them aligned.
Rendition sizes: ``plan_rungs``.

Layout of ``out_dir`` (made by the caller, with ``hls/`` and ``dash/`` in it); every
playlist and manifest refers to the files next to it by relative names:

    hls/master.m3u8, hls/stream_<i>.m3u8, and hls/stream_<i>_<n>.ts
                     (fmp4: hls/stream_<i>_init.mp4 and hls/stream_<i>_<n>.m4s)
    dash/manifest.mpd, dash/init_<r>.m4s, dash/chunk_<r>_<n>.m4s

Thread-safety: one call per process (or thread); it shares nothing.
"""

from __future__ import annotations

import contextlib
import fractions
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import av
from av.audio.stream import AudioStream
from av.container import InputContainer, OutputContainer
from av.packet import Packet
from av.video.frame import PictureType
from av.video.stream import VideoStream

from service.media.video_errors import UndecodableVideoError, VideoError, VideoTooLargeError
from service.media.video_input import describe, open_video
from service.media.video_outputs import DASH_MANIFEST, HLS_MASTER, MASTERS
from service.media.video_params import Rendition, default_bitrate_kbps

AAC_RATES = (48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000)
AUDIO_BITRATE = 128_000
X264_PRESET = "veryfast"
PROGRESS_STEP = 0.01
DEFAULT_RATE = fractions.Fraction(25)
DEFAULT_TIME_BASE = fractions.Fraction(1, 90000)


@dataclass(frozen=True, slots=True)
class PackageRequest:
    """What to produce; ``renditions`` None means one at the source height."""

    formats: tuple[str, ...]
    renditions: tuple[Rendition, ...] | None
    segment_seconds: float
    hls_segment_type: str
    max_pixels: int


@dataclass(frozen=True, slots=True)
class Rung:
    """A rendition resolved against the source: exact even dimensions and a bitrate."""

    width: int
    height: int
    bitrate_kbps: int


def _even(value: float | fractions.Fraction) -> int:
    return max(2, round(value / 2) * 2)


def _even_below(value: int) -> int:
    return max(2, value // 2 * 2)


def plan_rungs(
    source_width: int,
    source_height: int,
    renditions: tuple[Rendition, ...] | None,
    *,
    pixel_aspect: fractions.Fraction = fractions.Fraction(1),
    same_aspect: bool = False,
) -> list[Rung]:
    """The renditions to encode, tallest first, with square pixels and the source's display
    aspect: never taller than the source (a taller one is encoded at the source's height),
    never two of the same height, both dimensions even.

    ``same_aspect`` (DASH with several renditions: FFmpeg's DASH muxer refuses renditions
    of different aspect ratios in one adaptation set) makes every rendition exactly the
    source's aspect simplified to a denominator of at most 16 (16:9, 4:3, 9:16...), the
    height then the nearest multiple of the step that allows (18 for 16:9, 6 for 4:3).

    >>> plan_rungs(64, 48, None)
    [Rung(width=64, height=48, bitrate_kbps=150)]
    >>> [r.height for r in plan_rungs(640, 360, (Rendition(720, 3000), Rendition(180, 300)))]
    [360, 180]
    >>> wanted = (Rendition(1080, 5000), Rendition(480, 1000))
    >>> [(r.width, r.height) for r in plan_rungs(1279, 719, wanted, same_aspect=True)]
    [(1248, 702), (864, 486)]
    """
    wanted = renditions or (Rendition(source_height, default_bitrate_kbps(source_height)),)
    display = fractions.Fraction(source_width, source_height) * pixel_aspect
    ratio = display.limit_denominator(16)
    step = 2 * ratio.denominator  # the smallest height whose width is a whole even number
    rungs: dict[int, Rung] = {}
    for rendition in sorted(wanted, key=lambda r: -r.height):
        if same_aspect and len(wanted) > 1:
            steps = max(1, round(min(rendition.height, source_height) / step))
            if steps * step > source_height:
                steps = max(1, source_height // step)
            height, width = steps * step, steps * 2 * ratio.numerator
        else:
            height = _even_below(min(rendition.height, source_height))
            width = _even(height * display)
        rungs.setdefault(height, Rung(width, height, rendition.video_bitrate_kbps))
    return list(rungs.values())


def first_video_stream(container: InputContainer, max_pixels: int) -> VideoStream:
    """The container's first video stream, refused (before any decoding) when there is none,
    it has no picture size, or its frames have more than ``max_pixels`` pixels."""
    if not container.streams.video:
        raise UndecodableVideoError("the source has no video stream")
    stream = container.streams.video[0]
    width, height = stream.codec_context.width, stream.codec_context.height
    if width <= 0 or height <= 0:
        raise UndecodableVideoError("the source's video stream has no picture size")
    if width * height > max_pixels:
        raise VideoTooLargeError(
            f"the video's frames have {width * height} pixels, more than the {max_pixels} allowed"
        )
    return stream


def _open_source(source: str) -> InputContainer:
    return open_video(source)


def _audio_layout(stream: AudioStream) -> str:
    return "mono" if stream.codec_context.layout.nb_channels == 1 else "stereo"


def _audio_rate(stream: AudioStream) -> int:
    rate = stream.codec_context.sample_rate or 48000
    return rate if rate in AAC_RATES else 48000


class _Outputs:
    """The output containers, their streams and the encoders, and muxing into all of them."""

    def __init__(
        self,
        out_dir: str,
        request: PackageRequest,
        rungs: list[Rung],
        video: VideoStream,
        audio: AudioStream | None,
    ) -> None:
        self.containers: list[OutputContainer] = []
        self.encoders: list[VideoStream] = []
        self.audio_encoders: list[AudioStream] = []
        self.owner: OutputContainer | None = None
        self.other: OutputContainer | None = None
        self.copies: dict[int, VideoStream | AudioStream] = {}
        """Owner stream index -> the stream of the other container its packets go to too."""
        rate = video.average_rate or video.guessed_rate or DEFAULT_RATE
        self.audio_rate = _audio_rate(audio) if audio is not None else 0
        self.audio_layout = _audio_layout(audio) if audio is not None else "stereo"
        formats = sorted(request.formats, key=("hls", "dash").index)
        try:
            owner = self._open(formats[0], out_dir, request, len(rungs), audio is not None)
            self.owner = owner
            for rung in rungs:
                self._add_video_encoder(owner, rung, rate, video, request)
                if audio is not None and (formats[0] == "hls" or not self.audio_encoders):
                    self._add_audio_encoder(owner)
            owner.start_encoding()
            if len(formats) > 1:
                other = self._open(formats[1], out_dir, request, len(rungs), audio is not None)
                self.other = other
                for stream in self.encoders:
                    self.copies[stream.index] = other.add_stream_from_template(stream)
                if self.audio_encoders:
                    first = self.audio_encoders[0]
                    self.copies[first.index] = other.add_stream_from_template(first)
                other.start_encoding()
        except BaseException:
            self.abort()
            raise

    def _open(
        self, kind: str, out_dir: str, request: PackageRequest, variants: int, has_audio: bool
    ) -> OutputContainer:
        segment = f"{request.segment_seconds:g}"
        if kind == "hls":
            extension = "ts" if request.hls_segment_type == "mpegts" else "m4s"
            options = {
                "hls_time": segment,
                "hls_playlist_type": "vod",
                "hls_segment_type": request.hls_segment_type,
                "hls_flags": "independent_segments",
                "master_pl_name": os.path.basename(HLS_MASTER),
                "hls_segment_filename": os.path.join(out_dir, "hls", f"stream_%v_%05d.{extension}"),
                "var_stream_map": " ".join(
                    f"v:{i},a:{i}" if has_audio else f"v:{i}" for i in range(variants)
                ),
            }
            if request.hls_segment_type == "fmp4":
                # FFmpeg expands %v in this name only when there are several variants.
                variant = "%v" if variants > 1 else "0"
                options["hls_fmp4_init_filename"] = f"stream_{variant}_init.mp4"
            path = os.path.join(out_dir, "hls", "stream_%v.m3u8")
        else:
            options = {
                "seg_duration": segment,
                "use_template": "1",
                "use_timeline": "1",
                "init_seg_name": "init_$RepresentationID$.m4s",
                "media_seg_name": "chunk_$RepresentationID$_$Number%05d$.m4s",
                "adaptation_sets": "id=0,streams=v id=1,streams=a"
                if has_audio
                else "id=0,streams=v",
            }
            path = os.path.join(out_dir, DASH_MANIFEST)
        container = av.open(path, "w", format=kind, options=options)
        self.containers.append(container)
        return container

    def _add_video_encoder(
        self,
        owner: OutputContainer,
        rung: Rung,
        rate: fractions.Fraction,
        source: VideoStream,
        request: PackageRequest,
    ) -> None:
        stream = owner.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = rung.width, rung.height, "yuv420p"
        stream.bit_rate = rung.bitrate_kbps * 1000
        context = stream.codec_context
        context.time_base = source.time_base or DEFAULT_TIME_BASE
        # Keyframes come only where ``_VideoClock`` forces them (segment boundaries).
        context.gop_size = max(1, int(float(rate) * request.segment_seconds * 10))
        context.options = {
            "preset": X264_PRESET,
            "forced-idr": "1",
            "x264-params": "scenecut=0",
            "maxrate": str(rung.bitrate_kbps * 1200),
            "bufsize": str(rung.bitrate_kbps * 2000),
        }
        self.encoders.append(stream)

    def _add_audio_encoder(self, owner: OutputContainer) -> None:
        stream = owner.add_stream("aac", rate=self.audio_rate, layout=self.audio_layout)
        stream.bit_rate = AUDIO_BITRATE
        self.audio_encoders.append(stream)

    def mux(self, packets: list[Packet[Any]], owner: VideoStream | AudioStream) -> None:
        """Mux an encoder's packets into its own container and a copy into the other."""
        assert self.owner is not None
        target = self.copies.get(owner.index)
        for packet in packets:
            if target is not None and self.other is not None:
                # Muxing consumes a packet's data, so the second container gets a copy.
                copy: Packet[Any] = Packet(bytes(packet))
                copy.pts, copy.dts, copy.time_base = packet.pts, packet.dts, packet.time_base
                copy.duration = packet.duration
                copy.is_keyframe = packet.is_keyframe
                copy.stream = target
                self.other.mux(copy)
            self.owner.mux(packet)

    def flush(self) -> None:
        for stream in self.encoders:
            self.mux(stream.encode(None), stream)
        for audio in self.audio_encoders:
            self.mux(audio.encode(None), audio)

    def close(self) -> None:
        for container in self.containers:
            container.close()

    def abort(self) -> None:
        for container in self.containers:
            with contextlib.suppress(av.FFmpegError):
                container.close()


def _pixel_aspect(source: VideoStream) -> fractions.Fraction:
    """The source's sample (pixel) aspect ratio; 1 when unknown."""
    sar = source.codec_context.sample_aspect_ratio
    return sar if sar is not None and sar > 0 else fractions.Fraction(1)


class _VideoClock:
    """Source timestamps shifted to start at 0, strictly increasing, and the keyframe rule."""

    def __init__(self, stream: VideoStream, segment_seconds: float) -> None:
        self.time_base = stream.time_base or DEFAULT_TIME_BASE
        self.start = stream.start_time or 0
        self.segment_ticks = segment_seconds / float(self.time_base)
        self.last = -1
        self.next_boundary = 0.0
        rate = stream.average_rate or stream.guessed_rate or DEFAULT_RATE
        self.frame_ticks = max(1, int(1 / (float(rate) * float(self.time_base))))

    def place(self, pts: int | None) -> tuple[int, bool]:
        """(output pts, whether this frame must be a keyframe)."""
        out = self.last + self.frame_ticks if pts is None else pts - self.start
        out = max(out, self.last + 1)
        self.last = out
        if out >= self.next_boundary - 0.5:
            while self.next_boundary <= out + 0.5:
                self.next_boundary += self.segment_ticks
            return out, True
        return out, False

    def seconds(self, pts: int) -> float:
        return pts * float(self.time_base)


def duration_seconds(container: InputContainer, video: VideoStream) -> float | None:
    """How long the video lasts, from the stream or else the container; None if unknown."""
    if video.duration and video.time_base:
        return float(video.duration * video.time_base)
    if container.duration:
        return container.duration / av.time_base
    return None


def _frames(
    container: InputContainer, streams: list[VideoStream | AudioStream]
) -> Iterator[av.VideoFrame | av.AudioFrame]:
    for packet in container.demux(streams):
        for frame in packet.decode():
            if isinstance(frame, av.VideoFrame | av.AudioFrame):
                yield frame


def _transcode(
    container: InputContainer,
    video: VideoStream,
    audio: AudioStream | None,
    outputs: _Outputs,
    rungs: list[Rung],
    request: PackageRequest,
    progress: Callable[[float], None],
) -> None:
    clock = _VideoClock(video, request.segment_seconds)
    duration = duration_seconds(container, video)
    resampler = (
        av.AudioResampler(
            format="fltp", layout=outputs.audio_layout, rate=outputs.audio_rate, frame_size=1024
        )
        if audio is not None
        else None
    )
    audio_clock = _AudioClock(clock.seconds(clock.start), outputs.audio_rate)
    reported = 0.0
    streams: list[VideoStream | AudioStream] = [video] if audio is None else [video, audio]
    for frame in _frames(container, streams):
        if isinstance(frame, av.VideoFrame):
            pts, key = clock.place(frame.pts)
            for stream, rung in zip(outputs.encoders, rungs, strict=True):
                scaled = frame.reformat(width=rung.width, height=rung.height, format="yuv420p")
                scaled.pts, scaled.time_base = pts, clock.time_base
                scaled.pict_type = PictureType.I if key else PictureType.NONE
                outputs.mux(stream.encode(scaled), stream)
            if duration:
                done = min(1.0, clock.seconds(pts) / duration)
                if done - reported >= PROGRESS_STEP:
                    reported = done
                    progress(done)
        elif resampler is not None:
            _encode_audio(outputs, resampler.resample(frame), audio_clock)
    if resampler is not None:
        _encode_audio(outputs, resampler.resample(None), audio_clock)
    outputs.flush()


class _AudioClock:
    """Audio timestamps in samples on the video's timeline (0 at the first video frame):
    contiguous, except across a real gap in the source; samples before 0 are dropped."""

    def __init__(self, start_seconds: float, rate: int) -> None:
        self.start = start_seconds
        self.rate = rate
        self.next: int | None = None

    def place(self, frame: av.AudioFrame) -> int | None:
        """The frame's output pts in 1/rate, or None to drop it."""
        if frame.pts is not None and frame.time_base is not None:
            wanted = round((float(frame.pts * frame.time_base) - self.start) * self.rate)
        else:
            wanted = self.next if self.next is not None else 0
        if self.next is None or wanted - self.next > frame.samples:
            self.next = wanted  # the first frame, or a gap in the source's audio
        pts = self.next
        self.next += frame.samples
        return pts if pts >= 0 else None


def _encode_audio(outputs: _Outputs, frames: list[av.AudioFrame], clock: _AudioClock) -> None:
    for frame in frames:
        pts = clock.place(frame)
        if pts is None:
            continue
        frame.pts, frame.time_base = pts, fractions.Fraction(1, clock.rate)
        for stream in outputs.audio_encoders:
            outputs.mux(stream.encode(frame), stream)


def package(
    source: str, out_dir: str, request: PackageRequest, progress: Callable[[float], None]
) -> dict[str, str]:
    """Package ``source`` into ``out_dir``; return ``{"hls"|"dash": relative name}`` of the
    master playlist / manifest. ``progress`` gets the fraction of the source done, now and
    then. Raises VideoError (UndecodableVideoError, VideoTooLargeError) for the job's
    ``error``, OSError when writing the outputs fails."""
    container = _open_source(source)
    try:
        video = first_video_stream(container, request.max_pixels)
        audio = container.streams.audio[0] if container.streams.audio else None
        video.thread_type = "AUTO"
        rungs = plan_rungs(
            video.codec_context.width,
            video.codec_context.height,
            request.renditions,
            pixel_aspect=_pixel_aspect(video),
            same_aspect="dash" in request.formats,
        )
        try:
            outputs = _Outputs(out_dir, request, rungs, video, audio)
        except av.FFmpegError as exc:
            if isinstance(exc, OSError):
                raise
            raise VideoError(f"the outputs could not be set up: {describe(exc)}") from None
        try:
            _transcode(container, video, audio, outputs, rungs, request, progress)
        except BaseException:
            outputs.abort()
            raise
        outputs.close()
    except av.FFmpegError as exc:
        if isinstance(exc, OSError):
            raise  # the scratch disk, not the source
        raise UndecodableVideoError(f"the video could not be transcoded: {describe(exc)}") from None
    finally:
        container.close()
    return {kind: MASTERS[kind] for kind in request.formats}
