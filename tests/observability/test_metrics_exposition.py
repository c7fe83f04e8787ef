"""Prometheus metrics: they parse, they move, their label sets stay bounded, promtool agrees."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from service.observability.metrics import OTHER_BUCKET, OTHER_ROUTE, BucketUsage, Metrics

OBJECT_ROUTE = "/api/v1/buckets/{bucket}/objects/{key}"


def samples(metrics: Metrics) -> list[Sample]:
    body, _ = metrics.render()
    return [
        sample
        for family in text_string_to_metric_families(body.decode("utf-8"))
        for sample in family.samples
    ]


def value(metrics: Metrics, name: str, **labels: str) -> float:
    found = [
        sample.value
        for sample in samples(metrics)
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, f"{name} {labels}: {found}"
    return found[0]


def series(metrics: Metrics, name: str) -> list[Sample]:
    return [sample for sample in samples(metrics) if sample.name == name]


def test_render_gives_the_text_format_and_its_content_type() -> None:
    body, content_type = Metrics().render()
    assert content_type.startswith("text/plain; version=0.0.4")
    assert b"# TYPE service_http_requests_total counter" in body


def test_request_metrics_move_after_an_observation() -> None:
    metrics = Metrics()
    metrics.observe_request(OBJECT_ROUTE, "PUT", 200, 0.25, 1000, 300)
    metrics.observe_request(OBJECT_ROUTE, "PUT", 200, 0.75, 24, 300)
    metrics.observe_request(OBJECT_ROUTE, "GET", 404, 0.01, 0, 120)
    labels = {"route": OBJECT_ROUTE, "method": "PUT"}
    assert value(metrics, "service_http_requests_total", status="200", **labels) == 2
    assert value(metrics, "service_http_requests_total", status="404", method="GET") == 1
    assert value(metrics, "service_http_request_duration_seconds_count", **labels) == 2
    assert value(metrics, "service_http_request_duration_seconds_sum", **labels) == 1.0
    assert value(metrics, "service_http_request_duration_seconds_bucket", le="0.5", **labels) == 1
    assert value(metrics, "service_http_request_bytes_total", **labels) == 1024
    assert value(metrics, "service_http_response_bytes_total", **labels) == 600


def test_stage_journal_and_state_metrics_move() -> None:
    metrics = Metrics()
    metrics.observe_put_stages(0.001, 0.002, 0.003, 0.004, 0.011)
    metrics.observe_get_stages(0.005, 0.5)
    metrics.observe_journal_batch(7)
    metrics.observe_journal_batch(1)
    metrics.observe_journal_fsync(0.002)
    metrics.observe_snapshot(1.5)
    metrics.set_multipart_sessions(3)
    metrics.set_media_jobs({"queued": 4, "processing": 1})
    metrics.observe_gc_run("payload", 5)
    metrics.observe_gc_run("staging", 2)
    metrics.observe_gc_run("staging", 0)
    metrics.set_read_only(True)
    assert value(metrics, "service_put_stage_seconds_sum", stage="journal_commit") == 0.004
    assert value(metrics, "service_put_stage_seconds_count", stage="total") == 1
    assert value(metrics, "service_get_stage_seconds_sum", stage="first_byte") == 0.005
    assert value(metrics, "service_journal_appends_total") == 8
    assert value(metrics, "service_journal_batch_records_count") == 2
    assert value(metrics, "service_journal_batch_records_bucket", le="4.0") == 1
    assert value(metrics, "service_journal_fsync_seconds_count") == 1
    assert value(metrics, "service_journal_snapshot_seconds_sum") == 1.5
    assert value(metrics, "service_multipart_sessions") == 3
    assert value(metrics, "service_media_jobs", status="queued") == 4
    assert value(metrics, "service_media_jobs", status="failed") == 0
    assert value(metrics, "service_gc_runs_total", kind="staging") == 2
    assert value(metrics, "service_gc_removed_total", kind="payload") == 5
    assert value(metrics, "service_gc_removed_total", kind="staging") == 2
    assert value(metrics, "service_read_only") == 1
    metrics.set_media_jobs({})
    assert value(metrics, "service_media_jobs", status="queued") == 0


def test_unknown_media_status_and_gc_kind_are_refused() -> None:
    metrics = Metrics()
    with pytest.raises(ValueError):
        metrics.set_media_jobs({"exploded": 1})
    with pytest.raises(ValueError):
        metrics.observe_gc_run("journal", 1)  # type: ignore[arg-type]


def test_process_and_build_metrics_are_exported() -> None:
    metrics = Metrics(version="1.2.3")
    names = {sample.name for sample in samples(metrics)}
    assert "process_resident_memory_bytes" in names
    assert "process_cpu_seconds_total" in names
    assert "python_info" in names
    assert value(metrics, "service_build_info", version="1.2.3") == 1


def test_each_instance_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.observe_journal_batch(5)
    assert value(first, "service_journal_appends_total") == 5
    assert value(second, "service_journal_appends_total") == 0


@pytest.mark.parametrize(
    ("method", "label"),
    [("GET", "GET"), ("DELETE", "DELETE"), ("PROPFIND", "OTHER"), ("get", "OTHER"), ("", "OTHER")],
)
def test_method_label_is_a_known_method_or_other(method: str, label: str) -> None:
    metrics = Metrics()
    metrics.observe_request(OBJECT_ROUTE, method, 200, 0.01, 0, 0)
    [sample] = series(metrics, "service_http_requests_total")
    assert sample.labels["method"] == label


def test_cardinality_is_fixed_after_a_thousand_distinct_keys() -> None:
    metrics = Metrics(routes=[OBJECT_ROUTE])
    for index in range(1000):
        metrics.observe_request(OBJECT_ROUTE, "PUT", 200, 0.01, index, 0)
        metrics.observe_request(f"/api/v1/buckets/b/objects/key-{index}", "GET", 200, 0.01, 0, 1)
    body, _ = metrics.render()
    assert b"key-" not in body
    routes = {sample.labels["route"] for sample in series(metrics, "service_http_requests_total")}
    assert routes == {OBJECT_ROUTE, OTHER_ROUTE}
    assert len(series(metrics, "service_http_request_duration_seconds_count")) == 2


def test_undeclared_routes_are_capped_as_a_safety_net() -> None:
    metrics = Metrics(max_routes=10)
    for index in range(1000):
        metrics.observe_request(f"/raw/path/{index}", "GET", 200, 0.01, 0, 0)
    routes = {sample.labels["route"] for sample in series(metrics, "service_http_requests_total")}
    assert len(routes) == 11
    assert OTHER_ROUTE in routes
    assert value(metrics, "service_http_requests_total", route=OTHER_ROUTE) == 990


def test_bucket_gauges_keep_the_top_n_and_sum_the_rest() -> None:
    usage = [BucketUsage(f"bucket-{index:04d}", index, index * 10) for index in range(1000)]
    metrics = Metrics(bucket_usage=lambda: usage, top_buckets=100)
    object_series = series(metrics, "service_bucket_objects")
    byte_series = series(metrics, "service_bucket_bytes")
    assert len(object_series) == 101
    assert len(byte_series) == 101
    top = {sample.labels["bucket"] for sample in byte_series} - {OTHER_BUCKET}
    assert top == {f"bucket-{index:04d}" for index in range(900, 1000)}
    assert value(metrics, "service_bucket_bytes", bucket=OTHER_BUCKET) == sum(
        index * 10 for index in range(900)
    )
    assert value(metrics, "service_buckets") == 1000
    assert value(metrics, "service_objects") == sum(range(1000))
    assert value(metrics, "service_bytes_stored") == 10 * sum(range(1000))


def test_bucket_gauges_are_read_at_scrape_time() -> None:
    usage = [BucketUsage("photos", 1, 10)]
    calls: list[int] = []

    def provider() -> list[BucketUsage]:
        calls.append(1)
        return usage

    metrics = Metrics(bucket_usage=provider)
    assert calls == []
    assert value(metrics, "service_bucket_bytes", bucket="photos") == 10
    assert len(calls) == 1
    usage.append(BucketUsage("videos", 2, 2000))
    usage[0] = BucketUsage("photos", 2, 30)
    assert value(metrics, "service_bucket_bytes", bucket="photos") == 30
    assert value(metrics, "service_bucket_objects", bucket="videos") == 2
    assert value(metrics, "service_bucket_bytes", bucket=OTHER_BUCKET) == 0
    assert value(metrics, "service_buckets") == 2


def busy_metrics() -> Metrics:
    usage = [BucketUsage(f"b{index}", index, index) for index in range(5)]
    metrics = Metrics(bucket_usage=lambda: usage, top_buckets=2, version="0.1.0")
    metrics.observe_request(OBJECT_ROUTE, "PUT", 201, 0.2, 10, 10)
    metrics.observe_request(OTHER_ROUTE, "BREW", 405, 0.001, 0, 80)
    metrics.observe_put_stages(0.001, 0.002, 0.003, 0.004, 0.011)
    metrics.observe_get_stages(0.001, 0.002)
    metrics.observe_journal_batch(3)
    metrics.observe_journal_fsync(0.001)
    metrics.observe_snapshot(0.5)
    metrics.set_multipart_sessions(1)
    metrics.set_media_jobs({"queued": 2})
    metrics.observe_gc_run("staging", 1)
    return metrics


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (Debian: apt-get install prometheus)",
)
def test_promtool_check_metrics_passes() -> None:
    body, _ = busy_metrics().render()
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert result.stdout.strip() == b""
