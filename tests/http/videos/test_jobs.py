"""Black-box tests of video packaging jobs: create, play, list, fail, cancel, restart.

The clips and the player come from ``videokit``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.http.test_buckets import assert_error
from tests.http.videokit import (
    FPS,
    SECONDS,
    fetch,
    output_keys,
    play_dash,
    play_hls,
    run_job,
    share,
    wait_for,
)
from tests.serverproc import ServerProcess

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
