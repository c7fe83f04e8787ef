"""Opening a video source: only the containers we support, and nothing beside the payload.

FFmpeg guesses a source's container from its bytes and will open whatever it recognises: a
playlist (HLS), a concat script that names other files (``ffconcat``, resolved against the
server's working directory), image sequences, dozens of demuxers no client should reach.
Every video source here is opened by ``open_video`` with FFmpeg's own allowlists:

- ``format_whitelist``: the demuxers ``mov`` (MP4, MOV), ``matroska`` (MKV, WebM) and
  ``mpegts`` only; anything else is refused before it is read past its probe;
- ``protocol_whitelist``: ``file`` when the source is a path (the one payload descriptor,
  ``/dev/fd/<n>``), and nothing at all when it is a file object, so no demuxer can open a
  second file or a URL through a nested open;
- ``enable_drefs`` off: an MP4/MOV may not pull in external data references.

The opened container's demuxer is checked once more against the allowlist (in case an
FFmpeg build ignores an option). A refusal is ``UndecodableVideoError`` (415).

Thread-safety: pure functions; the container is used by one thread.
"""

from __future__ import annotations

from typing import IO

import av
from av.container import InputContainer

from service.media.video_errors import UndecodableVideoError

ALLOWED_DEMUXERS = frozenset({"mov", "mp4", "matroska", "webm", "mpegts"})
"""FFmpeg demuxer names (a demuxer's name lists its aliases: ``mov,mp4,m4a,3gp,3g2,mj2``)."""
SUPPORTED = "MP4/MOV, Matroska/WebM or MPEG-TS"
_NO_PROTOCOL = "none"
"""A protocol name that does not exist: the allowlist then admits no protocol at all."""


def describe(exc: av.FFmpegError) -> str:
    """FFmpeg's reason without the file name it may carry (messages reach clients)."""
    return exc.strerror or type(exc).__name__


def container_options(source_is_path: bool) -> dict[str, str]:
    """The FFmpeg options every video source is opened with (see the module docstring)."""
    return {
        "format_whitelist": ",".join(sorted(ALLOWED_DEMUXERS)),
        "protocol_whitelist": "file" if source_is_path else _NO_PROTOCOL,
        "enable_drefs": "0",
    }


def is_allowed_demuxer(name: str) -> bool:
    """Whether a demuxer (``container.format.name``, aliases joined by commas) is allowed."""
    return any(alias in ALLOWED_DEMUXERS for alias in name.split(","))


def open_video(source: str | IO[bytes]) -> InputContainer:
    """Open ``source`` (a path or a binary file object) for decoding, allowlisted."""
    try:
        container = av.open(
            source,
            "r",
            container_options=container_options(isinstance(source, str)),
            metadata_errors="ignore",
        )
    except av.ArgumentError:
        # EINVAL: what FFmpeg answers when the probed demuxer is not on the allowlist.
        raise UndecodableVideoError(
            f"the source is not a video in a supported container ({SUPPORTED})"
        ) from None
    except av.FFmpegError as exc:
        raise UndecodableVideoError(
            f"the source is not a readable video: {describe(exc)}"
        ) from None
    if not is_allowed_demuxer(container.format.name):
        container.close()
        raise UndecodableVideoError(f"the source's container is not supported ({SUPPORTED})")
    return container
