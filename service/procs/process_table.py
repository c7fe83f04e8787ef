"""How the requests spread over the serving processes: each process's own count.

Every serving process counts the requests it answered in its own prometheus-client
multiprocess file (``counter_<pid>.db`` in ``<data_dir>/run/metrics/``, see
``shared_metrics``); ``/api/v1/metrics`` adds them up. Read one file at a time they tell how
the kernel spread the connections over the processes' listening sockets (``SO_REUSEPORT``),
which ``system/performance`` shows as ``processes`` (the contract asks for "at least" its
fields) and the bench reports beside its loads.

``ProcessPerformance`` is the writer's recorder: the figures of every process (workers send
theirs as notes) plus that table, read on the executor every ``REFRESH_SECONDS`` (the files
are small, but they are files) rather than on the event loop at each request.

Thread-safety: ``requests_per_process`` is blocking, for an executor or a script;
``ProcessPerformance`` belongs to the event-loop thread.
"""

from __future__ import annotations

import os
import re
from typing import Any

from prometheus_client.multiprocess import MultiProcessCollector

from service.engine import Engine
from service.observability import PerformanceRecorder

REQUESTS_SAMPLE = "service_http_requests_total"
REFRESH_SECONDS = 1.0
"""How old ``system/performance``'s ``processes`` table may be."""
_COUNTER_FILE = re.compile(r"counter_(\d+)\.db")


def requests_per_process(metrics_dir: str) -> dict[int, int]:
    """``{pid: requests answered}`` for every serving process that counted one since the
    service started (processes that ended included: their counts still add up)."""
    counts: dict[int, int] = {}
    try:
        names = os.listdir(metrics_dir)
    except FileNotFoundError:
        return counts
    for name in names:
        match = _COUNTER_FILE.fullmatch(name)
        if match is None:
            continue
        path = os.path.join(metrics_dir, name)
        try:
            metrics = MultiProcessCollector.merge([path], accumulate=False)  # type: ignore[no-untyped-call]
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


def read_table(metrics_dir: str, writer: int, supervisor: int) -> list[dict[str, Any]]:
    """The ``processes`` table: ``{"pid", "role", "requests"}`` by pid, ``role`` being
    ``writer``, ``worker``, or ``ended`` for a process that is no longer running."""
    counts = requests_per_process(metrics_dir)
    rows = []
    for pid in sorted(counts):
        if pid == writer:
            role = "writer"
        elif _parent(pid) == supervisor:
            role = "worker"
        else:
            role = "ended"
        rows.append({"pid": pid, "role": role, "requests": counts[pid]})
    return rows


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[1])


class ProcessPerformance(PerformanceRecorder):
    """The writer's recorder, whose snapshot adds the ``processes`` table."""

    def __init__(self, metrics_dir: str) -> None:
        super().__init__()
        self._metrics_dir = metrics_dir
        self._rows: list[dict[str, Any]] = []

    async def refresh(self, engine: Engine) -> None:
        """A new reading of the table, made on the engine's executor."""
        self._rows = await engine.run_blocking(
            read_table, self._metrics_dir, os.getpid(), os.getppid()
        )

    def snapshot(self) -> dict[str, Any]:
        return {**super().snapshot(), "processes": self._rows}
