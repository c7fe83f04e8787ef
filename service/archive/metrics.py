"""Prometheus figures of the continuous archive, read from the shipper at scrape time.

Thread-safety: ``collect`` runs where ``Metrics.render`` runs (the event-loop thread).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.archive.shipper import Archiver


class ArchiveCollector(Collector):
    """``service_archive_*``: how far the archive reaches, and whether shipping fails."""

    def __init__(self, archiver: Archiver) -> None:
        self._archiver = archiver

    def collect(self) -> Iterator[Metric]:
        archiver = self._archiver
        yield GaugeMetricFamily(
            "service_archive_archived_sequence",
            "Every journal record up to this one is in the archive, with its payloads.",
            value=archiver.archived_sequence,
        )
        yield CounterMetricFamily(
            "service_archive_shipped_records",
            "Journal records shipped to the archive.",
            value=archiver.shipped_records,
        )
        yield GaugeMetricFamily(
            "service_archive_failing",
            "1 while shipping to the archive fails (GET /api/v1/replication: last_error).",
            value=int(archiver.last_error is not None),
        )
