"""No process outlives the test suite: what the tests start (servers, their render workers
and fork servers, svc, browsers) is gone when the session ends.

Each pytest process that runs tests (the only one, or each pytest-xdist worker) puts a mark
of its own into its environment (``Tracker.install``); every process the tests start
inherits it, and so do their children and an orphan re-parented to init (a render worker
of a SIGKILLed server), so at the end ``/proc/<pid>/environ`` tells which live processes are
the suite's, whoever their parent is now. The mark is not in a pytest process's own
``/proc/self/environ`` (that is the environment it was started with), so it never finds
itself.

Each survivor is named with its command line and the test that was running when it started
(its start time, ``/proc/<pid>/stat`` field 22, against the tests' start times).
"""

from __future__ import annotations

import bisect
import os
import secrets
import time
from pathlib import Path

MARK = "TESTS_PROCESS_MARK"
GRACE_SECONDS = 15.0
"""How long the end of the session waits for processes that are exiting (a fork server
whose last worker just died, a server finishing its stop)."""
_TICKS = os.sysconf("SC_CLK_TCK")


def started_at(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks after boot; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def now_ticks() -> int:
    """Clock ticks after boot now, rounded down as ``/proc`` rounds a start time."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS)


def alive(pid: int) -> bool:
    """Running or sleeping: not gone, not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200]


def marked(mark: str) -> list[int]:
    """The live processes whose environment carries ``MARK=mark``."""
    entry = f"{MARK}={mark}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environment = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue  # gone, or another user's
        if entry in environment.split(b"\0") and alive(int(name)):
            found.append(int(name))
    return found


class Tracker:
    """The processes one pytest process's tests started, and which test was running when."""

    def __init__(self) -> None:
        self.mark = ""
        self._starts: list[int] = []
        self._tests: list[str] = []

    def install(self) -> None:
        """Mark this process's environment: every process started from here on inherits it."""
        self.mark = f"{os.getpid()}-{secrets.token_hex(4)}"
        os.environ[MARK] = self.mark

    def test_starts(self, test_id: str) -> None:
        self._starts.append(now_ticks())
        self._tests.append(test_id)

    def during(self, pid: int) -> str:
        """The test that was running when ``pid`` started."""
        start = started_at(pid)
        index = -1 if start is None else bisect.bisect_right(self._starts, start) - 1
        return self._tests[index] if index >= 0 else "before the first test"

    def survivors(self, grace: float = GRACE_SECONDS) -> dict[int, str]:
        """The marked processes still alive after ``grace`` seconds, each with a line."""
        deadline = time.monotonic() + grace
        while (left := marked(self.mark)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return {
            pid: f"pid {pid} (started during {self.during(pid)}): {command_line(pid)}"
            for pid in left
        }
