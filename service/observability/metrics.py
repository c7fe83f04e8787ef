"""Prometheus metrics of the server, on a registry of their own, rendered for ``/api/v1/metrics``.

``Metrics`` owns a ``CollectorRegistry`` (never the library's global one, so two servers in
one test process do not share counters) and one method per thing the server observes. Names
follow the Prometheus conventions: prefix ``service_``, base units (seconds, bytes), counters
end in ``_total``.

Label cardinality is bounded by construction, never by the traffic:

- ``route`` is a route TEMPLATE (``/api/v1/buckets/{bucket}/objects/{key}``) given by the
  caller, never a raw path. When the caller declares its templates (``routes=``) anything else
  becomes ``OTHER_ROUTE``; otherwise at most ``max_routes`` distinct values are accepted and
  later ones become ``OTHER_ROUTE``, a safety net against a caller passing raw paths.
- ``method`` is one of ``METHODS``, anything else ``OTHER``; ``status`` is the numeric code.
- per-bucket gauges cover the ``top_buckets`` largest buckets by bytes (ties by name) plus one
  ``bucket="_other"`` series summing all the rest (bucket names cannot start with ``_``).

Thread-safety: prometheus_client's metric objects are thread-safe; the route guard's set is
only touched from the event-loop thread. ``render`` calls the bucket-usage provider, so it must
run on the thread that owns the state the provider reads (the event loop).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, NamedTuple

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"})
"""Methods kept as labels; any other becomes ``OTHER`` (HTTP methods are case-sensitive)."""
OTHER_METHOD = "OTHER"
OTHER_ROUTE = "other"
"""Route label for requests that matched no route, and for templates past the guard."""
OTHER_BUCKET = "_other"
"""Bucket label of the series that sums every bucket outside the top N."""
MEDIA_JOB_STATUSES = ("queued", "processing", "completed", "failed", "cancelled")
GC_KINDS = ("payload", "staging")
GcKind = Literal["payload", "staging"]
UPLOAD_CUT_REASONS = ("stalled", "slow")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The classic text format, which ``generate_latest`` writes and every Prometheus reads (the
library's ``CONTENT_TYPE_LATEST`` announces 1.0.0 in recent releases, unknown to older
servers)."""

_LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0,
)  # fmt: skip
_FSYNC_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
_SNAPSHOT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


_MAX_CACHED_CHILDREN = 4096
"""Bound on remembered (route, method, status) label sets; past it, ``.labels()`` per call."""
_RequestChildren = tuple[Any, Any, Any, Any]


class BucketUsage(NamedTuple):
    """What the provider reports for one bucket; every stored version counts."""

    name: str
    objects: int
    bytes: int


BucketUsageProvider = Callable[[], Iterable[BucketUsage]]


class _BucketUsageCollector(Collector):
    """Reads bucket usage at scrape time, so the gauges are never stale and cost nothing
    between scrapes."""

    def __init__(self, provider: BucketUsageProvider, top_buckets: int) -> None:
        self._provider = provider
        self._top_buckets = top_buckets

    def collect(self) -> Iterator[Metric]:
        usages = sorted(self._provider(), key=lambda usage: (-usage.bytes, usage.name))
        objects = GaugeMetricFamily(
            "service_bucket_objects",
            f"Objects (all versions) per bucket: the {self._top_buckets} largest by bytes, "
            f'the rest summed under bucket="{OTHER_BUCKET}".',
            labels=["bucket"],
        )
        size = GaugeMetricFamily(
            "service_bucket_bytes",
            f"Stored bytes per bucket: the {self._top_buckets} largest, "
            f'the rest summed under bucket="{OTHER_BUCKET}".',
            labels=["bucket"],
        )
        for usage in usages[: self._top_buckets]:
            objects.add_metric([usage.name], usage.objects)
            size.add_metric([usage.name], usage.bytes)
        rest = usages[self._top_buckets :]
        objects.add_metric([OTHER_BUCKET], sum(usage.objects for usage in rest))
        size.add_metric([OTHER_BUCKET], sum(usage.bytes for usage in rest))
        yield objects
        yield size
        yield GaugeMetricFamily("service_buckets", "Buckets.", value=len(usages))
        yield GaugeMetricFamily(
            "service_objects",
            "Stored objects, every version counted.",
            value=sum(usage.objects for usage in usages),
        )
        yield GaugeMetricFamily(
            "service_bytes_stored",
            "Payload bytes stored, every version counted.",
            value=sum(usage.bytes for usage in usages),
        )


