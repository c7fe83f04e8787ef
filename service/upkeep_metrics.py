"""Prometheus figures of the background upkeep: lifecycle passes (and, as they land, event
delivery and the scrub), read from their owners at scrape time.

A collector of its own, registered on the server's ``Metrics`` registry by
``service.server``, so the counters live with the work that moves them and cost nothing
between scrapes.

Thread-safety: ``collect`` runs where ``Metrics.render`` runs (the event-loop thread).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.lifecycle import LifecycleRunner


class UpkeepCollector(Collector):
    """Reads the upkeep objects' figures when scraped."""

    def __init__(self, lifecycle: LifecycleRunner) -> None:
        self._lifecycle = lifecycle

    def collect(self) -> Iterator[Metric]:
        yield from self._lifecycle_metrics()

    def _lifecycle_metrics(self) -> Iterator[Metric]:
        runner = self._lifecycle
        actions = CounterMetricFamily(
            "service_lifecycle_actions",
            "Changes made by lifecycle rules, by action.",
            labels=["action"],
        )
        actions.add_metric(["expired"], runner.totals.expired)
        actions.add_metric(["noncurrent_removed"], runner.totals.noncurrent_removed)
        actions.add_metric(["uploads_aborted"], runner.totals.uploads_aborted)
        yield actions
        yield CounterMetricFamily(
            "service_lifecycle_passes", "Lifecycle passes completed.", value=runner.passes
        )
        yield GaugeMetricFamily(
            "service_lifecycle_last_pass_timestamp_seconds",
            "Unix time the last lifecycle pass finished (0: none yet).",
            value=runner.last_pass_at or 0,
        )
        yield GaugeMetricFamily(
            "service_lifecycle_last_pass_seconds",
            "How long the last lifecycle pass took.",
            value=runner.last_pass_seconds,
        )
