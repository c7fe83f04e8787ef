"""A job token's reach and a lost attempt's fate, with the test as the worker.

The test takes a task straight off the real Redis queue and speaks the worker's side of
the protocol over HTTP itself, so it can use a token where no worker would (403 outside the
job's source and prefix), stop heartbeating at will (the lease lapses), and complete late
(refused, its uploads aborted). The default mode (no queue) is checked unchanged, and bad
settings are one line.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.fleet.fleetkit import (
    LeaseKeeper,
    RedisServer,
    open_sessions,
    take_task,
    versions,
    wait_job,
)
from tests.fleet.test_fleet_workers import new_bucket, new_job
from tests.http.videokit import run_job
from tests.serverproc import REPO_ROOT, ServerProcess


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def claim(server: ServerProcess, job_id: str, token: str, worker: str = "test") -> httpx.Response:
    return httpx.post(
        f"{server.api}/videos/jobs/{job_id}/claim",
        json={"worker": worker, "host": "test-host"},
        headers=bearer(token),
    )


def init(server: ServerProcess, token: str, bucket: str, key: str) -> httpx.Response:
    return httpx.post(
        f"{server.api}/multipart/init", json={"bucket": bucket, "key": key}, headers=bearer(token)
    )


def upload(server: ServerProcess, token: str, bucket: str, key: str, data: bytes) -> dict[str, Any]:
    """A session on ``key`` with one part of ``data``, left open: {"upload_id", "parts"}."""
    opened = init(server, token, bucket, key)
    assert opened.status_code == 201, opened.text
    upload_id = opened.json()["upload_id"]
    part = httpx.put(
        f"{server.api}/multipart/{upload_id}/part",
        params={"partNumber": 1},
        content=data,
        headers=bearer(token),
    )
    assert part.status_code == 200, part.text
    return {"upload_id": upload_id, "parts": [{"part_number": 1, "etag": part.json()["etag"]}]}


def test_a_job_token_reaches_only_its_source_and_output_prefix(
    fleet_server: Callable[..., ServerProcess], redis: RedisServer, clip: bytes
) -> None:
    server = fleet_server(SERVICE_MEDIA_LEASE="600")  # the token's reach, not its lease
    with server.client() as api:
        new_bucket(api, "scoped", clip)
        new_bucket(api, "other", clip)
        assert api.put("/buckets/scoped/objects/secret.txt", content=b"no").status_code == 200
        job = new_job(api, "scoped")
    job_id, attempt, claim_token = take_task(redis)
    assert (job_id, attempt) == (job["job_id"], 1)
    # A claim token is for claiming only.
    source_url = f"{server.api}/buckets/scoped/objects/clip.mp4"
    assert httpx.get(source_url, headers=bearer(claim_token)).status_code == 403
    granted = claim(server, job_id, claim_token)
    assert granted.status_code == 200, granted.text
    token = granted.json()["token"]
    assert granted.json()["source"] == {
        "bucket": "scoped",
        "key": "clip.mp4",
        "size_bytes": len(clip),
    }
    prefix = job["output_prefix"]
    # Inside: the source, and uploads under the prefix.
    got = httpx.get(source_url, headers=bearer(token))
    assert got.status_code == 200 and got.content == clip
    assert init(server, token, "scoped", prefix + "hls/master.m3u8").status_code == 201
    # Outside: 403 AccessDenied, whatever the route.
    refused = {
        "another key": httpx.get(
            f"{server.api}/buckets/scoped/objects/secret.txt", headers=bearer(token)
        ),
        "another bucket": httpx.get(
            f"{server.api}/buckets/other/objects/clip.mp4", headers=bearer(token)
        ),
        "an upload outside the prefix": init(server, token, "scoped", "elsewhere/x.ts"),
        "the prefix itself": init(server, token, "scoped", prefix),
        "a plain PUT under the prefix": httpx.put(
            f"{server.api}/buckets/scoped/objects/{prefix}hls/x.ts",
            content=b"x",
            headers=bearer(token),
        ),
        "a listing": httpx.get(f"{server.api}/buckets/scoped/objects", headers=bearer(token)),
        "the bucket list": httpx.get(f"{server.api}/buckets", headers=bearer(token)),
        "a delete": httpx.delete(source_url, headers=bearer(token)),
        "the job itself": httpx.get(f"{server.api}/videos/jobs/{job_id}", headers=bearer(token)),
    }
    for what, response in refused.items():
        assert response.status_code == 403, (what, response.text)
        assert response.json()["error"]["code"] == "AccessDenied", what
    tampered = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    answer = httpx.get(source_url, headers=bearer(tampered))
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "SignatureInvalid"
    # Once the attempt is over (cancelled here), the same token reaches nothing.
    with server.client() as api:
        assert api.delete(f"/videos/jobs/{job_id}").status_code == 204
    assert httpx.get(source_url, headers=bearer(token)).status_code == 403


def test_a_lapsed_attempts_late_completion_is_refused_and_its_uploads_removed(
    fleet_server: Callable[..., ServerProcess], redis: RedisServer, clip: bytes
) -> None:
    server = fleet_server()
    with server.client() as api:
        new_bucket(api, "late", clip, versioned=True)
        job = new_job(api, "late")
        job_id, _, first_claim = take_task(redis)
        prefix = job["output_prefix"]
        granted = claim(server, job_id, first_claim, "stalled").json()["token"]
        with LeaseKeeper(server.api, job_id, granted) as first:
            outputs = {
                "hls/master.m3u8": upload(
                    server, first.token, "late", prefix + "hls/master.m3u8", b"#EXTM3U\n"
                )
            }
        assert len(open_sessions(api, "late")) == 1
        # No more heartbeats: the lease lapses, the attempt ends, the job is sent again.
        again, attempt, second_claim = take_task(redis, timeout=30)
        assert (again, attempt) == (job_id, 2)
        lapsed = api.get(f"/videos/jobs/{job_id}").json()
        assert lapsed["status"] == "queued" and lapsed["attempts"] == 1
        assert open_sessions(api, "late") == []  # the lost attempt's upload is gone
        # The same task delivered twice: the first claim wins, the copy is refused.
        assert claim(server, job_id, first_claim).status_code == 409
        second = claim(server, job_id, second_claim, "fresh")
        assert second.status_code == 200
        with LeaseKeeper(server.api, job_id, second.json()["token"]) as lease:
            assert claim(server, job_id, second_claim).status_code == 409
            late = httpx.post(
                f"{server.api}/videos/jobs/{job_id}/complete",
                json={"outputs": outputs},
                headers=bearer(first.token),
            )
            assert late.status_code == 409 and late.json()["error"]["code"] == "InvalidState"
            beat = httpx.post(
                f"{server.api}/videos/jobs/{job_id}/heartbeat",
                json={},
                headers=bearer(first.token),
            )
            assert beat.status_code == 409
            lost_init = init(server, first.token, "late", prefix + "hls/master.m3u8")
            assert lost_init.status_code == 403
            good = {
                "hls/master.m3u8": upload(
                    server, lease.token, "late", prefix + "hls/master.m3u8", b"#EXTM3U\n#good\n"
                )
            }
            done = httpx.post(
                f"{server.api}/videos/jobs/{job_id}/complete",
                json={"outputs": good},
                headers=bearer(lease.token),
            )
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "completed" and done.json()["attempts"] == 2
        assert done.json()["worker"] == "fresh"
        # Exactly once: a retried completion answers the same, and one version exists.
        retried = httpx.post(
            f"{server.api}/videos/jobs/{job_id}/complete",
            json={"outputs": good},
            headers=bearer(lease.token),
        )
        assert retried.status_code == 200 and retried.json()["attempts"] == 2
        found = versions(api, "late", prefix)
        assert [(v["key"], v["size_bytes"]) for v in found] == [(prefix + "hls/master.m3u8", 14)]
        assert api.get(f"/buckets/late/objects/{prefix}hls/master.m3u8").content.endswith(
            b"#good\n"
        )


def test_a_worker_reports_a_job_that_cannot_be_packaged_and_it_fails_once(
    fleet_server: Callable[..., ServerProcess], redis: RedisServer, clip: bytes
) -> None:
    server = fleet_server(SERVICE_MEDIA_LEASE="600")  # the verdict, not the lease
    with server.client() as api:
        new_bucket(api, "fails", clip)
        job = new_job(api, "fails")
        job_id, _, claim_token = take_task(redis)
        token = claim(server, job_id, claim_token).json()["token"]
        failed = httpx.post(
            f"{server.api}/videos/jobs/{job_id}/fail",
            json={"error": "the source is not a video"},
            headers=bearer(token),
        )
        assert failed.status_code == 200
        assert (
            failed.json()["status"] == "failed"
            and failed.json()["error"] == "the source is not a video"
        )
        again = httpx.post(
            f"{server.api}/videos/jobs/{job_id}/fail", json={"error": "x"}, headers=bearer(token)
        )
        assert again.status_code == 409
        assert wait_job(api, job["job_id"], ("failed",))["attempts"] == 1
        time.sleep(1.0)
        assert redis.queued() == 0  # a failed job is not sent again


def test_without_a_queue_jobs_run_in_the_server_as_before(
    server_factory: Callable[..., ServerProcess], clip: bytes
) -> None:
    server = server_factory()
    with server.client() as api:
        new_bucket(api, "embedded", clip)
        job = run_job(api, "embedded")
        assert job["attempts"] == 1 and job["worker"] is None
        assert api.get("/videos/workers").json() == {"workers": []}
        refused = api.post(f"/videos/jobs/{job['job_id']}/heartbeat", json={})
        assert refused.status_code == 401  # no job token; the route exists
        metrics = api.get("/metrics").text
        assert "service_media_fleet_queued 0.0" in metrics


def test_a_bad_queue_setting_is_one_line_and_exit_2(tmp_path: Any) -> None:
    for env, flag in (("ftp://host/", None), (None, "redis://host:99999/0")):
        argv = [sys.executable, "-m", "service", "--data-dir", str(tmp_path / "d")]
        extra = {} if env is None else {"SERVICE_MEDIA_QUEUE": env}
        if flag is not None:
            argv += ["--media-queue", flag]
        ran = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), **extra},
            timeout=60,
        )
        assert ran.returncode == 2
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and "MEDIA_QUEUE" in lines[0].upper().replace("-", "_"), lines
        assert not (tmp_path / "d").exists()


def test_the_worker_command_refuses_bad_options_in_one_line() -> None:
    for argv in (
        ["--queue", "http://x", "--server", "http://127.0.0.1:1"],
        ["--queue", "redis://127.0.0.1:1/0", "--server", "ftp://x"],
        ["--queue", "redis://127.0.0.1:1/0", "--server", "http://x", "--concurrency", "0"],
        ["--server", "http://x"],
    ):
        ran = subprocess.run(
            [sys.executable, "-m", "service.media.worker", *argv],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
            timeout=60,
        )
        assert ran.returncode == 2, ran
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("service-media-worker: "), lines
