"""Every metric docs/operations.md documents moves under the workload that should move it.

One server with short GC and snapshot intervals; a scrape before and after a small workload
(a bucket, a PUT and a GET, a multipart session, a video job on a file that is not a video,
an image variant, an upload that stalls, a stale staging file for the sweep to remove, a
lifecycle pass, a webhook that fails once, a scrub pass that finds a corrupt payload). A
metric that is documented but never fed (as ``service_gc_runs_total`` once was, which made the
GC-stalled alert fire on every healthy server) fails here.
"""

from __future__ import annotations

import base64
import io
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from tests.serverproc import ServerProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
STEADY = {"service_read_only": 0.0, "service_build_info": 1.0, "service_archive_failing": 0.0}
"""Documented metrics that must not move under a healthy workload, with their value.
``service_read_only`` turns 1 only after a journal fault (tests/observability/
test_metrics_exposition.py and the crash suite cover that); ``service_archive_failing`` only
while the archive target fails (tests/archive covers that)."""


def documented_metrics() -> list[str]:
    table = DOC.read_text(encoding="utf-8").split("### Metrics", 1)[1].split("###", 1)[0]
    names: list[str] = []
    for row in table.splitlines():
        if row.startswith("| `service_"):
            names += re.findall(r"`(service_[a-z_]+)`", row.split("|")[1])
    return names


def totals(server: ServerProcess) -> dict[str, float]:
    """Each family's samples summed (histograms by their ``_count``), by documented name."""
    text = httpx.get(server.api + "/metrics", auth=server.auth, timeout=30).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        suffix = {"counter": "_total", "info": "_info"}.get(family.type, "")
        name = family.name + suffix
        total = 0.0
        for sample in family.samples:
            if family.type == "histogram" and not sample.name.endswith("_count"):
                continue
            if family.type == "counter" and not sample.name.endswith("_total"):
                continue
            total += sample.value
        found[name] = total
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("metrics")
    proc = ServerProcess(
        root / "data",
        env_overrides={
            "SERVICE_ARCHIVE": str(root / "archive"),
            "SERVICE_GC_INTERVAL": "0.5",
            "SERVICE_SNAPSHOT_INTERVAL": "0.5",
            "SERVICE_STAGING_TTL": "2",
            "SERVICE_IDLE_TIMEOUT": "1",
            # About 2 s for the scrub's pass over the workload's 2 MB, so its gauge is seen.
            "SERVICE_SCRUB_RATE_MBPS": "1",
        },
    )
    proc.start()
    yield proc
    proc.stop()


def png() -> bytes:
    sink = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 10, 10)).save(sink, format="PNG")
    return sink.getvalue()


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that answers its first delivery late with 500, then 204."""

    calls = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Receiver.calls += 1
        if Receiver.calls == 1:
            time.sleep(0.5)  # the delivery stays pending while the scrapes look
            self.send_response(500)
        else:
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def receiver() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    httpd.shutdown()


def upkeep(server: ServerProcess, api: httpx.Client, hook: str) -> None:
    """A lifecycle pass that expires one object, a webhook that fails once, and a scrub pass
    that finds a payload corrupted on disk."""
    rules = {"rules": [{"id": "r", "prefix": "expire/", "expire_after_days": 0.00000001}]}
    assert api.put("/buckets/moves/lifecycle", json=rules).status_code == 200
    assert api.put("/buckets/moves/objects/expire/a", content=b"e").status_code == 200
    time.sleep(0.01)
    assert api.post("/system/lifecycle/run").json()["expired"] == 1
    hooks = {"webhooks": [{"id": "w", "url": hook, "secret": "s"}]}
    assert api.put("/buckets/moves/notifications", json=hooks).status_code == 200
    victim = os.urandom(2_000_000)
    assert api.put("/buckets/moves/objects/victim", content=victim).status_code == 200
    payload = next(
        path
        for path in (server.data_dir / "payloads").rglob("*")
        if path.is_file() and path.stat().st_size == len(victim) and path.read_bytes() == victim
    )
    payload.write_bytes(bytes([victim[0] ^ 0xFF]) + victim[1:])
    assert api.post("/system/scrub").status_code == 202


def workload(server: ServerProcess, hook: str) -> socket.socket:
    """Run the workload; the connection of the stalled upload (keep it open)."""
    with server.client() as api:
        assert api.post("/buckets", json={"name": "moves"}).status_code == 201
        assert api.put("/buckets/moves/objects/a", content=b"x" * 5000).status_code == 200
        assert api.get("/buckets/moves/objects/a").content == b"x" * 5000
        init = api.post("/multipart/init", json={"bucket": "moves", "key": "big"})
        assert init.status_code == 201
        assert api.put("/buckets/moves/objects/v.mp4", content=b"not a video").status_code == 200
        job = api.post("/videos/jobs", json={"bucket": "moves", "key": "v.mp4", "formats": ["hls"]})
        assert job.status_code == 202
        assert api.put("/buckets/moves/objects/p.png", content=png()).status_code == 200
        assert api.get("/buckets/moves/images/p.png", params={"width": 8}).status_code == 200
        upkeep(server, api, hook)
        token = base64.b64encode(f"{server.access_key}:{server.secret_key}".encode()).decode()
        stalled = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        stalled.sendall(
            b"PUT /api/v1/buckets/moves/objects/stalled HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Basic {token}\r\nContent-Length: 100000\r\n\r\n".encode()
            + b"x" * 10
        )
    stale = server.data_dir / "staging" / ("0" * 32 + ".part")
    stale.write_bytes(b"left behind by a crash")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    return stalled


def test_every_documented_metric_moves_under_its_workload(
    server: ServerProcess, receiver: str
) -> None:
    names = documented_metrics()
    assert len(names) >= 20
    before = totals(server)
    for name in names:
        assert name in before, f"{name} is documented but not exposed"
    stalled = workload(server, receiver)
    moving = [name for name in names if name not in STEADY]
    # A gauge that only moves for a while (webhook pending, scrub running) counts as moved
    # once any scrape saw it away from its value before the workload.
    moved: set[str] = set()
    deadline = time.monotonic() + 20
    while True:
        after = totals(server)
        moved.update(name for name in moving if after[name] != before[name])
        still = [name for name in moving if name not in moved]
        if not still or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    stalled.close()
    assert still == [], f"documented metrics that did not move: {still}"
    for name, value in STEADY.items():
        assert after[name] == value, name


def test_gc_runs_are_counted_by_kind_from_the_start(server: ServerProcess) -> None:
    text = httpx.get(server.api + "/metrics", auth=server.auth, timeout=30).text
    runs = {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "service_gc_runs"
        for sample in family.samples
        if sample.name == "service_gc_runs_total"
    }
    assert runs["payload"] >= 1 and runs["staging"] >= 1
