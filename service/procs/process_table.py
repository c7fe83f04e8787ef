"""How the requests spread over the serving processes: each process's own count.

Every serving process counts the requests it answered in its own prometheus-client
multiprocess file (``shared_metrics``); ``/api/v1/metrics`` adds them up. Read one file at a
time (``shared_metrics.requests_per_process``) they tell how the kernel spread the connections
over the processes' listening sockets (``SO_REUSEPORT``), which ``system/performance`` shows as
``processes`` (the contract asks for "at least" its fields) and the bench reports beside its
loads.

``ProcessPerformance`` is the writer's recorder: the figures of every process (workers send
theirs as notes) plus that table, read on the executor every ``REFRESH_SECONDS`` (the files
are small, but they are files) rather than on the event loop at each request.

Thread-safety: ``read_table`` is blocking (the executor); ``ProcessPerformance`` belongs to
the event-loop thread.
"""

from __future__ import annotations

import os
from typing import Any

from service.engine.core import Engine
from service.observability import PerformanceRecorder
from service.procs.shared_metrics import is_sibling, requests_per_process

REFRESH_SECONDS = 1.0
"""How old ``system/performance``'s ``processes`` table may be."""


def read_table(metrics_dir: str, writer: int) -> list[dict[str, Any]]:
    """The ``processes`` table: ``{"pid", "role", "requests"}`` by pid, ``role`` being
    ``writer``, ``worker``, or ``ended`` for a process that is no longer running."""
    counts = requests_per_process(metrics_dir)
    rows = []
    for pid in sorted(counts):
        if pid == writer:
            role = "writer"
        elif is_sibling(pid):
            role = "worker"
        else:
            role = "ended"
        rows.append({"pid": pid, "role": role, "requests": counts[pid]})
    return rows


class ProcessPerformance(PerformanceRecorder):
    """The writer's recorder, whose snapshot adds the ``processes`` table."""

    def __init__(self, metrics_dir: str) -> None:
        super().__init__()
        self._metrics_dir = metrics_dir
        self._rows: list[dict[str, Any]] = []

    async def refresh(self, engine: Engine) -> None:
        """A new reading of the table, made on the engine's executor."""
        self._rows = await engine.run_blocking(read_table, self._metrics_dir, os.getpid())

    def snapshot(self) -> dict[str, Any]:
        return {**super().snapshot(), "processes": self._rows}
