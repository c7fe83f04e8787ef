"""Prometheus metrics added up across the serving processes.

prometheus-client's multiprocess mode: every process keeps its counters, histograms and
gauges in memory-mapped files of one directory (``<data_dir>/run/metrics/``, emptied by the
supervisor at each start), and the writer, which answers ``/api/v1/metrics`` for the whole
service, reads them all at scrape time (``Metrics(multiprocess_dir=...)``). Counters of a
process that died keep counting in the sum (a restart does not reset the service's totals);
gauges are the maximum over live processes (``livemax``: only the writer sets them), so the
supervisor forgets a dead process's gauges.

Thread-safety: ``prepare`` and ``forget`` run in the supervisor, ``enable`` in a forked child
before any metric exists.
"""

from __future__ import annotations

import os
import shutil

from prometheus_client import multiprocess, values

METRICS_DIRNAME = "metrics"


def prepare(run_dir: str) -> str:
    """A fresh, empty metrics directory under ``run_dir``."""
    path = os.path.join(run_dir, METRICS_DIRNAME)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, mode=0o700)
    return path


def enable(path: str) -> None:
    """From now on this process's metric values live in ``path`` (call before ``Metrics``)."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]


def forget(path: str, pid: int) -> None:
    """A serving process ended: its gauges no longer count."""
    multiprocess.mark_process_dead(pid, path)  # type: ignore[no-untyped-call]
