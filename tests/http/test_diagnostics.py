"""Diagnostics over HTTP: health, system info, performance, metrics, access log."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def metric_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_health_is_public(server: ServerProcess) -> None:
    response = httpx.get(server.url + "/health")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "service" and body["status"] == "ok" and body["version"]
    assert response.headers["X-Request-Id"]


def test_health_is_degraded_with_a_reason_when_the_disk_is_nearly_full(
    server_factory: Callable[..., ServerProcess],
) -> None:
    # Every disk has less than 100% free: the threshold makes "nearly full" true here.
    proc = server_factory(SERVICE_HEALTH_MIN_FREE_FRACTION="1.0")
    body = httpx.get(proc.url + "/health").json()
    assert body["status"] == "degraded" and body["reasons"] == ["disk nearly full"]


def test_system_info_fields(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    api.put(f"/buckets/{bucket_name}/objects/x", content=b"12345")
    info = api.get("/system/info").json()
    for field in ("version", "durability", "uptime_seconds", "started_at", "buckets", "objects"):
        assert field in info
    assert info["durability"] == "strict"
    assert RFC3339_MS.match(info["started_at"])
    assert info["buckets"] >= 1 and info["objects"] >= 1 and info["bytes_stored"] >= 5
    journal = info["journal"]
    for field in (
        "segments",
        "bytes",
        "last_sequence",
        "last_snapshot_sequence",
        "last_snapshot_at",
    ):
        assert field in journal
    assert journal["last_sequence"] >= 3 and journal["segments"] >= 1 and journal["bytes"] > 0
    assert info["disk"]["total_bytes"] >= info["disk"]["free_bytes"] > 0
    assert info["libraries"]["tornado"]


def test_performance_reports_put_stages(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    for index in range(5):
        api.put(f"/buckets/{bucket_name}/objects/p{index}", content=b"x" * 100_000)
        api.get(f"/buckets/{bucket_name}/objects/p{index}")
    perf = api.get("/system/performance").json()
    assert perf["window_seconds"] > 0
    put = perf["put"]
    assert put["count"] >= 5 and put["bytes"] >= 500_000 and put["throughput_bytes_per_second"] > 0
    stages = put["latency_ms"]
    for stage in ("stage_write", "flush", "promote", "journal_commit", "total"):
        assert set(stages[stage]) >= {"p50", "p95", "p99"}
    parts = sum(
        stages[stage]["mean"] for stage in ("stage_write", "flush", "promote", "journal_commit")
    )
    assert parts <= stages["total"]["mean"] * 1.05 + 0.1
    assert parts >= stages["total"]["mean"] * 0.5
    get = perf["get"]
    assert get["count"] >= 5 and set(get["latency_ms"]) >= {"first_byte", "total"}


def test_metrics_move_after_put_and_get(api: httpx.Client, bucket_name: str) -> None:
    before = metric_samples(api.get("/metrics").text)
    api.post("/buckets", json={"name": bucket_name})
    api.put(f"/buckets/{bucket_name}/objects/m", content=b"metrics")
    api.get(f"/buckets/{bucket_name}/objects/m")
    response = api.get("/metrics")
    assert response.headers["Content-Type"].startswith("text/plain")
    after = metric_samples(response.text)
    route = "/api/v1/buckets/{bucket}/objects/{key}"
    put_key = (
        "service_http_requests_total",
        (("method", "PUT"), ("route", route), ("status", "200")),
    )
    assert after[put_key] >= before.get(put_key, 0) + 1
    stage_key = ("service_put_stage_seconds_count", (("stage", "total"),))
    assert after[stage_key] >= before.get(stage_key, 0) + 1
    for stage in ("first_byte", "total"):
        get_key = ("service_get_stage_seconds_count", (("stage", stage),))
        assert after[get_key] >= before.get(get_key, 0) + 1
    assert after[("service_journal_appends_total", ())] > before.get(
        ("service_journal_appends_total", ()), 0
    )


def test_metrics_need_credentials_unless_public(
    server: ServerProcess, server_factory: Callable[..., ServerProcess]
) -> None:
    assert_error(httpx.get(server.api + "/metrics"), 401, "Unauthorized")
    public = server_factory(SERVICE_METRICS_PUBLIC="1")
    assert httpx.get(public.api + "/metrics").status_code == 200


def test_label_cardinality_is_fixed_after_many_keys(api: httpx.Client, bucket_name: str) -> None:
    api.post("/buckets", json={"name": bucket_name})
    for index in range(30):
        api.put(f"/buckets/{bucket_name}/objects/warm-{index}", content=b"x")
    baseline = len(metric_samples(api.get("/metrics").text))
    for index in range(1000):
        api.get(f"/buckets/{bucket_name}/objects/distinct-key-{index}")  # 404s, distinct keys
        if index % 10 == 0:
            api.put(f"/buckets/{bucket_name}/objects/distinct-{index}", content=b"x")
    text = api.get("/metrics").text
    assert "distinct" not in text
    assert len(metric_samples(text)) <= baseline + 10  # new status labels only, never keys


def test_access_log_has_one_line_per_request_without_secrets(server: ServerProcess) -> None:
    with server.client() as api:
        api.get("/buckets", headers={"X-Request-Id": "trace-me-123"})
    # The line is written once the response is sent, so it may land just after we read it.
    deadline = time.monotonic() + 5
    while True:
        lines = [line for line in server.logs().splitlines() if "request_id=trace-me-123" in line]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    time.sleep(0.2)  # a second, duplicate line would have been written by now
    lines = [line for line in server.logs().splitlines() if "request_id=trace-me-123" in line]
    assert len(lines) == 1
    line = lines[0]
    for field in (
        "method=GET",
        "route=/api/v1/buckets",
        "status=200",
        "duration_ms=",
        "credential=bk_testroot",
    ):
        assert field in line
    assert server.secret_key not in server.logs()
