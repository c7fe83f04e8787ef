"""The console's job view with a media fleet: a real ``redis-server``, real worker processes.

The job waits for a worker (no attempt shown), runs on one (its name and attempt 1), loses
it (the worker is SIGKILLed mid-job: its lease lapses) and completes on another (attempt 2
on the new worker's name), all seen through the page's own polling, then plays.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.console.test_video import assert_plays
from tests.fleet.fleetkit import TEST_LEASE, RedisServer, Worker, wait_for_file
from tests.http.videokit import make_clip
from tests.serverproc import ServerProcess

BUCKET = "fleet-videos"
KEY = "clips/clip.mp4"


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def console_server(
    tmp_path_factory: pytest.TempPathFactory, redis: RedisServer
) -> Iterator[ServerProcess]:
    """This module's server sends its jobs to a fleet (the browser fixtures use it)."""
    proc = ServerProcess(
        tmp_path_factory.mktemp("fleet-console") / "data",
        env_overrides={"SERVICE_MEDIA_QUEUE": redis.url, "SERVICE_MEDIA_LEASE": TEST_LEASE},
    )
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[list[Worker]]:
    """Workers the test starts; all killed at the end."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.kill()


def test_the_job_view_shows_each_attempt_and_its_worker(
    admin_page: Page,
    admin_api: httpx.Client,
    console_server: ServerProcess,
    redis: RedisServer,
    fleet: list[Worker],
    tmp_path: Path,
) -> None:
    clip = make_clip(tmp_path / "clip.mp4", seconds=3)
    assert admin_api.post("/buckets", json={"name": BUCKET}).status_code == 201
    stored = admin_api.put(
        f"/buckets/{BUCKET}/objects/{KEY}", content=clip, headers={"Content-Type": "video/mp4"}
    )
    assert stored.status_code == 200, stored.text
    page = admin_page
    page.goto(f"/console/#/buckets/{BUCKET}/object?key={KEY.replace('/', '%2F')}")
    panel = page.get_by_role("region", name="Video")
    status = panel.get_by_role("status")
    runner = panel.get_by_label("Packaging worker")

    panel.get_by_role("button", name="Package for streaming").click()
    # No worker yet: the job waits in the queue, and no attempt has run.
    expect(status).to_have_text("Waiting to be packaged")
    expect(runner).to_be_hidden()
    jobs = admin_api.get("/videos/jobs", params={"bucket": BUCKET}).json()["jobs"]
    assert [job["status"] for job in jobs] == ["queued"]
    job_id = jobs[0]["job_id"]

    hold = tmp_path / "hold"
    hold.mkdir()
    doomed = Worker("doomed", redis.url, console_server.url, tmp_path)
    doomed.env["SERVICE_MEDIA_TEST_HOLD"] = str(hold)
    fleet.append(doomed)
    doomed.start()
    wait_for_file(hold / f"{job_id}.held")  # mid-job: its outputs sent, not completed
    expect(runner).to_have_text("Attempt 1, on worker doomed")
    expect(status).to_contain_text("Packaging…")

    doomed.kill()  # SIGKILL: the lease lapses and the job is sent again
    survivor = Worker("survivor", redis.url, console_server.url, tmp_path)
    fleet.append(survivor)
    survivor.start()
    expect(status).to_have_text("Packaged for streaming (HLS)", timeout=90_000)
    expect(runner).to_have_text("Attempt 2, on worker survivor")
    panel.get_by_role("button", name="Play").click()
    assert_plays(page, f"Playback of {KEY}")
