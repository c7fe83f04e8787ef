"""The continuous archive in the kill/restart run.

The server ships to a directory archive all along, killed at random moments and at the
archive's own crash points like everywhere else. At the end the archive must catch up with the
journal, ``archive verify`` must pass, and a data dir restored from it must hold every
acknowledged operation: ``KillKit.finish`` runs the same checks against a server started on the
restored dir as against the live one (its disk check too: a restore holds exactly the payloads
its state references).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.serverproc import REPO_ROOT

CATCH_UP = 120.0
"""Seconds the archive gets to ship what is committed: a hang limit, not a speed check."""


def archive_dir(root: Path) -> Path:
    return root / "archive"


def wait_archived(client: httpx.Client, problem: Callable[[str], None]) -> int | None:
    """The archived sequence once it reaches the journal's last; None (and a problem) if the
    archive reports an error or does not get there."""
    deadline = time.monotonic() + CATCH_UP
    while True:
        status = client.get("/replication").json()
        archive = status["archive"]
        if archive["archived_sequence"] >= status["last_sequence"]:
            return int(archive["archived_sequence"])
        if time.monotonic() > deadline:
            problem(f"the archive did not catch up with the journal: {status}")
            return None
        time.sleep(0.2)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=600,
    )


def restore(root: Path, archived: int, problem: Callable[[str], None]) -> Path | None:
    """Verify the archive and restore it into a new data dir; None (and a problem) if either
    fails or the restore does not reach ``archived``."""
    source = str(archive_dir(root))
    verified = cli("archive", "verify", "--archive", source)
    if verified.returncode != 0:
        problem(f"archive verify failed: {verified.stderr.strip()}")
        return None
    target = root / "restored"
    done = cli("restore", "--archive", source, "--data-dir", str(target))
    if done.returncode != 0:
        problem(f"restore failed: {done.stderr.strip()}")
        return None
    if f"restored record {archived}" not in done.stdout:
        problem(f"restore did not reach record {archived}: {done.stdout.strip()}")
        return None
    return target
