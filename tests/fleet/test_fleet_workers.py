"""Jobs on a real fleet: a real ``redis-server``, real worker processes, the real server.

Each test stands for one thing the issue asks of the fleet: a job waits for a worker; a
worker killed mid-job loses its lease and another finishes the job, with nothing of the
lost attempt visible; several jobs over two workers complete exactly once; Redis restarted
under queued jobs; the server killed while a worker runs a job; and a worker that holds no
credential at all. Workers are held mid-job at a known point (after their first upload,
``SERVICE_MEDIA_TEST_HOLD``) rather than raced.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.client import ServiceClient
from tests.fleet.fleetkit import (
    RedisServer,
    Worker,
    object_events_until,
    open_sessions,
    versions,
    wait_for_file,
    wait_job,
)
from tests.http.videokit import play_hls, share
from tests.serverproc import REPO_ROOT, ServerProcess

MASTERS = ("hls/master.m3u8", "dash/manifest.mpd")


def new_bucket(api: httpx.Client, name: str, clip: bytes, *, versioned: bool = False) -> None:
    assert api.post("/buckets", json={"name": name}).status_code == 201
    if versioned:
        patch = api.patch(f"/buckets/{name}", json={"versioning_enabled": True})
        assert patch.status_code == 200, patch.text
    assert api.put(f"/buckets/{name}/objects/clip.mp4", content=clip).status_code == 200


def new_job(api: httpx.Client, bucket: str, key: str = "clip.mp4") -> dict[str, Any]:
    body = {"bucket": bucket, "key": key, "formats": ["hls", "dash"], "segment_seconds": 1}
    created = api.post("/videos/jobs", json=body)
    assert created.status_code == 202, created.text
    job: dict[str, Any] = created.json()
    assert job["attempts"] == 0 and job["worker"] is None and job["status"] == "queued"
    return job


def assert_published_once(api: httpx.Client, bucket: str, job: dict[str, Any]) -> None:
    """One version of each output (a versioned bucket keeps any second one), no session
    left open, and the job's outputs play."""
    prefix = job["output_prefix"]
    found = versions(api, bucket, prefix)
    keys = Counter(item["key"] for item in found)
    assert keys and all(count == 1 for count in keys.values()), keys
    assert not any(item["is_delete_marker"] for item in found)
    assert {prefix + name for name in MASTERS} <= set(keys)
    assert [s for s in open_sessions(api, bucket) if s["key"].startswith(prefix)] == []
    played = play_hls(share(api, job["job_id"])["hls_url"])
    assert played and all(totals["video"] > 0 for totals in played.values())


