"""The package's public names are exactly the ones the server wires in."""

from __future__ import annotations

import service.observability as observability


def test_every_exported_name_exists_and_nothing_else_is_promised() -> None:
    assert sorted(observability.__all__) == sorted(
        [
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
    )
    for name in observability.__all__:
        assert getattr(observability, name) is not None
