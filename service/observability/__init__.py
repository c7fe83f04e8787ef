"""Observability building blocks: the performance window, Prometheus metrics, the access log.

Nothing here knows about HTTP handlers or the metadata state: the server feeds these objects
with plain numbers (seconds, bytes, route template names) and reads them back as a dict, a
Prometheus exposition or log lines. Thread-safety is stated per module; in short, everything
is meant for the event-loop thread except the logging formatter, which is thread-safe.

May import (docs/architecture.md, "Layers"): ``service.common``.
"""

from service.observability.access_log import (
    LOG_LEVELS,
    FinishedRequest,
    LogfmtFormatter,
    configure_logging,
    log_access,
    redact,
)
from service.observability.metrics import (
    GC_KINDS,
    MEDIA_JOB_STATUSES,
    METHODS,
    OTHER_BUCKET,
    OTHER_ROUTE,
    BucketUsage,
    Metrics,
)
from service.observability.performance import PerformanceRecorder

__all__ = [
    "GC_KINDS",
    "LOG_LEVELS",
    "MEDIA_JOB_STATUSES",
    "METHODS",
    "OTHER_BUCKET",
    "OTHER_ROUTE",
    "BucketUsage",
    "FinishedRequest",
    "LogfmtFormatter",
    "Metrics",
    "PerformanceRecorder",
    "configure_logging",
    "log_access",
    "redact",
]
