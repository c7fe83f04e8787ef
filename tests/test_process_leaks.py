"""The suite's own leak check (``tests.process_leaks``): a process a test started is found
even once orphaned (re-parented to init), and named with the test that was running."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests import process_leaks


def test_an_orphaned_grandchild_is_found_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(process_leaks.MARK)  # the session's own mark comes back at the end
    tracker = process_leaks.Tracker()
    tracker.install()
    tracker.test_starts("tests/x.py::test_y")
    # sh starts a sleep in the background and exits at once: the sleep is orphaned.
    shell = subprocess.run(
        ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True
    )
    orphan = int(shell.stdout)
    try:
        assert os.getpid() not in process_leaks.marked(tracker.mark)
        survivors = tracker.survivors(grace=0.2)
        assert list(survivors) == [orphan]
        assert "started during tests/x.py::test_y" in survivors[orphan]
        assert survivors[orphan].endswith("sleep 60")
    finally:
        os.kill(orphan, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while process_leaks.alive(orphan) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tracker.survivors(grace=5) == {}
