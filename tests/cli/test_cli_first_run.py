"""The server's first-run output hands the user a working ``svc alias set`` line, and Ctrl-C
ends a command with one line and exit 130."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.svckit import Svc
from tests.serverproc import ServerProcess


def test_the_printed_alias_line_works_with_the_printed_secret(tmp_path: Path) -> None:
    proc = ServerProcess(
        tmp_path / "data",
        env_overrides={
            "SERVICE_ROOT_ACCESS_KEY": "",
            "SERVICE_ROOT_SECRET_KEY": "",
            "SERVICE_ADMIN_PASSWORD": "",
        },
    )
    proc.start()
    try:
        logs = proc.logs()
        secret = re.search(r"secret key: (sk_\S+)", logs)
        line = re.search(r"^Or:\s+(svc alias set local \S+ bk_\S+)$", logs, re.MULTILINE)
        assert secret and line, logs
        assert logs.count(secret[1]) == 1  # the alias line does not repeat the secret
        assert "Try: curl -u" in logs  # the curl line is still there
        svc = Svc(tmp_path / "home")
        (tmp_path / "home").mkdir()
        svc(*shlex.split(line[1])[1:], input=secret[1] + "\n")
        assert svc("ls", "local").returncode == 0
    finally:
        proc.stop()


def _has_socket(pid: int) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd).startswith("socket:") for fd in fds.iterdir())
    except OSError:
        return False


# How the suite itself was started must not matter: from a terminal, or in the background
# (where SIGINT is ignored and every child inherits that).
@pytest.mark.parametrize(
    "suite_sigint",
    [signal.SIG_DFL, signal.SIG_IGN],
    ids=["suite-in-a-terminal", "suite-in-the-background"],
)
def test_ctrl_c_is_one_line_and_exit_130(
    svc: Svc, bucket: str, suite_sigint: signal.Handlers
) -> None:
    previous = signal.signal(signal.SIGINT, suite_sigint)
    try:
        waiting = svc.popen(
            "pipe",
            f"local/{bucket}/never",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _has_socket(waiting.pid):
        time.sleep(0.05)  # until the upload started and it waits on stdin
    waiting.send_signal(signal.SIGINT)
    _, stderr = waiting.communicate(timeout=30)
    assert waiting.returncode == 130
    assert stderr.decode().strip().splitlines()[-1] == "svc: interrupted"
    assert b"Traceback" not in stderr
