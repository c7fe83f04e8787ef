"""Unit tests of the video modules without a server: parameters, output names, the rendition
plan, the scratch space on a simulated file system, the packager and the worker protocol."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from fractions import Fraction
from io import BytesIO
from pathlib import Path
from types import ModuleType
from typing import Any

import av
import pytest
from PIL import Image

from fsseam.fs import RealFileSystem
from fsseam.simfs import SimFileSystem
from service.media import video_outputs, video_package, video_params
from service.media.video_errors import UndecodableVideoError, VideoParamsError
from service.media.video_outputs import content_type_for, is_output_name
from service.media.video_package import PackageRequest, package, plan_rungs
from service.media.video_params import (
    JobParams,
    Rendition,
    parse_job_params,
    parse_output_prefix,
    parse_thumbnail_params,
)
from service.media.video_scratch import ScratchSpace
from service.media.video_thumbnail import render_thumbnail
from tests.http.videokit import make_clip

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize("module", [video_params, video_outputs, video_package])
def test_module_doctests_pass(module: ModuleType) -> None:
    assert doctest.testmod(module).failed == 0


def test_job_params_fill_defaults_and_round_trip() -> None:
    params = parse_job_params({"formats": ["dash", "hls"], "renditions": [{"height": 720}]})
    assert params == JobParams(("dash", "hls"), (Rendition(720, 1935),), 4.0, "mpegts")
    assert JobParams.from_document(params.to_document()) == params
    assert parse_job_params({"formats": ["hls"], "segment_seconds": 2}).segment_seconds == 2.0
    assert parse_job_params({"formats": ["hls"], "hls_segment_type": None}).renditions is None


@pytest.mark.parametrize(
    "body",
    [{}, {"formats": ["hls"], "segment_seconds": float("nan")}, {"formats": [1]}],
)
def test_bad_job_params_name_the_field(body: dict[str, Any]) -> None:
    with pytest.raises(VideoParamsError):
        parse_job_params(body)


def test_thumbnail_params_and_prefixes() -> None:
    params = parse_thumbnail_params({"bucket": "b", "key": "v/a.mp4", "format": "webp"})
    assert (params.at_seconds, params.width, params.quality) == (1.0, None, 80)
    assert params.default_target_key() == "v/a.mp4.thumb.webp"
    assert params.content_type == "image/webp"
    assert parse_output_prefix("out") == "out/" and parse_output_prefix("o/") == "o/"
    assert parse_output_prefix(None) is None
    with pytest.raises(VideoParamsError, match="output_prefix"):
        parse_output_prefix("a\x7fb")


def test_output_names_are_exactly_what_a_job_writes() -> None:
    for name in (
        "hls/master.m3u8",
        "hls/stream_2.m3u8",
        "hls/stream_0_00000.ts",
        "hls/stream_0_00012.m4s",
        "hls/stream_0_init.mp4",
        "dash/manifest.mpd",
        "dash/init_3.m4s",
        "dash/chunk_3_00001.m4s",
    ):
        assert is_output_name(name), name
    for name in ("hls/notes.txt", "hls/stream_%v_init.mp4", "hls/a/../master.m3u8", "x.m3u8"):
        assert not is_output_name(name), name
    assert content_type_for("dash/manifest.mpd") == "application/dash+xml"
    assert content_type_for("hls/stream_0_00001.m4s") == "video/iso.segment"


def test_renditions_are_never_taller_than_the_source_and_even() -> None:
    rungs = plan_rungs(
        1279, 719, (Rendition(1080, 5000), Rendition(720, 3000), Rendition(361, 800))
    )
    assert [(r.width, r.height, r.bitrate_kbps) for r in rungs] == [
        (1278, 718, 5000),
        (640, 360, 800),
    ]


def test_dash_renditions_share_one_exact_aspect_ratio() -> None:
    wanted = (Rendition(720, 3000), Rendition(480, 1000), Rendition(240, 400))
    rungs = plan_rungs(1920, 1080, wanted, same_aspect=True)
    assert [(r.width, r.height) for r in rungs] == [(1280, 720), (864, 486), (416, 234)]
    assert {Fraction(r.width, r.height) for r in rungs} == {Fraction(16, 9)}
    single = plan_rungs(1279, 719, (Rendition(480, 900),), same_aspect=True)
    assert [(r.width, r.height) for r in single] == [(854, 480)]


def test_anamorphic_sources_get_square_pixels_at_their_display_aspect() -> None:
    rungs = plan_rungs(720, 576, None, pixel_aspect=Fraction(16, 15))
    assert [(r.width, r.height) for r in rungs] == [(768, 576)]


def test_the_scratch_space_makes_lists_and_removes_run_directories() -> None:
    fs = SimFileSystem()
    scratch = ScratchSpace(fs, "/data")
    first, second = scratch.prepare("vj_1"), scratch.prepare("vj_1")
    assert first != second and first.startswith("/data/scratch/video-vj_1-")
    fs.create(f"{first}/hls/a.ts").close()
    fs.create(f"{first}/dash/b.m4s").close()
    assert scratch.files(first) == ["dash/b.m4s", "hls/a.ts"]
    scratch.remove(first)
    assert not fs.exists(first) and fs.exists(second)
    with pytest.raises(ValueError):
        scratch.remove("/data/payloads")
    with pytest.raises(ValueError):
        scratch.prepare("../x")
    assert scratch.clean() == 1 and fs.listdir("/data/scratch") == []


@pytest.mark.parametrize(
    ("formats", "segment_type", "heights", "audio"),
    [
        (("hls",), "fmp4", (48,), False),
        (("hls",), "fmp4", (48, 24), True),
        (("dash",), "mpegts", (48,), True),
        (("hls", "dash"), "mpegts", (48, 32, 16), False),
    ],
)
def test_the_packager_writes_only_output_names(
    tmp_path: Path,
    formats: tuple[str, ...],
    segment_type: str,
    heights: tuple[int, ...],
    audio: bool,
) -> None:
    source = tmp_path / "clip.mp4"
    make_clip(source, audio=audio)
    out = tmp_path / "out"
    (out / "hls").mkdir(parents=True)
    (out / "dash").mkdir()
    seen: list[float] = []
    request = PackageRequest(
        formats, tuple(Rendition(h, 200) for h in heights), 1.0, segment_type, 10_000
    )
    masters = package(str(source), str(out), request, seen.append)
    assert set(masters) == set(formats)
    names = ScratchSpace(RealFileSystem(), str(tmp_path)).files(str(out))
    assert names and all(is_output_name(name) for name in names), names
    assert all(name in names for name in masters.values())
    assert seen == sorted(seen) and 0 < seen[-1] <= 1


def test_the_packager_refuses_what_it_cannot_decode(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00" * 4096)
    request = PackageRequest(("hls",), None, 4.0, "mpegts", 10_000)
    with pytest.raises(UndecodableVideoError) as caught:
        package(str(junk), str(tmp_path), request, lambda fraction: None)
    assert str(tmp_path) not in str(caught.value)  # messages reach clients: no paths


def test_the_thumbnail_reads_through_a_seam_file(tmp_path: Path) -> None:
    source = tmp_path / "clip.mp4"
    make_clip(source, audio=False)
    payload = RealFileSystem().open_read(str(source))
    try:
        params = parse_thumbnail_params({"bucket": "b", "key": "k", "width": 16})
        data = render_thumbnail(payload, params, 10_000)
    finally:
        payload.close()
    assert data[:3] == b"\xff\xd8\xff"


def test_the_worker_answers_with_one_final_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"junk" * 100)
    spec = {
        "source": str(junk),
        "out_dir": str(tmp_path),
        "params": JobParams(("hls",)).to_document(),
        "max_pixels": 10_000,
    }
    done = subprocess.run(
        [sys.executable, "-m", "service.media.video_worker"],
        input=json.dumps(spec).encode(),
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines == [
        {"error": "the source is not a readable video: Invalid data found when processing input"}
    ]


def test_a_source_whose_timeline_starts_late_is_seeked_and_packaged_from_its_start(
    tmp_path: Path,
) -> None:
    clip = tmp_path / "clip.mp4"
    make_clip(clip, seconds=3)
    first = tmp_path / "first"
    for sub in ("hls", "dash"):
        (first / sub).mkdir(parents=True)
    package(
        str(clip),
        str(first),
        PackageRequest(("hls",), None, 1.0, "mpegts", 10_000),
        lambda fraction: None,
    )
    late = first / "hls" / "stream_0_00001.ts"  # seconds 1 to 2 of the clip, timestamps too
    payload = RealFileSystem().open_read(str(late))
    try:
        params = parse_thumbnail_params({"bucket": "b", "key": "k", "at_seconds": 0.5})
        picture = Image.open(BytesIO(render_thumbnail(payload, params, 10_000)))
    finally:
        payload.close()
    assert 150 <= picture.convert("L").getpixel((32, 24)) <= 180  # frame 15: luma 150
    second = tmp_path / "second"
    for sub in ("hls", "dash"):
        (second / sub).mkdir(parents=True)
    package(
        str(late),
        str(second),
        PackageRequest(("hls",), None, 0.5, "mpegts", 10_000),
        lambda fraction: None,
    )
    playlist = (second / "hls" / "stream_0.m3u8").read_text()
    segments = [line for line in playlist.splitlines() if line.endswith(".ts")]
    assert len(segments) == 2
    for name in segments:
        with av.open(str(second / "hls" / name)) as container:
            kinds = {type(frame).__name__ for frame in container.decode(*container.streams)}
        assert kinds == {"VideoFrame", "AudioFrame"}, name
