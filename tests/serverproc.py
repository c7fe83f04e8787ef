"""A real server as a subprocess on a free loopback port with a temporary data dir.

Tests talk HTTP to it exactly as users do. ``ServerProcess`` can stop (SIGTERM), kill
(SIGKILL) and restart the process on the same data dir and port, and exposes everything the
process printed so tests can check that no secret was ever logged.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT_ACCESS_KEY = "bk_testroot"
ROOT_SECRET_KEY = "sk_test-root-secret-0123456789abcdef"
ADMIN_PASSWORD = "admin-password-for-tests"
REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Live children of ``pid`` (from /proc; empty where there is none)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class ServerProcess:
    data_dir: Path
    env_overrides: Mapping[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    access_key: str = ROOT_ACCESS_KEY
    secret_key: str = ROOT_SECRET_KEY
    admin_password: str = ADMIN_PASSWORD
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    starts: int = 0
    start_exit: int | None = None
    """After a start that failed: the code its process exited with by itself (a crash point's
    SIGKILL is -9); None if it was still running when the start gave up and killed it."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api(self) -> str:
        return self.url + "/api/v1"

    @property
    def connection_string(self) -> str:
        return f"http://{self.access_key}:{self.secret_key}@127.0.0.1:{self.port}"

    @property
    def auth(self) -> tuple[str, str]:
        return (self.access_key, self.secret_key)

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "SERVICE_DATA_DIR": str(self.data_dir),
                "SERVICE_HOST": "127.0.0.1",
                "SERVICE_PORT": str(self.port),
                "SERVICE_ROOT_ACCESS_KEY": self.access_key,
                "SERVICE_ROOT_SECRET_KEY": self.secret_key,
                "SERVICE_ADMIN_PASSWORD": self.admin_password,
                "SERVICE_LOG_LEVEL": "info",
                # Tests' webhook receivers listen on loopback, which is refused by default.
                "SERVICE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8,::1",
                # One serving process unless a test asks for more (tests/procs/) or the
                # whole suite is run with TEST_SERVICE_WORKERS=N.
                "SERVICE_WORKERS": os.environ.get("TEST_SERVICE_WORKERS", "1"),
                "PYTHONPATH": str(REPO_ROOT),
            }
        )
        env.update(self.env_overrides)
        return env

    def start(self, timeout: float = 120.0, extra_env: Mapping[str, str] | None = None) -> None:
        """Start the server and wait until ``/health`` answers.

        ``timeout`` is a limit for a start that hangs, not a speed check: a start costs ~1.5 CPU
        seconds, and on a machine whose load is 20-30 that took over 30 s of wall time. A start
        that fails is seen at once (the process exits), whatever the limit.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-server-{self.starts}.log"
        env = self.environment()
        env.update(extra_env or {})
        log_file = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "service"],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=str(REPO_ROOT),
        )
        log_file.close()
        self.start_exit = None
        try:
            self.wait_ready(timeout)
        except BaseException:
            # How the process ended by itself (None: it was still running, and is killed).
            self.start_exit = self.process.poll() if self.process is not None else None
            self.kill()  # a start that failed leaves no process behind
            raise

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.logs()}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server did not become ready:\n{self.logs()}")

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait: a graceful shutdown."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        code = self.process.returncode
        self.process = None
        return code

    def kill(self) -> None:
        """SIGKILL: a crash (serving processes of a supervisor die with it; wait for them,
        so that a restart finds the port and the data dir free)."""
        if self.process is not None:
            children = _children(self.process.pid)
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None
            deadline = time.monotonic() + 10.0
            while any(_alive(pid) for pid in children):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)

    def restart(self, *, crash: bool = False, extra_env: Mapping[str, str] | None = None) -> None:
        if crash:
            self.kill()
        else:
            self.stop()
        self.start(extra_env=extra_env)

    def logs(self) -> str:
        """Everything every start of this server printed."""
        texts = []
        for number in range(1, self.starts + 1):
            path = self.data_dir.parent / f"{self.data_dir.name}-server-{number}.log"
            if path.exists():
                texts.append(path.read_text(errors="replace"))
        return "\n".join(texts)

    def client(self, **kwargs: object) -> httpx.Client:
        """A plain httpx client authenticated with the root access key."""
        return httpx.Client(base_url=self.api, auth=self.auth, timeout=60.0, **kwargs)  # type: ignore[arg-type]
