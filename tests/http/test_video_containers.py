"""Video sources are opened only as MP4/MOV, Matroska/WebM or MPEG-TS, and never reach a
file beside their own payload (over HTTP: thumbnails and packaging jobs)."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import av
import httpx
import pytest

from tests.http.test_buckets import assert_error
from tests.http.videokit import make_clip, wait_for
from tests.serverproc import REPO_ROOT


def encode(path: Path, container: str, codec: str) -> bytes:
    """A 1 s, 64x48 clip in ``container`` with ``codec``."""
    with av.open(str(path), "w", format=container) as output:
        stream = output.add_stream(codec, rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(10):
            frame = av.VideoFrame(64, 48, "yuv420p")
            for number, plane in enumerate(frame.planes):
                plane.update(bytes([index * 20 if number == 0 else 128]) * plane.buffer_size)
            for packet in stream.encode(frame):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)
    return path.read_bytes()


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("containers")
    return {
        "clip.mp4": make_clip(folder / "clip.mp4", seconds=1, audio=False),
        "clip.mkv": encode(folder / "clip.mkv", "matroska", "libx264"),
        "clip.webm": encode(folder / "clip.webm", "webm", "libvpx"),
        "clip.ts": encode(folder / "clip.ts", "mpegts", "mpeg2video"),
        "clip.avi": encode(folder / "clip.avi", "avi", "mpeg4"),
        "clip.flv": encode(folder / "clip.flv", "flv", "flv"),
    }


@pytest.fixture
def bucket(api: httpx.Client, bucket_name: str, clips: dict[str, bytes]) -> str:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    for key, data in clips.items():
        assert api.put(f"/buckets/{bucket_name}/objects/{key}", content=data).status_code == 200
    return bucket_name


@pytest.fixture
def beside_the_server() -> Iterator[str]:
    """A video file in the server's working directory (what a concat script could name)."""
    folder = REPO_ROOT / f"avprobe-{secrets.token_hex(4)}"
    folder.mkdir()
    try:
        make_clip(folder / "secret.mp4", seconds=1, audio=False)
        yield f"{folder.name}/secret.mp4"
    finally:
        shutil.rmtree(folder)


def thumbnail(api: httpx.Client, bucket: str, key: str) -> httpx.Response:
    return api.post("/videos/thumbnails", json={"bucket": bucket, "key": key, "at_seconds": 0})


@pytest.mark.parametrize("key", ["clip.mp4", "clip.mkv", "clip.webm", "clip.ts"])
def test_supported_containers_make_thumbnails(api: httpx.Client, bucket: str, key: str) -> None:
    made = thumbnail(api, bucket, key)
    assert made.status_code == 201, made.text


@pytest.mark.parametrize("key", ["clip.avi", "clip.flv"])
def test_other_containers_are_refused_even_when_ffmpeg_could_read_them(
    api: httpx.Client, bucket: str, key: str
) -> None:
    refused = thumbnail(api, bucket, key)
    assert_error(refused, 415, "UnsupportedMediaType")
    assert "MP4/MOV, Matroska/WebM or MPEG-TS" in refused.json()["error"]["message"]


def test_a_concat_script_cannot_read_a_file_beside_the_payload(
    api: httpx.Client, bucket: str, beside_the_server: str
) -> None:
    script = f"ffconcat version 1.0\nfile {beside_the_server}\n".encode()
    assert api.put(f"/buckets/{bucket}/objects/list.mp4", content=script).status_code == 200
    assert_error(thumbnail(api, bucket, "list.mp4"), 415, "UnsupportedMediaType")
    job = api.post("/videos/jobs", json={"bucket": bucket, "key": "list.mp4", "formats": ["hls"]})
    assert job.status_code == 202, job.text
    done = wait_for(api, job.json()["job_id"])
    assert done["status"] == "failed" and "supported container" in done["error"]


def test_a_job_of_an_unsupported_container_fails_with_a_reason(
    api: httpx.Client, bucket: str
) -> None:
    job = api.post("/videos/jobs", json={"bucket": bucket, "key": "clip.avi", "formats": ["hls"]})
    assert job.status_code == 202, job.text
    done = wait_for(api, job.json()["job_id"])
    assert done["status"] == "failed"
    assert "MP4/MOV, Matroska/WebM or MPEG-TS" in done["error"]
