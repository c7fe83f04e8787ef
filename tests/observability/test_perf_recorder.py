"""The performance window: contract shape, window expiry, bounded memory, stage arithmetic."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.observability.performance import GET_STAGES, PUT_STAGES, PerformanceRecorder
from service.observability.quantiles import nearest_rank


class ManualClock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def put(recorder: PerformanceRecorder, size: int = 100, scale: float = 0.001) -> None:
    recorder.record_put(size, 1 * scale, 2 * scale, 3 * scale, 4 * scale, 10 * scale)


def test_snapshot_has_the_contract_shape_and_is_json() -> None:
    recorder = PerformanceRecorder(window_seconds=60, clock=ManualClock())
    put(recorder)
    recorder.record_get(50, 0.001, 0.002)
    snapshot = json.loads(json.dumps(recorder.snapshot()))
    assert snapshot["window_seconds"] == 60
    for kind, stages in (("put", PUT_STAGES), ("get", GET_STAGES)):
        section = snapshot[kind]
        assert {"count", "bytes", "throughput_bytes_per_second", "latency_ms"} <= set(section)
        assert set(section["latency_ms"]) == set(stages)
        for summary in section["latency_ms"].values():
            assert {"p50", "p95", "p99"} <= set(summary)
            assert all(isinstance(value, float) for value in summary.values())
        since = snapshot["since_start"][kind]
        assert {"count", "bytes", "throughput_bytes_per_second", "latency_ms"} <= set(since)
    assert set(snapshot["put"]["latency_ms"]) == {
        "stage_write",
        "flush",
        "promote",
        "journal_commit",
        "total",
    }
    assert set(snapshot["get"]["latency_ms"]) == {"first_byte", "total"}


def test_counts_bytes_and_milliseconds_are_reported() -> None:
    recorder = PerformanceRecorder(window_seconds=60, clock=ManualClock())
    put(recorder, size=100)
    put(recorder, size=300)
    recorder.record_get(7, 0.005, 0.020)
    snapshot = recorder.snapshot()
    assert (snapshot["put"]["count"], snapshot["put"]["bytes"]) == (2, 400)
    assert snapshot["put"]["latency_ms"]["total"]["p50"] == 10.0
    assert snapshot["put"]["latency_ms"]["journal_commit"]["p99"] == 4.0
    assert snapshot["get"]["latency_ms"]["first_byte"]["p50"] == 5.0
    assert snapshot["get"]["latency_ms"]["total"]["p99"] == 20.0
    assert (snapshot["get"]["count"], snapshot["get"]["bytes"]) == (1, 7)


def test_empty_recorder_reports_zeros() -> None:
    snapshot = PerformanceRecorder(clock=ManualClock()).snapshot()
    assert snapshot["put"]["count"] == 0
    assert snapshot["put"]["throughput_bytes_per_second"] == 0.0
    assert snapshot["get"]["latency_ms"]["total"] == {
        "p50": 0.0,
        "p95": 0.0,
        "p99": 0.0,
        "mean": 0.0,
    }


def test_requests_leave_the_window_but_stay_in_since_start() -> None:
    clock = ManualClock()
    recorder = PerformanceRecorder(window_seconds=10, clock=clock)
    put(recorder, size=100, scale=1.0)
    clock.advance(5)
    put(recorder, size=1, scale=0.001)
    clock.advance(4.5)
    assert recorder.snapshot()["put"]["count"] == 2
    clock.advance(2)  # the first PUT is now 11.5 s old: past window + granularity
    snapshot = recorder.snapshot()
    assert snapshot["put"]["count"] == 1
    assert snapshot["put"]["bytes"] == 1
    assert snapshot["put"]["latency_ms"]["total"]["p99"] == 10.0
    assert snapshot["since_start"]["put"]["count"] == 2
    assert snapshot["since_start"]["put"]["bytes"] == 101
    clock.advance(20)
    snapshot = recorder.snapshot()
    assert snapshot["put"]["count"] == 0
    assert snapshot["put"]["latency_ms"]["total"]["p99"] == 0.0
    assert snapshot["since_start"]["put"]["count"] == 2


def test_expiry_also_happens_when_only_recording() -> None:
    clock = ManualClock()
    recorder = PerformanceRecorder(window_seconds=5, clock=clock, max_samples=1000)
    for _ in range(100):
        recorder.record_get(1, 0.001, 0.002)
        clock.advance(1)
    snapshot = recorder.snapshot()
    assert 5 <= snapshot["get"]["count"] <= 6
    assert snapshot["get"]["latency_samples"] == snapshot["get"]["count"]


def test_sample_memory_is_capped_while_counts_stay_exact() -> None:
    clock = ManualClock()
    recorder = PerformanceRecorder(window_seconds=300, clock=clock, max_samples=500)
    for index in range(20_000):
        put(recorder, size=10)
        if index % 100 == 0:
            clock.advance(0.5)
    snapshot = recorder.snapshot()
    assert snapshot["put"]["latency_samples"] == 500
    assert snapshot["put"]["count"] == 20_000
    assert snapshot["put"]["bytes"] == 200_000


def test_percentiles_use_the_most_recent_samples_when_capped() -> None:
    clock = ManualClock()
    recorder = PerformanceRecorder(window_seconds=300, clock=clock, max_samples=100)
    for _ in range(100):
        recorder.record_get(1, 1.0, 1.0)
    for _ in range(100):
        recorder.record_get(1, 0.001, 0.002)
    assert recorder.snapshot()["get"]["latency_ms"]["total"]["p99"] == 2.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=30.0, allow_nan=False), min_size=1))
def test_window_percentiles_match_the_sorted_list(totals: list[float]) -> None:
    recorder = PerformanceRecorder(window_seconds=60, clock=ManualClock())
    for total in totals:
        recorder.record_get(1, total / 2, total)
    reported = recorder.snapshot()["get"]["latency_ms"]["total"]
    ordered = sorted(totals)
    for p in (50, 95, 99):
        assert reported[f"p{p}"] == round(nearest_rank(ordered, p) * 1000, 3)


def test_stage_latencies_add_up_to_about_the_total() -> None:
    clock = ManualClock()
    recorder = PerformanceRecorder(window_seconds=300, clock=clock)
    for index in range(1000):
        factor = 1 + (index % 17) / 10
        stages = (0.004 * factor, 0.002 * factor, 0.0005 * factor, 0.003 * factor)
        overhead = 0.0002
        recorder.record_put(1024, *stages, sum(stages) + overhead)
        clock.advance(0.01)
    latency = recorder.snapshot()["put"]["latency_ms"]
    stage_names = ("stage_write", "flush", "promote", "journal_commit")
    for statistic in ("p50", "p95", "p99", "mean"):
        stage_sum = sum(latency[stage][statistic] for stage in stage_names)
        assert math.isclose(stage_sum, latency["total"][statistic], rel_tol=0.05)


def test_throughput_divides_by_the_span_covered_not_the_whole_window() -> None:
    clock = ManualClock()
    recorder = PerformanceRecorder(window_seconds=300, clock=clock)
    clock.advance(10)
    put(recorder, size=5000)
    snapshot = recorder.snapshot()
    assert snapshot["put"]["throughput_bytes_per_second"] == 500.0
    assert snapshot["since_start"]["put"]["throughput_bytes_per_second"] == 500.0
    clock.advance(990)
    put(recorder, size=30_000)
    snapshot = recorder.snapshot()
    assert snapshot["put"]["throughput_bytes_per_second"] == 100.0
    assert snapshot["since_start"]["put"]["throughput_bytes_per_second"] == 35.0
    assert snapshot["since_start"]["elapsed_seconds"] == 1000.0


def test_throughput_right_after_start_is_not_absurd() -> None:
    recorder = PerformanceRecorder(clock=ManualClock())
    put(recorder, size=1000)
    assert recorder.snapshot()["put"]["throughput_bytes_per_second"] == 1000.0


def test_since_start_percentiles_are_close_to_exact() -> None:
    clock = ManualClock()
    recorder = PerformanceRecorder(window_seconds=1, clock=clock)
    totals = [0.001 * (1 + index % 100) for index in range(1000)]
    for total in totals:
        recorder.record_get(1, total, total)
        clock.advance(0.1)
    since = recorder.snapshot()["since_start"]["get"]["latency_ms"]["total"]
    for p in (50, 95, 99):
        assert math.isclose(since[f"p{p}"], nearest_rank(sorted(totals), p) * 1000, rel_tol=0.011)


@pytest.mark.parametrize(
    "arguments",
    [(-1, 0.1, 0.1), (1, -0.1, 0.1), (1, 0.1, math.nan)],
)
def test_negative_or_nan_values_are_refused(arguments: tuple[int, float, float]) -> None:
    recorder = PerformanceRecorder(clock=ManualClock())
    with pytest.raises(ValueError):
        recorder.record_get(*arguments)
    assert recorder.snapshot()["get"]["count"] == 0


def test_objects_stored_without_a_put_count_as_puts_without_latency_samples() -> None:
    clock = ManualClock()
    recorder = PerformanceRecorder(window_seconds=60, clock=clock)
    put(recorder, size=100)
    before = recorder.snapshot()["put"]["latency_ms"]
    recorder.record_stored(3, 3000)  # a batch of three members
    snapshot = recorder.snapshot()
    window, since_start = snapshot["put"], snapshot["since_start"]["put"]
    assert (window["count"], window["bytes"]) == (4, 3100)
    assert (since_start["count"], since_start["bytes"]) == (4, 3100)
    assert window["latency_samples"] == 1
    assert window["latency_ms"] == before  # the percentiles are the PUT request's alone
    clock.advance(61)
    assert recorder.snapshot()["put"]["count"] == 0  # they leave the window as PUTs do
    with pytest.raises(ValueError):
        recorder.record_stored(-1, 0)
