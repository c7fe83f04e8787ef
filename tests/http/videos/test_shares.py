"""Black-box tests of video shares and playback: ranges, expiry, tokens, scope, owners.

The clips and the player come from ``videokit``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from tests.http.test_buckets import assert_error
from tests.http.videokit import fetch, output_keys, run_job, share, wait_for


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
