"""The kill/restart suite's cycles that SIGKILL one serving process of a two-process server.

``Cycle(victim="writer")`` or ``Cycle(victim="worker")`` runs the server with
``SERVICE_WORKERS=2`` and, at a random moment under load, SIGKILLs that process alone (not the
supervisor). The supervisor must replace it (the writer by a new one that replays the
journal); the load goes on through the recovery, then the cycle ends as a random kill does
(the whole service SIGKILLed, restarted, every acknowledged operation checked). Answers during
the recovery are whatever a crash allows (503 with Retry-After, a broken connection): the
ledger already treats an unanswered operation as unknown.
"""

from __future__ import annotations

import os
import signal
import time

from tests.procs.prockit import children, supervisor_pid, writer_pid
from tests.serverproc import ServerProcess

VICTIMS = ("writer", "worker")
PROCESSES = 2
REPLACED_WITHIN = 30.0
"""Seconds the supervisor has to replace the killed process."""


def kill_serving_process(server: ServerProcess, victim: str) -> str | None:
    """SIGKILL the writer or a worker and wait until it is replaced; a problem, or None."""
    supervisor = supervisor_pid(server)
    writer = writer_pid(server)
    serving = children(supervisor)
    if victim == "writer":
        target = writer
    else:
        workers = serving - {writer}
        if not workers:
            return f"no worker to kill (children {sorted(serving)}, writer {writer})"
        target = min(workers)
    os.kill(target, signal.SIGKILL)
    deadline = time.monotonic() + REPLACED_WITHIN
    while time.monotonic() < deadline:
        if server.process is None or server.process.poll() is not None:
            return f"the supervisor died after its {victim} was killed"
        now = children(supervisor)
        replaced = target not in now and len(now) == PROCESSES
        if replaced and (victim != "writer" or writer_pid(server) != writer):
            return None
        time.sleep(0.01)
    return f"the killed {victim} ({target}) was not replaced within {REPLACED_WITHIN:.0f} s"
