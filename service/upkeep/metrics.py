"""Prometheus figures of the background upkeep: lifecycle passes, object events and webhook
delivery, and the scrub, read from their owners at scrape time.

A collector of its own, registered on the server's ``Metrics`` registry by
``service.server``, so the counters live with the work that moves them and cost nothing
between scrapes.

Thread-safety: ``collect`` runs where ``Metrics.render`` runs (the event-loop thread).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.events.feed import EventFeed
from service.upkeep.lifecycle import LifecycleRunner
from service.upkeep.scrub import Scrubber
from service.upkeep.webhooks import WebhookDispatcher


class UpkeepCollector(Collector):
    """Reads the upkeep objects' figures when scraped."""

    def __init__(
        self,
        lifecycle: LifecycleRunner,
        webhooks: WebhookDispatcher,
        feed: EventFeed,
        scrub: Scrubber,
    ) -> None:
        self._lifecycle = lifecycle
        self._webhooks = webhooks
        self._feed = feed
        self._scrub = scrub

    def collect(self) -> Iterator[Metric]:
        yield from self._lifecycle_metrics()
        yield from self._event_metrics()
        yield from self._scrub_metrics()

    def _scrub_metrics(self) -> Iterator[Metric]:
        scrub = self._scrub
        yield CounterMetricFamily(
            "service_scrub_bytes", "Payload bytes re-read by the scrub.", value=scrub.bytes_total
        )
        yield CounterMetricFamily(
            "service_scrub_objects",
            "Object versions re-read by the scrub.",
            value=scrub.objects_total,
        )
        yield GaugeMetricFamily(
            "service_scrub_corrupt_objects",
            "Objects whose payload the scrub found corrupt (quarantined, not yet rewritten).",
            value=len(scrub.current_corrupt()),
        )
        yield GaugeMetricFamily(
            "service_scrub_running", "1 while a scrub pass runs.", value=int(scrub.running)
        )
        yield GaugeMetricFamily(
            "service_scrub_last_pass_timestamp_seconds",
            "Unix time the last complete scrub pass finished (0: none yet).",
            value=scrub.progress.finished_at or 0,
        )

    def _event_metrics(self) -> Iterator[Metric]:
        feed, webhooks = self._feed, self._webhooks
        yield GaugeMetricFamily(
            "service_events_last_sequence",
            "Sequence of the newest object event.",
            value=feed.last_sequence,
        )
        yield GaugeMetricFamily(
            "service_events_retained",
            "Object events kept for SSE resume and webhooks.",
            value=feed.retained(),
        )
        yield CounterMetricFamily(
            "service_webhook_deliveries",
            "Webhook deliveries acknowledged with a 2xx.",
            value=webhooks.delivered_total,
        )
        yield CounterMetricFamily(
            "service_webhook_failures",
            "Webhook delivery attempts that failed (each retry counts).",
            value=webhooks.failures_total,
        )
        yield GaugeMetricFamily(
            "service_webhook_pending",
            "Events waiting for delivery, summed over every webhook.",
            value=webhooks.pending_total(),
        )

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
