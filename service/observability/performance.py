"""The recent-performance window behind ``GET /api/v1/system/performance``.

``PerformanceRecorder`` keeps, for PUTs and GETs, what the endpoint reports: counts, bytes,
throughput and p50/p95/p99 latency per stage, over a sliding window and since start.

Memory is bounded whatever the traffic:

- counts and bytes in the window are exact, kept as one ``[second, count, bytes]`` entry per
  second that saw traffic (at most ``window_seconds + 1`` entries);
- window percentiles come from the most recent ``max_samples`` requests of the window (a
  deque with that ``maxlen``). Under light load that is every request in the window; under
  heavy load it is the newest ones, which is what "recent" should mean anyway. The snapshot
  says how many samples it used (``latency_samples``);
- since-start percentiles come from one ``LogSketch`` per stage (a fixed number of buckets,
  1% relative error).

The window has one-second granularity: a request leaves it between ``window_seconds`` and
``window_seconds + 1`` seconds after it was recorded, when its whole second is out.

Throughput is bytes divided by the time span the figure covers: for the window,
``min(window_seconds, time since the recorder started)``; since start, the time since the
recorder started; both at least one second, so the first request after start does not report
an absurd rate. It is payload bytes moved per wall-clock second, not per busy second.

Thread-safety: none. The recorder is called only from the event-loop thread (handlers record
when a request ends, the performance handler snapshots), so it takes no lock.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from service.observability.quantiles import LogSketch, nearest_rank

PUT_STAGES = ("stage_write", "flush", "promote", "journal_commit", "total")
"""PUT stages: receive + staging write, flush (fsync), promote (rename), journal commit
(including the group-commit wait), and the whole request."""
GET_STAGES = ("first_byte", "total")
"""GET stages: time to the first body byte, and the whole request."""
PERCENTILES = (50, 95, 99)

_MIN_SPAN_SECONDS = 1.0


class _Series:
    """One request kind (PUT or GET): the window and the since-start totals."""

    def __init__(self, stages: tuple[str, ...], max_samples: int) -> None:
        self.stages = stages
        self._per_second: deque[list[int]] = deque()
        self._samples: deque[tuple[int, tuple[float, ...]]] = deque(maxlen=max_samples)
        self._sketches = [LogSketch() for _ in stages]
        self.total_count = 0
        self.total_bytes = 0

    def record(self, now: float, size_bytes: int, latencies: tuple[float, ...]) -> None:
        if any(value < 0 or math.isnan(value) for value in latencies):
            raise ValueError("latencies must be non-negative seconds")
        self.count(now, 1, size_bytes)
        self._samples.append((math.floor(now), latencies))
        for sketch, value in zip(self._sketches, latencies, strict=True):
            sketch.add(value)

    def count(self, now: float, count: int, size_bytes: int) -> None:
        """Add to the counts and bytes only (no latency sample)."""
        if size_bytes < 0 or count < 0:
            raise ValueError("counts and sizes must not be negative")
        second = math.floor(now)
        if self._per_second and self._per_second[-1][0] == second:
            self._per_second[-1][1] += count
            self._per_second[-1][2] += size_bytes
        else:
            self._per_second.append([second, count, size_bytes])
        self.total_count += count
        self.total_bytes += size_bytes

    def expire(self, oldest_second: int) -> None:
        """Drop whatever was recorded in a second before ``oldest_second``."""
        while self._per_second and self._per_second[0][0] < oldest_second:
            self._per_second.popleft()
        while self._samples and self._samples[0][0] < oldest_second:
            self._samples.popleft()

    def window_view(self, span_seconds: float) -> dict[str, Any]:
        count = sum(entry[1] for entry in self._per_second)
        size = sum(entry[2] for entry in self._per_second)
        latency: dict[str, dict[str, float]] = {}
        for position, stage in enumerate(self.stages):
            values = sorted(sample[1][position] for sample in self._samples)
            summary = {f"p{p}": _ms(nearest_rank(values, p)) for p in PERCENTILES}
            summary["mean"] = _ms(sum(values) / len(values)) if values else 0.0
            latency[stage] = summary
        return {
            "count": count,
            "bytes": size,
            "throughput_bytes_per_second": _rate(size, span_seconds),
            "latency_ms": latency,
            "latency_samples": len(self._samples),
        }

    def since_start_view(self, elapsed_seconds: float) -> dict[str, Any]:
        latency: dict[str, dict[str, float]] = {}
        for stage, sketch in zip(self.stages, self._sketches, strict=True):
            summary = {f"p{p}": _ms(sketch.percentile(p)) for p in PERCENTILES}
            summary["mean"] = _ms(sketch.sum / sketch.count) if sketch.count else 0.0
            latency[stage] = summary
        return {
            "count": self.total_count,
            "bytes": self.total_bytes,
            "throughput_bytes_per_second": _rate(self.total_bytes, elapsed_seconds),
            "latency_ms": latency,
        }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _rate(size: int, span_seconds: float) -> float:
    return round(size / max(span_seconds, _MIN_SPAN_SECONDS), 3)


class PerformanceRecorder:
    """Per-stage latency and throughput of PUTs and GETs, over a window and since start.

    Times are seconds (floats) as measured by the caller with ``time.monotonic``; the snapshot
    reports milliseconds. ``clock`` is injectable so tests can move time by hand.
    """

    def __init__(
        self,
        window_seconds: float = 300,
        clock: Callable[[], float] = time.monotonic,
        max_samples: int = 10_000,
    ) -> None:
        if window_seconds <= 0:
            raise ValueError("window_seconds must be positive")
        if max_samples <= 0:
            raise ValueError("max_samples must be positive")
        self.window_seconds = window_seconds
        self._clock = clock
        self._started = clock()
        self._put = _Series(PUT_STAGES, max_samples)
        self._get = _Series(GET_STAGES, max_samples)

    def record_put(
        self,
        size_bytes: int,
        stage_write_s: float,
        flush_s: float,
        promote_s: float,
        journal_commit_s: float,
        total_s: float,
    ) -> None:
        """Record one successful PUT; ``total_s`` is the whole request, not a sum of stages."""
        now = self._clock()
        self._put.record(
            now, size_bytes, (stage_write_s, flush_s, promote_s, journal_commit_s, total_s)
        )
        self._expire(now)

    def record_stored(self, count: int, size_bytes: int) -> None:
        """Record objects stored without a PUT request of their own (a batch upload's members,
        a completed multipart upload): they count as PUTs in ``count`` and ``bytes``, and,
        having no request of their own, add no latency sample."""
        now = self._clock()
        self._put.count(now, count, size_bytes)
        self._expire(now)

    def record_get(self, size_bytes: int, first_byte_s: float, total_s: float) -> None:
        """Record one GET that sent a body; ``size_bytes`` is what was actually sent."""
        now = self._clock()
        self._get.record(now, size_bytes, (first_byte_s, total_s))
        self._expire(now)

    def snapshot(self) -> dict[str, Any]:
        """The JSON body of ``GET /api/v1/system/performance``.

        Shape: ``{"window_seconds", "put": {"count", "bytes", "throughput_bytes_per_second",
        "latency_ms": {stage: {"p50", "p95", "p99", "mean"}}, "latency_samples"}, "get": {...},
        "since_start": {"elapsed_seconds", "put": {...}, "get": {...}}}``. Latencies are
        milliseconds; with no request they are all 0.0 (``count`` tells them apart).
        """
        now = self._clock()
        self._expire(now)
        elapsed = max(now - self._started, 0.0)
        span = min(float(self.window_seconds), elapsed)
        return {
            "window_seconds": self.window_seconds,
            "put": self._put.window_view(span),
            "get": self._get.window_view(span),
            "since_start": {
                "elapsed_seconds": round(elapsed, 3),
                "put": self._put.since_start_view(elapsed),
                "get": self._get.since_start_view(elapsed),
            },
        }

    def _expire(self, now: float) -> None:
        # A second s covers [s, s+1); keep it while any part of it is younger than the window.
        oldest_second = math.floor(now - self.window_seconds)
        self._put.expire(oldest_second)
        self._get.expire(oldest_second)
