"""Unit tests of the video input allowlist (``service.media.video_input``)."""

from __future__ import annotations

import io

import pytest

from service.media.video_errors import UndecodableVideoError
from service.media.video_input import container_options, is_allowed_demuxer, open_video


def test_demuxer_names_are_matched_by_any_alias() -> None:
    assert is_allowed_demuxer("mov,mp4,m4a,3gp,3g2,mj2")
    assert is_allowed_demuxer("matroska,webm")
    assert is_allowed_demuxer("mpegts")
    for name in ("concat", "hls", "avi", "flv", "image2", "mpegtsraw", "tty"):
        assert not is_allowed_demuxer(name), name


def test_a_file_object_may_open_no_protocol_and_a_path_only_files() -> None:
    assert container_options(source_is_path=False)["protocol_whitelist"] == "none"
    assert container_options(source_is_path=True)["protocol_whitelist"] == "file"
    for options in (container_options(True), container_options(False)):
        assert options["enable_drefs"] == "0"
        assert set(options["format_whitelist"].split(",")) == {
            "mov",
            "mp4",
            "matroska",
            "webm",
            "mpegts",
        }


@pytest.mark.parametrize(
    "payload",
    [
        b"ffconcat version 1.0\nfile clip.mp4\n",
        b"#EXTM3U\n#EXTINF:1.0,\nfile:///etc/hostname\n#EXT-X-ENDLIST\n",
    ],
)
def test_scripts_that_name_other_files_are_refused(payload: bytes) -> None:
    with pytest.raises(UndecodableVideoError):
        open_video(io.BytesIO(payload))