class _EveryProcess(Collector):
    """Multiprocess mode: every process's values from the files in ``path``, and, as in a
    single process, the families nothing has observed yet (declared, without samples)."""

    def __init__(self, path: str, declared: CollectorRegistry) -> None:
        self._collector = MultiProcessCollector(None, path=path)  # type: ignore[no-untyped-call]
        self._declared = declared

    def collect(self) -> Iterator[Metric]:
        families: list[Metric] = list(self._collector.collect())  # type: ignore[no-untyped-call]
        names = {family.name for family in families}
        yield from families
        for family in self._declared.collect():
            if family.name not in names and not family.samples:
                yield family


class Metrics:
    """Every Prometheus metric of one server, and the methods that move them."""

    def __init__(
        self,
        *,
        bucket_usage: BucketUsageProvider | None = None,
        top_buckets: int = 100,
        routes: Iterable[str] | None = None,
        max_routes: int = 100,
        version: str | None = None,
        multiprocess_dir: str | None = None,
    ) -> None:
        """``multiprocess_dir``: this is one of several serving processes whose metric values
        live in files there (prometheus-client's multiprocess mode, ``service.procs``);
        ``render`` then adds up every process's."""
        if top_buckets < 0:
            raise ValueError("top_buckets must not be negative")
        self.registry = CollectorRegistry()
        self._multiprocess_dir = multiprocess_dir
        self._own_collectors: list[Collector] = []
        """Collectors read at scrape time in this process (not the metric objects)."""
        self._declared_routes = None if routes is None else frozenset(routes) | {OTHER_ROUTE}
        self._seen_routes: set[str] = set()
        self._max_routes = max_routes
        self._request_children: dict[tuple[str, str, int], _RequestChildren] = {}
        registry = self.registry

        self._requests = Counter(
            "service_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=registry,
        )
        self._request_seconds = Histogram(
            "service_http_request_duration_seconds",
            "Time from request start to the last byte of the response.",
            ["route", "method"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self._request_bytes = Counter(
            "service_http_request_bytes",
            "Request body bytes received.",
            ["route", "method"],
            registry=registry,
        )
        self._response_bytes = Counter(
            "service_http_response_bytes",
            "Response body bytes sent.",
            ["route", "method"],
            registry=registry,
        )
        self._put_stage_seconds = Histogram(
            "service_put_stage_seconds",
            "Successful PUTs: time per stage (stage_write includes receiving the body; "
            "journal_commit includes the group-commit wait; total is the whole request).",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self._get_stage_seconds = Histogram(
            "service_get_stage_seconds",
            "GETs that sent a body: time to first byte and to the last byte.",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        # Labelled children resolved at first use (a series appears once observed, as before).
        self._put_stage_children: tuple[Any, ...] = ()
        self._get_stage_children: tuple[Any, ...] = ()
        self._journal_appends = Counter(
            "service_journal_appends",
            "Journal records appended.",
            registry=registry,
        )
        self._journal_batch_records = Histogram(
            "service_journal_batch_records",
            "Records per journal group commit (one write and one fsync each).",
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self._journal_fsync_seconds = Histogram(
            "service_journal_fsync_seconds",
            "Duration of one journal fsync.",
            buckets=_FSYNC_BUCKETS,
            registry=registry,
        )
        self._journal_snapshot_seconds = Histogram(
            "service_journal_snapshot_seconds",
            "Duration of writing one metadata snapshot.",
            buckets=_SNAPSHOT_BUCKETS,
            registry=registry,
        )
        self._multipart_sessions = Gauge(
            "service_multipart_sessions",
            "Open multipart upload sessions.",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self._media_jobs = Gauge(
            "service_media_jobs",
            "Media jobs by status; queued is the queue depth.",
            ["status"],
            registry=registry,
            multiprocess_mode="livemax",
        )
        self._gc_runs = Counter(
            "service_gc_runs",
            "Sweeps run: payload = orphan payload GC, staging = stale staging files.",
            ["kind"],
            registry=registry,
        )
        self._gc_removed = Counter(
            "service_gc_removed",
            "Files removed by the sweeps, by kind.",
            ["kind"],
            registry=registry,
        )
        self._upload_cuts = Counter(
            "service_upload_cuts",
            "Uploads whose connection was cut: stalled (silent for the idle timeout) or slow "
            "(below the minimum body rate over a window).",
            ["reason"],
            registry=registry,
        )
        self._image_renders = Histogram(
            "service_image_render_wait_seconds",
            "Image renders, by the time each waited for the image memory budget.",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self._read_only = Gauge(
            "service_read_only",
            "1 while the server refuses writes after a journal fault, else 0.",
            registry=registry,
            multiprocess_mode="livemax",
        )
        for status in MEDIA_JOB_STATUSES:
            self._media_jobs.labels(status=status).set(0)
        for kind in GC_KINDS:
            self._gc_runs.labels(kind=kind)
            self._gc_removed.labels(kind=kind)
        for reason in UPLOAD_CUT_REASONS:
            self._upload_cuts.labels(reason=reason)
        if version is not None:
            Gauge(
                "service_build_info",
                "Always 1; the version is the label.",
                ["version"],
                registry=registry,
                multiprocess_mode="livemax",
            ).labels(version=version).set(1)
        if bucket_usage is not None:
            self.add_collector(_BucketUsageCollector(bucket_usage, top_buckets))
        self._own_collectors += [
            ProcessCollector(registry=registry),
            PlatformCollector(registry=registry),
            GCCollector(registry=registry),
        ]

    def add_collector(self, collector: Collector) -> None:
        """Register a collector read at scrape time (in multiprocess mode, this process's)."""
        self.registry.register(collector)
        self._own_collectors.append(collector)

    def remove_collector(self, collector: Collector) -> None:
        """Stop reading ``collector`` (a standby's, once it is promoted)."""
        self.registry.unregister(collector)
        self._own_collectors.remove(collector)

    def observe_request(
        self,
        route: str,
        method: str,
        status: int,
        duration_s: float,
        bytes_in: int,
        bytes_out: int,
    ) -> None:
        """Count one answered request; ``route`` is its template name, never the raw path."""
        children = self._request_children.get((route, method, status))
        if children is None:
            children = self._request_children_for(route, method, status)
        requests, seconds, request_bytes, response_bytes = children
        requests.inc()
        seconds.observe(duration_s)
        request_bytes.inc(bytes_in)
        response_bytes.inc(bytes_out)

    def _request_children_for(self, route: str, method: str, status: int) -> _RequestChildren:
        """Resolve (and remember) the labelled children of one (route, method, status).

        ``.labels()`` costs a lock and a dict lookup per metric; a request pays one dict
        lookup instead. The cache is bounded: routes, methods and statuses are.
        """
        route_label = self._route_label(route)
        method_label = method if method in METHODS else OTHER_METHOD
        children = (
            self._requests.labels(route=route_label, method=method_label, status=str(status)),
            self._request_seconds.labels(route=route_label, method=method_label),
            self._request_bytes.labels(route=route_label, method=method_label),
            self._response_bytes.labels(route=route_label, method=method_label),
        )
        if len(self._request_children) < _MAX_CACHED_CHILDREN:
            self._request_children[(route, method, status)] = children
        return children

    def observe_put_stages(
        self,
        stage_write_s: float,
        flush_s: float,
        promote_s: float,
        journal_commit_s: float,
        total_s: float,
    ) -> None:
        """Observe the stages of one successful PUT (same arguments as the recorder's)."""
        if not self._put_stage_children:
            self._put_stage_children = tuple(
                self._put_stage_seconds.labels(stage=stage)
                for stage in ("stage_write", "flush", "promote", "journal_commit", "total")
            )
        stage_write, flush, promote, journal_commit, total = self._put_stage_children
        stage_write.observe(stage_write_s)
        flush.observe(flush_s)
        promote.observe(promote_s)
        journal_commit.observe(journal_commit_s)
        total.observe(total_s)

    def observe_get_stages(self, first_byte_s: float, total_s: float) -> None:
        """Observe one GET that sent a body."""
        if not self._get_stage_children:
            self._get_stage_children = tuple(
                self._get_stage_seconds.labels(stage=stage) for stage in ("first_byte", "total")
            )
        first_byte, total = self._get_stage_children
        first_byte.observe(first_byte_s)
        total.observe(total_s)

    def observe_journal_batch(self, records: int) -> None:
        """One group commit of ``records`` journal records."""
        self._journal_appends.inc(records)
        self._journal_batch_records.observe(records)

    def observe_journal_fsync(self, seconds: float) -> None:
        self._journal_fsync_seconds.observe(seconds)

    def observe_snapshot(self, seconds: float) -> None:
        self._journal_snapshot_seconds.observe(seconds)

    def set_multipart_sessions(self, count: int) -> None:
        self._multipart_sessions.set(count)

    def set_media_jobs(self, counts: Mapping[str, int]) -> None:
        """Set the job count of every status; a status missing from ``counts`` is 0."""
        unknown = set(counts) - set(MEDIA_JOB_STATUSES)
        if unknown:
            raise ValueError(f"unknown media job status: {sorted(unknown)}")
        for status in MEDIA_JOB_STATUSES:
            self._media_jobs.labels(status=status).set(counts.get(status, 0))

    def observe_gc_run(self, kind: GcKind, removed: int) -> None:
        """One sweep of ``kind`` finished, having removed ``removed`` files."""
        if kind not in GC_KINDS:
            raise ValueError(f"unknown gc kind: {kind!r}")
        self._gc_runs.labels(kind=kind).inc()
        self._gc_removed.labels(kind=kind).inc(removed)

    def observe_upload_cut(self, reason: str) -> None:
        """An upload's connection was cut for ``reason`` (stalled or slow)."""
        if reason not in UPLOAD_CUT_REASONS:
            raise ValueError(f"unknown upload cut reason: {reason!r}")
        self._upload_cuts.labels(reason=reason).inc()

    def observe_image_render(self, waited_seconds: float) -> None:
        """One image render ran after waiting ``waited_seconds`` for the memory budget."""
        self._image_renders.observe(waited_seconds)

    def set_read_only(self, read_only: bool) -> None:
        self._read_only.set(1 if read_only else 0)

    def render(self) -> tuple[bytes, str]:
        """The exposition body and its Content-Type (text format 0.0.4)."""
        if self._multiprocess_dir is None:
            return generate_latest(self.registry), CONTENT_TYPE
        registry = CollectorRegistry()
        registry.register(_EveryProcess(self._multiprocess_dir, self.registry))
        for collector in self._own_collectors:
            registry.register(collector)
        return generate_latest(registry), CONTENT_TYPE

    def _route_label(self, route: str) -> str:
        if self._declared_routes is not None:
            return route if route in self._declared_routes else OTHER_ROUTE
        if route in self._seen_routes:
            return route
        if len(self._seen_routes) >= self._max_routes:
            return OTHER_ROUTE
        self._seen_routes.add(route)
        return route
