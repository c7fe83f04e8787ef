"""Prometheus metrics added up across the serving processes.

prometheus-client's multiprocess mode: every process keeps its counters, histograms and
gauges in memory-mapped files of one directory (``<data_dir>/run/metrics/``, emptied by the
supervisor at each start), and the writer, which answers ``/api/v1/metrics`` for the whole
service, reads them all at scrape time (``Metrics(multiprocess_dir=...)``). Counters of a
process that died keep counting in the sum (a restart does not reset the service's totals);
gauges are the maximum over live processes (``livemax``: only the writer sets them), so the
supervisor forgets a dead process's gauges.

Read one file at a time, the counters also tell each process's own share
(``requests_per_process``, for ``process_table``): these files are prometheus-client's, read
here like the rest of this module's work outside the file-system seam (metric values and
process facts from ``/proc``, never data).

Thread-safety: ``prepare`` and ``forget`` run in the supervisor, ``enable`` in a forked child
before any metric exists; ``process_identifier`` anywhere; ``requests_per_process`` and
``is_sibling`` are blocking (an executor or a script).
"""

from __future__ import annotations

import os
import re
import shutil

from prometheus_client import multiprocess, values

METRICS_DIRNAME = "metrics"
REQUESTS_SAMPLE = "service_http_requests_total"
_COUNTER_FILE = re.compile(r"counter_(\d+)\.db")


def prepare(run_dir: str) -> str:
    """A fresh, empty metrics directory under ``run_dir``."""
    path = os.path.join(run_dir, METRICS_DIRNAME)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, mode=0o700)
    return path


def enable(path: str) -> None:
    """From now on this process's metric values live in ``path`` (call before ``Metrics``)."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    values.ValueClass = values.MultiProcessValue(  # type: ignore[no-untyped-call]
        process_identifier=process_identifier
    )


_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


def process_identifier() -> int:
    """This process's id, as prometheus-client's files are named by it. Kept, and renewed
    by a fork: the client asks for it at every metric update (to notice a fork), and
    ``os.getpid`` is a system call each time (glibc stopped caching it), nine a GET."""
    return _pid


def forget(path: str, pid: int) -> None:
    """A serving process ended: its gauges no longer count."""
    multiprocess.mark_process_dead(pid, path)  # type: ignore[no-untyped-call]


def requests_per_process(path: str) -> dict[int, int]:
    """``{pid: requests answered}`` for every serving process that counted one since the
    service started (processes that ended included: their counts still add up)."""
    counts: dict[int, int] = {}
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return counts
    for name in names:
        match = _COUNTER_FILE.fullmatch(name)
        if match is None:
            continue
        try:
            metrics = multiprocess.MultiProcessCollector.merge(  # type: ignore[no-untyped-call]
                [os.path.join(path, name)], accumulate=False
            )
        except (FileNotFoundError, ValueError):  # gone or half-made meanwhile
            continue
        counts[int(match.group(1))] = round(
            sum(
                sample.value
                for metric in metrics
                for sample in metric.samples
                if sample.name == REQUESTS_SAMPLE
            )
        )
    return counts


def is_sibling(pid: int) -> bool:
    """Whether ``pid`` is a running child of this process's parent (the supervisor)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[1]) == os.getppid()
