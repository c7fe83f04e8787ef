"""Every documented metric still moves when the service runs as two processes.

``tests/observability/test_documented_metrics_move.py`` builds its own server (settings of its
own, a webhook receiver with module state), so it is run as it is, in a pytest of its own, with
``TEST_SERVICE_WORKERS=2`` (``tests/serverproc.py``): its server is then a writer and a worker,
and its scrapes may land on either.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.serverproc import REPO_ROOT

SUITE = "tests/observability/test_documented_metrics_move.py"


def test_the_documented_metrics_suite_passes_with_two_processes() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["TEST_SERVICE_WORKERS"] = "2"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", SUITE, "-q", "-n", "0", "-p", "no:cacheprovider"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    progress = done.stdout.split()[0]  # one "." per passed test (0: all passed, none skipped)
    assert progress == "..", done.stdout
