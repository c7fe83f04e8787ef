"""Prometheus figures of replication, read at scrape time: a standby's position and lag, and
a primary's standbys.

Thread-safety: ``collect`` runs where ``Metrics.render`` runs (the event-loop thread).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.replication.feed import ReplicationFeed
from service.replication.follower import Follower


class StandbyCollector(Collector):
    """``service_replication_*`` on a standby: how far it has applied, and how far behind."""

    def __init__(self, follower: Follower) -> None:
        self._follower = follower

    def collect(self) -> Iterator[Metric]:
        follower = self._follower
        lag = follower.lag()
        yield GaugeMetricFamily(
            "service_replication_standby",
            "1 on a standby (it follows a primary), 0 on a primary.",
            value=1,
        )
        yield GaugeMetricFamily(
            "service_replication_applied_sequence",
            "The last journal record this standby applied (with every payload it references).",
            value=follower.applied_sequence,
        )
        for unit in ("records", "seconds", "bytes"):
            yield GaugeMetricFamily(
                f"service_replication_lag_{unit}",
                f"How far this standby is behind its primary, in {unit}.",
                value=lag[unit],
            )
        yield CounterMetricFamily(
            "service_replication_applied_records",
            "Records of the primary applied since the start.",
            value=follower.applied_records,
        )
        yield CounterMetricFamily(
            "service_replication_fetched_bytes",
            "Payload bytes copied from the primary since the start.",
            value=follower.fetched_bytes,
        )


class FeedCollector(Collector):
    """``service_replication_*`` on a primary: its standbys and how far each is behind."""

    def __init__(self, feed: ReplicationFeed) -> None:
        self._feed = feed

    def collect(self) -> Iterator[Metric]:
        standbys = self._feed.status()
        yield GaugeMetricFamily(
            "service_replication_standby",
            "1 on a standby (it follows a primary), 0 on a primary.",
            value=0,
        )
        yield GaugeMetricFamily(
            "service_replication_standbys",
            "Standbys heard from within the last minute.",
            value=sum(1 for each in standbys if each["connected"]),
        )
        records = GaugeMetricFamily(
            "service_replication_standby_lag_records",
            "Records a standby has not confirmed yet.",
            labels=["standby"],
        )
        for each in standbys:
            records.add_metric([each["id"]], each["lag"]["records"])
        yield records
