"""Where a packaging job's outputs go and what they are: names, keys, content types. Pure.

Every file a job produces is stored as the object ``<output_prefix><name>``, ``name`` being
its path in the job's scratch directory (``service.media.video_package`` lays them out):

    hls/master.m3u8  hls/stream_<i>.m3u8  hls/stream_<i>_<n>.ts|.m4s  hls/stream_<i>_init.mp4
    dash/manifest.mpd  dash/init_<r>.m4s  dash/chunk_<r>_<n>.m4s

``OUTPUT_NAME`` matches exactly these shapes (and nothing else: the runner fails a job whose
packager wrote any other file). Playback serves only names that match it, so a share never
reaches another object under a shared prefix and ``..`` never resolves; cancelling a job
removes only keys under its prefix whose rest matches it.

The default prefix is ``videos/<job_id>/``: short (any key fits under the 1024-byte limit),
unique per job, so a job's outputs never mix with another's.

Thread-safety: pure functions and constants.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

HLS_MASTER = "hls/master.m3u8"
DASH_MANIFEST = "dash/manifest.mpd"
MASTERS = {"hls": HLS_MASTER, "dash": DASH_MANIFEST}
OUTPUT_NAME = re.compile(
    r"^(hls/(master\.m3u8|stream_\d{1,3}(\.m3u8|_\d{1,9}\.(ts|m4s)|_init\.mp4))"
    r"|dash/(manifest\.mpd|init_\d{1,3}\.m4s|chunk_\d{1,3}_\d{1,9}\.m4s))$"
)

_CONTENT_TYPES = {
    ".m3u8": "application/vnd.apple.mpegurl",
    ".ts": "video/mp2t",
    ".mp4": "video/mp4",
    ".m4s": "video/iso.segment",
    ".mpd": "application/dash+xml",
}


def default_output_prefix(job_id: str) -> str:
    return f"videos/{job_id}/"


def is_output_name(name: str) -> bool:
    """Whether ``name`` (relative to a job's prefix) is a name a job writes.

    >>> names = ("hls/master.m3u8", "dash/init_0.m4s", "hls/stream_1_00042.ts", "hls/x.ts")
    >>> [is_output_name(n) for n in names + ("hls/../master.m3u8", "master.m3u8")]
    [True, True, True, False, False, False]
    """
    return OUTPUT_NAME.match(name) is not None


def content_type_for(name: str) -> str:
    """The Content-Type an output is stored with; DASH init segments are plain MP4.

    >>> content_type_for("dash/init_0.m4s"), content_type_for("hls/stream_0_00001.ts")
    ('video/mp4', 'video/mp2t')
    """
    base = posixpath.basename(name)
    extension = posixpath.splitext(base)[1]
    if extension == ".m4s" and base.startswith("init_"):
        return "video/mp4"
    return _CONTENT_TYPES.get(extension, "application/octet-stream")


def store_order(names: Iterable[str]) -> list[str]:
    """Segments first, then media playlists, masters last: a master playlist or manifest
    becomes visible only once everything it refers to is stored.

    >>> store_order(["hls/master.m3u8", "hls/stream_0.m3u8", "hls/stream_0_00000.ts"])
    ['hls/stream_0_00000.ts', 'hls/stream_0.m3u8', 'hls/master.m3u8']
    """

    def rank(name: str) -> tuple[int, str]:
        if name in MASTERS.values():
            return 2, name
        if name.endswith(".m3u8"):
            return 1, name
        return 0, name

    return sorted(names, key=rank)