def test_a_job_waits_for_a_worker_and_completes_when_one_starts(
    fleet_server: Callable[..., ServerProcess],
    workers: Callable[..., Worker],
    redis: RedisServer,
    clip: bytes,
) -> None:
    server = fleet_server()
    with server.client() as api:
        new_bucket(api, "waits", clip)
        job = new_job(api, "waits")
        # No worker: the task sits in Redis and the job stays queued.
        assert wait_job(api, job["job_id"], ("queued",))["attempts"] == 0
        redis.wait_queued(1)
        worker = workers(server, "late-worker")
        worker.start()
        done = wait_job(api, job["job_id"], ("completed", "failed"))
        assert done["status"] == "completed", (done, worker.log())
        assert done["attempts"] == 1 and done["worker"] == "late-worker"
        assert done["progress"] == 1.0
        assert_published_once(api, "waits", done)
        listed = api.get("/videos/workers").json()["workers"]
        assert [(w["id"], w["completed"], w["failed"], w["running"]) for w in listed] == [
            ("late-worker", 1, 0, 0)
        ]
        metrics = api.get("/metrics").text
        assert 'service_media_worker_jobs_total{outcome="completed",worker="late-worker"} 1.0' in (
            metrics
        )
    # The Python client and svc show the attempt and the worker.
    with ServiceClient(server.connection_string) as client:
        seen = client.videos.get_job(job["job_id"])
        assert (seen.attempts, seen.worker) == (1, "late-worker")
    ran = subprocess.run(
        [sys.executable, "-m", "service.cli", "video", "status", "env", job["job_id"]],
        env={**os.environ, "SVC_URL": server.connection_string, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "\tattempt 1 on late-worker\t" in ran.stdout, ran


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_worker_killed_mid_job_loses_it_to_another_and_nothing_of_it_shows(
    fleet_server: Callable[..., ServerProcess],
    workers: Callable[..., Worker],
    tmp_path: Path,
    clip: bytes,
    processes: str,
) -> None:
    server = fleet_server(SERVICE_WORKERS=processes)
    hold = tmp_path / "hold"
    hold.mkdir()
    with server.client() as api:
        new_bucket(api, "killed", clip, versioned=True)
        job = new_job(api, "killed")
        doomed = workers(server, "doomed", SERVICE_MEDIA_TEST_HOLD=str(hold))
        doomed.start()
        wait_for_file(hold / f"{job['job_id']}.held")
        running = api.get(f"/videos/jobs/{job['job_id']}").json()
        assert running["status"] == "processing" and running["worker"] == "doomed"
        assert running["attempts"] == 1
        # The lost attempt's first output is stored, invisible: an open session only.
        prefix = job["output_prefix"]
        assert [s for s in open_sessions(api, "killed") if s["key"].startswith(prefix)]
        assert versions(api, "killed", prefix) == []
        doomed.signal(signal.SIGKILL)
        survivor = workers(server, "survivor")
        survivor.start()
        done = wait_job(api, job["job_id"], ("completed", "failed"))
        assert done["status"] == "completed", (done, survivor.log())
        assert done["attempts"] == 2 and done["worker"] == "survivor"
        assert_published_once(api, "killed", done)
        metrics = api.get("/metrics").text
        assert "service_media_lease_expiries_total 1.0" in metrics
        listed = {w["id"]: w for w in api.get("/videos/workers").json()["workers"]}
        assert listed["doomed"]["failed"] == 1 and listed["doomed"]["running"] == 0
        assert listed["survivor"]["completed"] == 1


def test_several_jobs_over_two_workers_each_complete_exactly_once(
    fleet_server: Callable[..., ServerProcess],
    workers: Callable[..., Worker],
    clip: bytes,
) -> None:
    server = fleet_server()
    with server.client() as api:
        new_bucket(api, "many", clip, versioned=True)
        jobs = [new_job(api, "many") for _ in range(4)]
        for name in ("left", "right"):
            workers(server, name).start()
        done = [wait_job(api, job["job_id"], ("completed", "failed")) for job in jobs]
        assert all(job["status"] == "completed" for job in done), done
        assert {job["worker"] for job in done} <= {"left", "right"}
        assert api.put("/buckets/many/objects/zz-end", content=b"end").status_code == 200
        events = object_events_until(api, "many", "zz-end")
        created = Counter(e["key"] for e in events if e["type"] == "object.created")
        for job in done:
            for name in MASTERS:
                assert created[job["output_prefix"] + name] == 1, created
            assert_published_once(api, "many", job)


def test_jobs_queued_when_redis_restarts_are_sent_again_and_complete(
    fleet_server: Callable[..., ServerProcess],
    workers: Callable[..., Worker],
    redis: RedisServer,
    clip: bytes,
) -> None:
    server = fleet_server()
    with server.client() as api:
        new_bucket(api, "restart", clip)
        jobs = [new_job(api, "restart") for _ in range(2)]
        assert wait_job(api, jobs[0]["job_id"], ("queued",))
        redis.wait_queued(2)
        redis.kill()  # no persistence: the queued tasks are gone with it
        redis.start()
        assert redis.queued() == 0
        workers(server, "after-restart").start()
        for job in jobs:
            done = wait_job(api, job["job_id"], ("completed", "failed"))
            assert done["status"] == "completed" and done["attempts"] == 1, done


def test_a_job_survives_the_server_killed_while_a_worker_runs_it(
    fleet_server: Callable[..., ServerProcess],
    workers: Callable[..., Worker],
    tmp_path: Path,
    clip: bytes,
) -> None:
    server = fleet_server()
    hold = tmp_path / "hold"
    hold.mkdir()
    with server.client() as api:
        new_bucket(api, "crash", clip, versioned=True)
        job = new_job(api, "crash")
    worker = workers(server, "steady", SERVICE_MEDIA_TEST_HOLD=str(hold))
    worker.start()
    wait_for_file(hold / f"{job['job_id']}.held")
    server.restart(crash=True)
    (hold / f"{job['job_id']}.go").touch()
    with server.client() as api:
        done = wait_job(api, job["job_id"], ("completed", "failed"))
        assert done["status"] == "completed", (done, worker.log())
        assert done["attempts"] == 1 and done["worker"] == "steady"
        assert_published_once(api, "crash", done)


def test_a_worker_needs_no_credentials_only_its_tasks_tokens(
    fleet_server: Callable[..., ServerProcess],
    workers: Callable[..., Worker],
    clip: bytes,
) -> None:
    server = fleet_server()
    with server.client() as api:
        new_bucket(api, "bare", clip)
        job = new_job(api, "bare")
        worker = workers(server, "bare-worker")
        worker.start(clean_env=True)  # no SERVICE_* setting, no key, no data dir
        done = wait_job(api, job["job_id"], ("completed", "failed"))
        assert done["status"] == "completed", (done, worker.log())
    credentials = {server.access_key, server.secret_key}
    assert not any(secret in worker.log() for secret in credentials)
    # The worker's requests carried its job's token (their access lines name the job's
    # attempt as the credential); the lines are written in batches, so wait for the last.
    deadline = time.monotonic() + 10
    while "/api/v1/videos/jobs/{job_id}/complete" not in job_routes(server, job["job_id"]):
        assert time.monotonic() < deadline, job_routes(server, job["job_id"])
        time.sleep(0.1)
    assert "vjt." not in server.logs() and "vjt." not in worker.log()
    # A few requests a job, whatever its number of outputs: every output went up in one
    # request (none is over the size that goes alone), then one completion.
    routes = job_routes(server, job["job_id"])
    assert routes["/api/v1/videos/jobs/{job_id}/claim"] == 1
    assert routes["/api/v1/buckets/{bucket}/objects/{key}"] == 1  # the source
    assert routes["/api/v1/videos/jobs/{job_id}/outputs"] == 1
    assert routes["/api/v1/videos/jobs/{job_id}/complete"] == 1
    assert set(routes) - {"/api/v1/videos/jobs/{job_id}/heartbeat"} == {
        "/api/v1/videos/jobs/{job_id}/claim",
        "/api/v1/buckets/{bucket}/objects/{key}",
        "/api/v1/videos/jobs/{job_id}/outputs",
        "/api/v1/videos/jobs/{job_id}/complete",
    }


def job_routes(server: ServerProcess, job_id: str) -> Counter[str]:
    """Routes of the access lines whose credential is an attempt of ``job_id``, counted."""
    return Counter(
        part.split("=", 1)[1]
        for line in server.logs().splitlines()
        if "service.access" in line and f"credential={job_id}#" in line
        for part in line.split()
        if part.startswith("route=")
    )
