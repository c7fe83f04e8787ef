"""Prometheus figures of the media fleet, read from the fleet runner at scrape time.

Registered on the server's ``Metrics`` by ``service.server`` with the job runner; in the
embedded mode it reports zeros and no worker. ``service_media_jobs{status}`` (every job by
status) is the metrics module's; these say what the fleet does with them:

- ``service_media_fleet_queued``: jobs whose task waits for a worker;
- ``service_media_fleet_running``: attempts holding a lease now;
- ``service_media_worker_jobs_total{worker, outcome}``: attempts each worker ended,
  ``completed`` or ``failed`` (a failed job or a lost lease), since the server started;
- ``service_media_lease_expiries_total``: leases that lapsed (a worker died or stalled).

The ``worker`` label is a worker's ``--name``; give workers stable names (the systemd unit
in docs/operations.md does) so restarts do not add series.

Thread-safety: ``collect`` runs where ``Metrics.render`` runs (the event-loop thread).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.media.fleet_runner import FleetJobRunner


class FleetCollector(Collector):
    """Reads the runner's figures when scraped."""

    def __init__(self, runner: object) -> None:
        self._runner = runner if isinstance(runner, FleetJobRunner) else None

    def collect(self) -> Iterator[Metric]:
        runner = self._runner
        yield GaugeMetricFamily(
            "service_media_fleet_queued",
            "Media jobs whose task waits for a fleet worker.",
            value=0 if runner is None else runner.queued(),
        )
        yield GaugeMetricFamily(
            "service_media_fleet_running",
            "Media job attempts holding a lease on a fleet worker.",
            value=0 if runner is None else runner.running(),
        )
        jobs = CounterMetricFamily(
            "service_media_worker_jobs",
            "Job attempts each fleet worker ended, by outcome (completed or failed).",
            labels=("worker", "outcome"),
        )
        records = [] if runner is None else runner.workers.records()
        for record in records:
            jobs.add_metric([record.worker_id, "completed"], record.completed)
            jobs.add_metric([record.worker_id, "failed"], record.failed)
        yield jobs
        yield CounterMetricFamily(
            "service_media_lease_expiries",
            "Fleet job leases that lapsed (a worker died or stalled); each job ran again.",
            value=0 if runner is None else runner.workers.lease_expiries,
        )
