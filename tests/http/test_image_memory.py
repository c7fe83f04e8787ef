"""Image renders give their memory back and stay within the memory budget (over HTTP).

A 25-megapixel PNG decodes to ~100 MB. Rendered inside the server process, that memory
stayed in the allocator after the answer (the server's resident size grew by hundreds of
MB and never came down); rendered in a worker process that is retired when idle, the
server's own resident size barely moves and the workers are gone a few seconds later.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from tests import process_leaks
from tests.serverproc import ServerProcess

SIDE = 5000
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def big_png() -> bytes:
    ramp = Image.linear_gradient("L").resize((SIDE, SIDE))
    picture = Image.merge("RGB", (ramp, ramp.rotate(90), ramp.rotate(180)))
    sink = io.BytesIO()
    picture.save(sink, format="PNG", compress_level=1)
    return sink.getvalue()


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_rendering_a_large_image_gives_the_memory_back(
    server_factory: Callable[..., ServerProcess], big_png: bytes
) -> None:
    server = server_factory()
    assert server.process is not None
    pid = server.process.pid
    with server.client() as api:
        assert api.post("/buckets", json={"name": "big"}).status_code == 201
        assert api.put("/buckets/big/objects/a.png", content=big_png).status_code == 200
        time.sleep(0.5)
        before = rss_mib(pid)
        with ThreadPoolExecutor(2) as pool:
            widths = [640, 700, 760, 820]
            answers = list(
                pool.map(
                    lambda w: api.get("/buckets/big/images/a.png", params={"width": w}), widths
                )
            )
        for width, answer in zip(widths, answers, strict=True):
            assert answer.status_code == 200, answer.text
            assert Image.open(io.BytesIO(answer.content)).size == (width, width)
        grown = rss_mib(pid) - before
        assert grown < 40, f"the server kept {grown:.0f} MiB after rendering"
        # The render workers are retired once idle: only the fork server may remain.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            helpers = children(pid)
            if sum(rss_mib(child) for child in helpers if os.path.exists(f"/proc/{child}")) < 80:
                break
            time.sleep(0.25)
        else:
            raise AssertionError("render workers still hold memory 15 s after the last render")


def test_renders_over_the_budget_wait_their_turn_and_still_run(
    server_factory: Callable[..., ServerProcess], big_png: bytes
) -> None:
    server = server_factory(SERVICE_IMAGE_MEMORY_BUDGET=str(8 * MIB), SERVICE_IMAGE_WORKERS="3")
    with server.client() as api:
        assert api.post("/buckets", json={"name": "tight"}).status_code == 201
        assert api.put("/buckets/tight/objects/a.png", content=big_png).status_code == 200
        with ThreadPoolExecutor(3) as pool:
            answers = list(
                pool.map(
                    lambda w: api.get(
                        "/buckets/tight/images/a.png", params={"width": w, "format": "jpeg"}
                    ),
                    (100, 200, 300),
                )
            )
        assert [answer.status_code for answer in answers] == [200, 200, 200]
        assert [answer.headers["X-Image-Width"] for answer in answers] == ["100", "200", "300"]
        # Admitted one at a time: the renders after the first waited for the budget.
        scraped = api.get("/metrics").text
        waits = {
            (sample.name, sample.labels.get("le")): sample.value
            for family in text_string_to_metric_families(scraped)
            if family.name == "service_image_render_wait_seconds"
            for sample in family.samples
        }
        assert waits[("service_image_render_wait_seconds_count", None)] == 3
        # Two of them waited for at least one whole render of a 5000 x 5000 PNG, which takes
        # far longer than 50 ms (how much longer depends on the machine's speed and load).
        assert waits[("service_image_render_wait_seconds_bucket", "0.05")] <= 1


def test_render_workers_stop_with_the_server(
    server_factory: Callable[..., ServerProcess], big_png: bytes
) -> None:
    server = server_factory()
    assert server.process is not None
    pid = server.process.pid
    with server.client() as api:
        assert api.post("/buckets", json={"name": "stop"}).status_code == 201
        small = io.BytesIO()
        Image.new("RGB", (64, 64), (1, 2, 3)).save(small, format="PNG")
        assert api.put("/buckets/stop/objects/s.png", content=small.getvalue()).status_code == 200
        assert api.get("/buckets/stop/images/s.png", params={"width": 8}).status_code == 200
    helpers = children(pid)
    assert helpers, "renders run in worker processes"
    assert server.stop() == 0
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{child}") for child in helpers):
        assert time.monotonic() < deadline, "a render worker outlived the server"
        time.sleep(0.1)


def test_render_workers_end_with_a_killed_server(
    server_factory: Callable[..., ServerProcess], big_png: bytes
) -> None:
    """A SIGKILL (the OOM killer) cannot shut the pool down: the workers, the fork server
    and multiprocessing's resource tracker must still end, not wait for ever."""
    server = server_factory()
    assert server.process is not None
    pid = server.process.pid
    with server.client() as api:
        assert api.post("/buckets", json={"name": "killed"}).status_code == 201
        assert api.put("/buckets/killed/objects/a.png", content=big_png).status_code == 200
    with ThreadPoolExecutor(1) as pool:
        rendering = pool.submit(
            httpx.get,
            f"{server.api}/buckets/killed/images/a.png",
            params={"width": 900},
            auth=server.auth,
            timeout=60,
        )
        deadline = time.monotonic() + 30
        while not (workers := [p for c in children(pid) for p in children(c)]):
            assert time.monotonic() < deadline, "no render worker started"
            time.sleep(0.05)
        helpers = children(pid) + workers
        server.kill()  # mid-render
        with contextlib.suppress(httpx.HTTPError):
            rendering.result()
    deadline = time.monotonic() + 15
    while left := [each for each in helpers if process_leaks.alive(each)]:
        assert time.monotonic() < deadline, f"{left} outlived the killed server"
        time.sleep(0.1)
