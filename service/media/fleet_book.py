"""The media fleet's memory: leases of running attempts and what each worker did.

Kept by the fleet runner in the one process that runs background work (the writer, with
several serving processes; ``service.procs``). Nothing here is the record: the journal holds
each attempt (``VideoAttemptStarted``/``Ended``/``Accepted``/``Finished``), and a restart
rebuilds the leases from it (every running attempt gets a fresh lease, which its worker
renews if it is still alive). A worker's counts (completed, failed) are those seen by this
process since it started; ``GET /api/v1/videos/workers`` and the metrics show them.

Lease times are monotonic seconds (``time.monotonic``), immune to clock steps; the matching
wall-clock expiry goes into the lease token.

Thread-safety: event-loop thread only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_NAME_CHARS = 200
"""Longest worker name or host a claim may give."""
MAX_ERROR_CHARS = 2000
"""Longest error a worker's ``fail`` may report."""


@dataclass
class Lease:
    """Attempt ``attempt`` of a job, held by ``worker`` until ``deadline`` (monotonic)."""

    attempt: int
    worker: str
    deadline: float
    progress: float = 0.0


@dataclass
class WorkerRecord:
    """One fleet worker as the server saw it (``GET /api/v1/videos/workers``)."""

    worker_id: str
    host: str
    last_seen_ms: int
    running: set[str] = field(default_factory=set)
    """Jobs whose attempt it holds the lease of."""
    completed: int = 0
    failed: int = 0
    """Attempts it ended without a completion: failed jobs and lost leases."""


class Leases:
    """Running attempts by job id."""

    def __init__(self, lease_seconds: float) -> None:
        self.seconds = lease_seconds
        self._leases: dict[str, Lease] = {}

    def grant(self, job_id: str, attempt: int, worker: str, now: float) -> Lease:
        lease = Lease(attempt, worker, now + self.seconds)
        self._leases[job_id] = lease
        return lease

    def live(self, job_id: str, attempt: int, now: float) -> Lease | None:
        """The lease of that attempt if it has not lapsed."""
        lease = self._leases.get(job_id)
        if lease is None or lease.attempt != attempt or lease.deadline <= now:
            return None
        return lease

    def renew(self, lease: Lease, now: float, progress: float | None) -> None:
        lease.deadline = now + self.seconds
        if progress is not None:
            lease.progress = min(1.0, max(lease.progress, progress))

    def drop(self, job_id: str) -> Lease | None:
        return self._leases.pop(job_id, None)

    def get(self, job_id: str) -> Lease | None:
        return self._leases.get(job_id)

    def lapsed(self, now: float) -> list[tuple[str, Lease]]:
        """Leases past their deadline (still held here: the caller drops each it ends)."""
        return [(job_id, lease) for job_id, lease in self._leases.items() if lease.deadline <= now]

    def __len__(self) -> int:
        return len(self._leases)


class WorkerBook:
    """Every worker seen since the start, by id."""

    def __init__(self) -> None:
        self._workers: dict[str, WorkerRecord] = {}
        self.lease_expiries = 0

    def seen(self, worker_id: str, host: str | None, now_ms: int) -> WorkerRecord:
        record = self._workers.get(worker_id)
        if record is None:
            record = WorkerRecord(worker_id, host or "", now_ms)
            self._workers[worker_id] = record
        record.last_seen_ms = max(record.last_seen_ms, now_ms)
        if host:
            record.host = host
        return record

    def started(self, worker_id: str, host: str | None, job_id: str, now_ms: int) -> None:
        self.seen(worker_id, host, now_ms).running.add(job_id)

    def ended(self, worker_id: str, job_id: str, outcome: str | None) -> None:
        """The worker's attempt of ``job_id`` is over: ``completed``, ``failed`` or None
        (cancelled: neither)."""
        record = self._workers.get(worker_id)
        if record is None:
            return
        record.running.discard(job_id)
        if outcome == "completed":
            record.completed += 1
        elif outcome == "failed":
            record.failed += 1

    def records(self) -> list[WorkerRecord]:
        return sorted(self._workers.values(), key=lambda record: record.worker_id)
