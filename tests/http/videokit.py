"""The video tests' kit: tiny clips, and a player's view of a job's outputs.

Clips are made with PyAV and kept tiny (64x48, 2 s, 10 frames/s, grey frames getting lighter,
a quiet tone on the audio track) so that a packaging job takes about a second. Playback is
checked the way a player would do it: start from the share URL, follow the relative URIs of
the playlists and manifests, fetch every segment without credentials and decode it.

The fixtures that hold such clips are in ``tests/http/videos/conftest.py``; other suites
(CLI, console, media units) import ``make_clip`` from here.
"""

from __future__ import annotations

import math
import re
import struct
import time
import xml.etree.ElementTree as ET
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import av
import httpx

WIDTH, HEIGHT, FPS, SECONDS = 64, 48, 10, 2
MPD_NS = {"mpd": "urn:mpeg:dash:schema:mpd:2011"}


def make_clip(path: Path, *, seconds: int = SECONDS, audio: bool = True) -> bytes:
    """An H.264 (+ AAC) MP4: frame ``i`` has luma ``10 * i``, so time shows as brightness."""
    with av.open(str(path), "w") as container:
        video = container.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        sound = container.add_stream("aac", rate=8000, layout="mono") if audio else None
        for index in range(seconds * FPS):
            frame = av.VideoFrame(WIDTH, HEIGHT, "yuv420p")
            for number, plane in enumerate(frame.planes):
                shade = (index * 10) % 256 if number == 0 else 128
                plane.update(bytes([shade]) * plane.buffer_size)
            for packet in video.encode(frame):
                container.mux(packet)
        if sound is not None:
            for start in range(0, seconds * 8000, 1024):
                samples = av.AudioFrame(format="fltp", layout="mono", samples=1024)
                tone = (0.2 * math.sin(2 * math.pi * 440 * (start + k) / 8000) for k in range(1024))
                samples.planes[0].update(struct.pack("<1024f", *tone))
                samples.sample_rate, samples.pts = 8000, start
                for packet in sound.encode(samples):
                    container.mux(packet)
            for packet in sound.encode():
                container.mux(packet)
        for packet in video.encode():
            container.mux(packet)
    return path.read_bytes()


def decode(data: bytes, suffix: str) -> dict[str, int]:
    """Frames of each kind PyAV decodes from ``data`` (a whole file or init + segment)."""
    counts = {"video": 0, "audio": 0}
    with av.open(BytesIO(data), format={"ts": "mpegts"}.get(suffix)) as container:
        for frame in container.decode(*container.streams):
            counts["video" if isinstance(frame, av.VideoFrame) else "audio"] += 1
    return counts


def wait_for(api: httpx.Client, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        got = api.get(f"/videos/jobs/{job_id}")
        assert got.status_code == 200, got.text
        job: dict[str, Any] = got.json()
        if job["status"] in ("completed", "failed") or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def run_job(api: httpx.Client, bucket: str, **fields: Any) -> dict[str, Any]:
    body = {"bucket": bucket, "key": "clip.mp4", "formats": ["hls"], "segment_seconds": 1}
    created = api.post("/videos/jobs", json={**body, **fields})
    assert created.status_code == 202, created.text
    job = wait_for(api, created.json()["job_id"])
    assert job["status"] == "completed", job["error"]
    return job


def share(api: httpx.Client, job_id: str, expires_in: int = 300) -> dict[str, Any]:
    created = api.post("/videos/shares", json={"job_id": job_id, "expires_in": expires_in})
    assert created.status_code == 201, created.text
    return dict(created.json())


def fetch(url: str, **kwargs: Any) -> httpx.Response:
    """A request with no credentials at all, as a player makes it."""
    return httpx.get(url, timeout=30.0, **kwargs)


def playlist_uris(text: str) -> list[str]:
    """The URIs an HLS playlist refers to: its plain lines and EXT-X-MAP's URI."""
    uris = [line for line in text.splitlines() if line and not line.startswith("#")]
    uris += re.findall(r'#EXT-X-MAP:URI="([^"]+)"', text)
    return uris


def assert_relative(uri: str) -> None:
    assert "://" not in uri and not uri.startswith("/") and ".." not in uri, uri


def play_hls(master_url: str) -> dict[str, dict[str, int]]:
    """Follow an HLS master playlist; every segment's decoded frames, by variant playlist."""
    master = fetch(master_url)
    assert master.status_code == 200 and master.text.startswith("#EXTM3U")
    assert master.headers["Content-Type"] == "application/vnd.apple.mpegurl"
    assert master.headers["Access-Control-Allow-Origin"] == "*"
    assert "#EXT-X-STREAM-INF" in master.text
    played: dict[str, dict[str, int]] = {}
    for variant in playlist_uris(master.text):
        assert_relative(variant)
        media = fetch(urljoin(master_url, variant))
        assert media.status_code == 200 and "#EXT-X-ENDLIST" in media.text
        uris = playlist_uris(media.text)
        init = b""
        maps = re.findall(r'#EXT-X-MAP:URI="([^"]+)"', media.text)
        if maps:
            init = fetch(urljoin(master_url, maps[0])).content
        totals = {"video": 0, "audio": 0}
        for uri in uris:
            assert_relative(uri)
            if uri in maps:
                continue
            segment = fetch(urljoin(master_url, uri))
            assert segment.status_code == 200, uri
            suffix = uri.rsplit(".", 1)[1]
            assert segment.headers["Content-Type"] == (
                "video/mp2t" if suffix == "ts" else "video/iso.segment"
            )
            counts = decode(init + segment.content, suffix)
            assert counts["video"] > 0, uri
            for kind, count in counts.items():
                totals[kind] += count
        played[variant] = totals
    return played


def play_dash(manifest_url: str) -> dict[str, dict[str, int]]:
    """Follow a DASH manifest; decoded frames per representation (init + each segment)."""
    manifest = fetch(manifest_url)
    assert manifest.status_code == 200
    assert manifest.headers["Content-Type"] == "application/dash+xml"
    root = ET.fromstring(manifest.content)
    played: dict[str, dict[str, int]] = {}
    for representation in root.iterfind(".//mpd:Representation", MPD_NS):
        rep_id = representation.attrib["id"]
        template = representation.find("mpd:SegmentTemplate", MPD_NS)
        assert template is not None
        init_uri = template.attrib["initialization"].replace("$RepresentationID$", rep_id)
        assert_relative(init_uri)
        init = fetch(urljoin(manifest_url, init_uri))
        assert init.status_code == 200 and init.headers["Content-Type"] == "video/mp4"
        count = sum(1 + int(s.attrib.get("r", 0)) for s in template.iterfind(".//mpd:S", MPD_NS))
        number = int(template.attrib.get("startNumber", 1))
        totals = {"video": 0, "audio": 0}
        for n in range(number, number + count):
            uri = template.attrib["media"].replace("$RepresentationID$", rep_id)
            uri = re.sub(r"\$Number%0(\d+)d\$", lambda m, n=n: f"{n:0{int(m.group(1))}d}", uri)
            assert_relative(uri)
            segment = fetch(urljoin(manifest_url, uri))
            assert segment.status_code == 200, uri
            for kind, frames in decode(init.content + segment.content, "m4s").items():
                totals[kind] += frames
        played[representation.attrib.get("mimeType", rep_id) + ":" + rep_id] = totals
    return played


def output_keys(api: httpx.Client, bucket: str, prefix: str) -> list[str]:
    listed = api.get(f"/buckets/{bucket}/objects", params={"prefix": prefix})
    assert listed.status_code == 200, listed.text
    return [item["key"] for item in listed.json()["objects"]]
