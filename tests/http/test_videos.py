"""Black-box tests of the video endpoints: thumbnails, packaging jobs, shares and playback.

Clips are made with PyAV and kept tiny (64x48, 2 s, 10 frames/s, grey frames getting lighter,
a quiet tone on the audio track) so that a packaging job takes about a second. Playback is
checked the way a player would do it: start from the share URL, follow the relative URIs of
the playlists and manifests, fetch every segment without credentials and decode it.
"""

from __future__ import annotations

import math
import re
import struct
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import av
import httpx
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from tests.http.test_buckets import assert_error
from tests.http.test_identity import Account, create_account
from tests.serverproc import ServerProcess

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


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("clips") / "clip.mp4")


@pytest.fixture(scope="module")
def silent_clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("clips") / "silent.mp4", audio=False)


@pytest.fixture
def bucket(api: httpx.Client, bucket_name: str, clip: bytes) -> str:
    """A bucket holding ``clip.mp4``."""
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    put = api.put(f"/buckets/{bucket_name}/objects/clip.mp4", content=clip)
    assert put.status_code == 200, put.text
    return bucket_name


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


# -- thumbnails --------------------------------------------------------------------------


def test_a_thumbnail_is_stored_as_an_object_of_the_asked_width(
    api: httpx.Client, bucket: str
) -> None:
    made = api.post(
        "/videos/thumbnails",
        json={"bucket": bucket, "key": "clip.mp4", "at_seconds": 0.5, "width": 32},
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["key"] == "clip.mp4.thumb.jpg" and body["content_type"] == "image/jpeg"
    assert made.headers["ETag"] == f'"{body["etag"]}"'
    stored = api.get(f"/buckets/{bucket}/objects/clip.mp4.thumb.jpg")
    assert stored.status_code == 200 and stored.content[:3] == b"\xff\xd8\xff"
    assert len(stored.content) == body["size_bytes"]
    picture = Image.open(BytesIO(stored.content))
    assert picture.size == (32, 24)
    assert 30 <= picture.convert("L").getpixel((16, 12)) <= 60  # frame 5: luma 50


def test_a_webp_thumbnail_goes_to_the_target_key_and_never_upscales(
    api: httpx.Client, bucket: str
) -> None:
    made = api.post(
        "/videos/thumbnails",
        json={
            "bucket": bucket,
            "key": "clip.mp4",
            "format": "webp",
            "quality": 50,
            "width": 1000,
            "target_key": "thumbs/a.webp",
        },
    )
    assert made.status_code == 201, made.text
    assert made.json()["content_type"] == "image/webp"
    data = api.get(f"/buckets/{bucket}/objects/thumbs/a.webp").content
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    assert Image.open(BytesIO(data)).size == (WIDTH, HEIGHT)


def test_at_seconds_past_the_end_gives_the_last_frame(api: httpx.Client, bucket: str) -> None:
    made = api.post(
        "/videos/thumbnails",
        json={"bucket": bucket, "key": "clip.mp4", "at_seconds": 3600, "target_key": "last.jpg"},
    )
    assert made.status_code == 201, made.text
    picture = Image.open(BytesIO(api.get(f"/buckets/{bucket}/objects/last.jpg").content))
    assert picture.convert("L").getpixel((32, 24)) > 170  # frame 19: luma 190


def test_an_undecodable_source_is_415_and_a_missing_one_404(api: httpx.Client, bucket: str) -> None:
    api.put(f"/buckets/{bucket}/objects/junk.mp4", content=b"\x00not a video" * 500)
    junk = api.post("/videos/thumbnails", json={"bucket": bucket, "key": "junk.mp4"})
    assert_error(junk, 415, "UnsupportedMediaType")
    missing = api.post("/videos/thumbnails", json={"bucket": bucket, "key": "nope.mp4"})
    assert_error(missing, 404, "NoSuchKey")
    no_bucket = api.post("/videos/thumbnails", json={"bucket": "no-such-b", "key": "a"})
    assert_error(no_bucket, 404, "NoSuchBucket")
    assert output_keys(api, bucket, "junk") == ["junk.mp4"]


@pytest.mark.parametrize(
    "fields",
    [
        {"at_seconds": -1},
        {"at_seconds": "1"},
        {"width": 0},
        {"width": 2.5},
        {"width": True},
        {"format": "png"},
        {"quality": 101},
        {"target_key": ""},
        {"key": None},
    ],
)
def test_bad_thumbnail_parameters_are_400(
    api: httpx.Client, bucket: str, fields: dict[str, Any]
) -> None:
    body = {"bucket": bucket, "key": "clip.mp4", **fields}
    assert_error(api.post("/videos/thumbnails", json=body), 400, "InvalidArgument")


def test_a_bad_target_key_is_invalid_key(api: httpx.Client, bucket: str) -> None:
    body = {"bucket": bucket, "key": "clip.mp4", "target_key": "a\x00b"}
    assert_error(api.post("/videos/thumbnails", json=body), 400, "InvalidKey")


# -- jobs and playback -------------------------------------------------------------------


def test_hls_and_dash_job_completes_with_playable_outputs(api: httpx.Client, bucket: str) -> None:
    job = run_job(
        api,
        bucket,
        formats=["hls", "dash"],
        renditions=[{"height": 48, "video_bitrate_kbps": 300}, {"height": 24}],
    )
    prefix = job["output_prefix"]
    assert prefix == f"videos/{job['job_id']}/"
    assert job["progress"] == 1.0 and job["error"] is None
    assert job["outputs"] == {
        "hls": prefix + "hls/master.m3u8",
        "dash": prefix + "dash/manifest.mpd",
    }
    assert job["params"]["renditions"][1] == {"height": 24, "video_bitrate_kbps": 150}
    assert job["params"]["hls_segment_type"] == "mpegts"
    keys = output_keys(api, bucket, prefix)
    assert prefix + "hls/stream_0_00000.ts" in keys and prefix + "dash/init_0.m4s" in keys
    links = share(api, job["job_id"])
    assert links["hls_url"].endswith(f"/videos/play/{links['token']}/hls/master.m3u8")
    assert links["dash_url"].endswith(f"/videos/play/{links['token']}/dash/manifest.mpd")
    hls = play_hls(links["hls_url"])
    assert len(hls) == 2
    for totals in hls.values():
        assert totals["video"] == SECONDS * FPS and totals["audio"] > 0
    dash = play_dash(links["dash_url"])
    assert sorted(totals["video"] for totals in dash.values()) == [0, SECONDS * FPS, SECONDS * FPS]
    assert any(totals["audio"] > 0 for totals in dash.values())


def test_fmp4_hls_job_of_a_silent_clip_plays(
    api: httpx.Client, bucket: str, silent_clip: bytes
) -> None:
    api.put(f"/buckets/{bucket}/objects/clip.mp4", content=silent_clip)
    job = run_job(api, bucket, hls_segment_type="fmp4", output_prefix="out/silent")
    assert job["output_prefix"] == "out/silent/"
    assert job["outputs"] == {"hls": "out/silent/hls/master.m3u8", "dash": None}
    links = share(api, job["job_id"])
    assert links["dash_url"] is None
    played = play_hls(links["hls_url"])
    assert list(played.values()) == [{"video": SECONDS * FPS, "audio": 0}]
    media = fetch(urljoin(links["hls_url"], "stream_0.m3u8")).text
    assert '#EXT-X-MAP:URI="stream_0_init.mp4"' in media and ".m4s" in media


def test_playback_serves_ranges_and_head_like_object_get(api: httpx.Client, bucket: str) -> None:
    job = run_job(api, bucket)
    base = share(api, job["job_id"])["hls_url"].rsplit("/", 1)[0] + "/"
    whole = fetch(base + "stream_0_00000.ts")
    assert whole.status_code == 200 and whole.headers["Accept-Ranges"] == "bytes"
    ranged = fetch(base + "stream_0_00000.ts", headers={"Range": "bytes=188-375"})
    assert ranged.status_code == 206 and ranged.content == whole.content[188:376]
    assert ranged.headers["Content-Range"] == f"bytes 188-375/{len(whole.content)}"
    head = httpx.head(base + "master.m3u8")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Length"] == str(len(fetch(base + "master.m3u8").content))
    not_modified = fetch(base + "master.m3u8", headers={"If-None-Match": head.headers["ETag"]})
    assert not_modified.status_code == 304


def job_gauges(api: httpx.Client) -> tuple[dict[str, int], dict[str, float]]:
    """Jobs per status as system info and as the ``service_media_jobs`` gauge say."""
    info = api.get("/system/info").json()["media_jobs"]
    gauge = {
        sample.labels["status"]: sample.value
        for family in text_string_to_metric_families(api.get("/metrics").text)
        if family.name == "service_media_jobs"
        for sample in family.samples
    }
    return info, gauge


def test_system_info_and_metrics_count_jobs_by_status(api: httpx.Client, bucket: str) -> None:
    info_before, gauge_before = job_gauges(api)
    job = run_job(api, bucket, formats=["hls"])
    assert job["status"] == "completed"
    info, gauge = job_gauges(api)
    assert info["completed"] == info_before["completed"] + 1
    assert gauge["completed"] == gauge_before["completed"] + 1
    assert info["queued"] == gauge["queued"] and info["processing"] == gauge["processing"]


def test_an_undecodable_source_fails_the_job_with_a_reason(api: httpx.Client, bucket: str) -> None:
    api.put(f"/buckets/{bucket}/objects/clip.mp4", content=b"\x00garbage" * 1000)
    created = api.post(
        "/videos/jobs", json={"bucket": bucket, "key": "clip.mp4", "formats": ["dash"]}
    )
    assert created.status_code == 202, created.text
    job = wait_for(api, created.json()["job_id"])
    assert job["status"] == "failed"
    assert "not a readable video" in job["error"]
    assert output_keys(api, bucket, job["output_prefix"]) == []
    assert_error(api.post("/videos/shares", json={"job_id": job["job_id"]}), 409, "InvalidState")


def test_outputs_over_the_quota_fail_the_job_and_leave_nothing(
    api: httpx.Client, bucket: str, clip: bytes
) -> None:
    room = len(clip) + 8000  # the first few segments fit, the rest does not
    assert api.patch(f"/buckets/{bucket}", json={"quota_bytes": room}).status_code == 200
    body = {"bucket": bucket, "key": "clip.mp4", "formats": ["hls", "dash"], "segment_seconds": 1}
    created = api.post("/videos/jobs", json=body)
    job = wait_for(api, created.json()["job_id"])
    assert job["status"] == "failed" and "quota" in job["error"]
    assert job["outputs"] == {"hls": None, "dash": None}
    assert output_keys(api, bucket, job["output_prefix"]) == []
    usage = api.get(f"/buckets/{bucket}").json()["usage"]
    assert usage == {"object_count": 1, "size_bytes": len(clip)}


@pytest.mark.parametrize(
    "fields",
    [
        {"formats": None},
        {"formats": []},
        {"formats": "hls"},
        {"formats": ["hls", "hls"]},
        {"formats": ["mp4"]},
        {"renditions": []},
        {"renditions": {"height": 48}},
        {"renditions": [{"height": 8}]},
        {"renditions": [{"height": 48, "video_bitrate_kbps": 10}]},
        {"renditions": [{"height": "48"}]},
        {"renditions": [{"height": 48, "fps": 30}]},
        {"renditions": [{"height": 48}, {"height": 48}]},
        {"renditions": [{"height": h} for h in range(100, 800, 100)]},
        {"segment_seconds": 0},
        {"segment_seconds": 61},
        {"segment_seconds": "4"},
        {"hls_segment_type": "webm"},
        {"output_prefix": ""},
        {"output_prefix": 7},
        {"output_prefix": "x" * 2000},
        {"output_prefix": "a\nb"},
        {"bucket": None},
        {"key": 3},
    ],
)
def test_bad_job_parameters_are_400(api: httpx.Client, bucket: str, fields: dict[str, Any]) -> None:
    body = {"bucket": bucket, "key": "clip.mp4", "formats": ["hls"], **fields}
    if body["formats"] is None:
        del body["formats"]
    assert_error(api.post("/videos/jobs", json=body), 400, "InvalidArgument")


def test_jobs_of_missing_things_and_unknown_jobs_are_404(api: httpx.Client, bucket: str) -> None:
    body = {"bucket": bucket, "key": "nope.mp4", "formats": ["hls"]}
    assert_error(api.post("/videos/jobs", json=body), 404, "NoSuchKey")
    body = {"bucket": "no-such-bucket-here", "key": "a", "formats": ["hls"]}
    assert_error(api.post("/videos/jobs", json=body), 404, "NoSuchBucket")
    assert_error(api.get("/videos/jobs/vj_nope"), 404, "NoSuchJob")
    assert_error(api.delete("/videos/jobs/vj_nope"), 404, "NoSuchJob")
    assert_error(api.post("/videos/shares", json={"job_id": "vj_nope"}), 404, "NoSuchJob")
    assert_error(api.delete("/videos/shares/vs_nope"), 404, "NoSuchShare")
    assert_error(api.post("/videos/jobs", content=b"{not json"), 400, "MalformedJSON")


def test_jobs_are_listed_by_bucket_and_status(
    api: httpx.Client, bucket: str, bucket_name: str
) -> None:
    done = run_job(api, bucket)
    api.put(f"/buckets/{bucket}/objects/bad.mp4", content=b"junk" * 100)
    created = api.post(
        "/videos/jobs", json={"bucket": bucket, "key": "bad.mp4", "formats": ["hls"]}
    )
    failed = wait_for(api, created.json()["job_id"])
    assert failed["status"] == "failed"

    def ids(**params: str) -> list[str]:
        listed = api.get("/videos/jobs", params=params)
        assert listed.status_code == 200, listed.text
        return [job["job_id"] for job in listed.json()["jobs"]]

    assert ids(bucket=bucket) == [done["job_id"], failed["job_id"]]
    assert ids(bucket=bucket, status="completed") == [done["job_id"]]
    assert ids(bucket=bucket, status="failed") == [failed["job_id"]]
    assert ids(bucket=bucket, status="queued") == []
    assert {done["job_id"], failed["job_id"]} <= set(ids())
    assert_error(api.get("/videos/jobs", params={"status": "done"}), 400, "InvalidArgument")
    assert_error(api.get("/videos/jobs", params={"bucket": "no-such-bkt"}), 404, "NoSuchBucket")


def test_cancelling_a_job_removes_its_outputs_and_shares(api: httpx.Client, bucket: str) -> None:
    api.put(f"/buckets/{bucket}/objects/videos/keep.txt", content=b"not an output")
    job = run_job(api, bucket, formats=["hls", "dash"], output_prefix="videos")
    assert len(output_keys(api, bucket, "videos/")) > 5
    links = share(api, job["job_id"])
    assert fetch(links["hls_url"]).status_code == 200
    assert api.delete(f"/videos/jobs/{job['job_id']}").status_code == 204
    assert output_keys(api, bucket, "videos/") == ["videos/keep.txt"]
    assert_error(api.get(f"/videos/jobs/{job['job_id']}"), 404, "NoSuchJob")
    assert_error(fetch(links["hls_url"]), 404, "NoSuchShare")
    assert_error(api.delete(f"/videos/shares/{links['share_id']}"), 404, "NoSuchShare")
    assert job["job_id"] not in [j["job_id"] for j in api.get("/videos/jobs").json()["jobs"]]


def test_cancelling_a_job_that_has_not_finished_leaves_nothing(
    api: httpx.Client, bucket: str
) -> None:
    body = {"bucket": bucket, "key": "clip.mp4", "formats": ["hls", "dash"]}
    jobs = [api.post("/videos/jobs", json=body).json() for _ in range(3)]
    for job in jobs:
        assert job["status"] == "queued"
        assert api.delete(f"/videos/jobs/{job['job_id']}").status_code == 204
    time.sleep(1.0)
    assert output_keys(api, bucket, "videos/") == []
    for job in jobs:
        assert_error(api.get(f"/videos/jobs/{job['job_id']}"), 404, "NoSuchJob")


# -- shares ------------------------------------------------------------------------------


def test_a_share_expires(api: httpx.Client, bucket: str) -> None:
    job = run_job(api, bucket)
    links = share(api, job["job_id"], expires_in=1)
    assert links["expires_at"].endswith("Z")
    time.sleep(1.2)
    assert_error(fetch(links["hls_url"]), 403, "SignatureExpired")


def test_a_tampered_token_is_refused_and_a_revoked_share_is_gone(
    api: httpx.Client, bucket: str
) -> None:
    job = run_job(api, bucket)
    links = share(api, job["job_id"])
    token = links["token"]
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert_error(fetch(links["hls_url"].replace(token, flipped)), 403, "SignatureInvalid")
    assert_error(fetch(links["hls_url"].replace(token, "garbage")), 403, "SignatureInvalid")
    other = share(api, job["job_id"])
    assert api.delete(f"/videos/shares/{links['share_id']}").status_code == 204
    assert_error(fetch(links["hls_url"]), 404, "NoSuchShare")
    assert_error(api.delete(f"/videos/shares/{links['share_id']}"), 404, "NoSuchShare")
    assert fetch(other["hls_url"]).status_code == 200  # other shares of the job still play


def test_playback_reaches_only_the_jobs_outputs(api: httpx.Client, bucket: str) -> None:
    api.put(f"/buckets/{bucket}/objects/out/secret.txt", content=b"secret")
    api.put(f"/buckets/{bucket}/objects/out/hls/notes.txt", content=b"secret")
    job = run_job(api, bucket, output_prefix="out/")
    play = share(api, job["job_id"])["hls_url"].rsplit("/hls/", 1)[0]
    assert fetch(play + "/hls/master.m3u8").status_code == 200
    for path in (
        "/secret.txt",
        "/hls/notes.txt",
        "/hls/missing.ts",
        "/hls/%2e%2e/secret.txt",
        "/hls/..%2Fsecret.txt",
        "/%2e%2e/%2e%2e/clip.mp4",
        "/dash/manifest.mpd",
        "/",
    ):
        assert_error(fetch(play + path), 404, "NotFound")
    assert fetch(play + "/hls/master.m3u8", auth=("bk_nobody", "sk_x")).status_code == 200
    assert httpx.post(play + "/hls/master.m3u8").status_code == 405


def test_share_parameters_are_checked(api: httpx.Client, bucket: str) -> None:
    job = run_job(api, bucket)
    for expires_in in (0, 604801, "60", 1.5):
        body = {"job_id": job["job_id"], "expires_in": expires_in}
        assert_error(api.post("/videos/shares", json=body), 400, "InvalidArgument")
    assert_error(api.post("/videos/shares", json={}), 400, "InvalidArgument")
    default = api.post("/videos/shares", json={"job_id": job["job_id"]})
    assert default.status_code == 201, default.text


# -- ownership ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mallory(server: ServerProcess) -> Account:
    with server.client() as admin:
        return create_account(admin, prefix="mallory")


@pytest.fixture
def as_mallory(server: ServerProcess, mallory: Account) -> Iterator[httpx.Client]:
    with mallory.client(server) as client:
        yield client


def test_a_user_cannot_touch_videos_of_a_bucket_it_does_not_own(
    api: httpx.Client, bucket: str, as_mallory: httpx.Client
) -> None:
    job = run_job(api, bucket)
    links = share(api, job["job_id"])
    denied: list[Callable[[], httpx.Response]] = [
        lambda: as_mallory.post("/videos/thumbnails", json={"bucket": bucket, "key": "clip.mp4"}),
        lambda: as_mallory.post(
            "/videos/jobs", json={"bucket": bucket, "key": "clip.mp4", "formats": ["hls"]}
        ),
        lambda: as_mallory.get(f"/videos/jobs/{job['job_id']}"),
        lambda: as_mallory.get("/videos/jobs", params={"bucket": bucket}),
        lambda: as_mallory.delete(f"/videos/jobs/{job['job_id']}"),
        lambda: as_mallory.post("/videos/shares", json={"job_id": job["job_id"]}),
        lambda: as_mallory.delete(f"/videos/shares/{links['share_id']}"),
    ]
    for request in denied:
        assert_error(request(), 403, "AccessDenied")
    assert job["job_id"] not in [j["job_id"] for j in as_mallory.get("/videos/jobs").json()["jobs"]]
    assert wait_for(api, job["job_id"])["status"] == "completed"
    assert fetch(links["hls_url"]).status_code == 200
    assert output_keys(api, bucket, "clip.mp4.thumb") == []


def test_a_user_runs_jobs_in_its_own_bucket(
    as_mallory: httpx.Client, clip: bytes, bucket_name: str
) -> None:
    assert as_mallory.post("/buckets", json={"name": bucket_name}).status_code == 201
    as_mallory.put(f"/buckets/{bucket_name}/objects/clip.mp4", content=clip)
    job = run_job(as_mallory, bucket_name)
    listed = as_mallory.get("/videos/jobs").json()["jobs"]
    assert [j["job_id"] for j in listed] == [job["job_id"]]
    assert fetch(share(as_mallory, job["job_id"])["hls_url"]).status_code == 200


def test_deleting_the_bucket_deletes_its_jobs(api: httpx.Client, bucket: str) -> None:
    job = run_job(api, bucket)
    links = share(api, job["job_id"])
    assert api.delete(f"/buckets/{bucket}", params={"force": "true"}).status_code == 204
    assert_error(api.get(f"/videos/jobs/{job['job_id']}"), 404, "NoSuchJob")
    assert_error(fetch(links["hls_url"]), 404, "NoSuchShare")


# -- restarts ----------------------------------------------------------------------------


def test_jobs_survive_restarts_and_an_unfinished_one_runs_again(
    server_factory: Callable[..., ServerProcess], clip: bytes
) -> None:
    proc = server_factory()
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "media"}).status_code == 201
        api.put("/buckets/media/objects/clip.mp4", content=clip)
        done = run_job(api, "media")
        links = share(api, done["job_id"])
    proc.restart()  # graceful: the jobs come back from the final snapshot
    with proc.client() as api:
        assert api.get(f"/videos/jobs/{done['job_id']}").json() == done
        assert fetch(links["hls_url"]).status_code == 200
        body = {"bucket": "media", "key": "clip.mp4", "formats": ["hls", "dash"]}
        pending = api.post("/videos/jobs", json=body).json()
        assert api.get(f"/videos/jobs/{pending['job_id']}").json()["status"] != "completed"
    proc.restart(crash=True)  # a crash: the journal replays; the job was queued or processing
    with proc.client() as api:
        listed = [j["job_id"] for j in api.get("/videos/jobs").json()["jobs"]]
        assert listed == [done["job_id"], pending["job_id"]]
        again = wait_for(api, pending["job_id"])
        assert again["status"] == "completed", again["error"]
        played = play_hls(share(api, pending["job_id"])["hls_url"])
        assert [totals["video"] for totals in played.values()] == [SECONDS * FPS]
    assert not any((proc.data_dir / "scratch").iterdir())
