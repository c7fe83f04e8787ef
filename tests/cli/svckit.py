"""Running the installed ``svc`` as a subprocess, with its config isolated in a temp HOME.

``Svc`` runs ``.venv/bin/svc`` (the console script ``pip install`` made) or, when the package
is not installed, ``python -m service.cli``; every run gets ``HOME`` and ``XDG_CONFIG_HOME``
pointing into the test's own directory, so the user's real aliases are never read or written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.serverproc import REPO_ROOT


def command() -> list[str]:
    installed = shutil.which("svc", path=str(Path(sys.executable).parent))
    return [installed] if installed else [sys.executable, "-m", "service.cli"]


AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
"""Starts a command with SIGINT's default disposition, as a shell in a terminal does. A suite
started in the background (``make test &`` from a script) inherits SIGINT ignored, and
so would svc: Ctrl-C would do nothing (as it should, in a background job)."""


@dataclass
class Run:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    def __str__(self) -> str:
        return f"svc {' '.join(self.args)} -> {self.returncode}\n{self.stdout}\n{self.stderr}"


@dataclass
class Svc:
    home: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def environment(self, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "SVC_URL"}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            PYTHONPATH=str(REPO_ROOT),
            COLUMNS="200",
        )
        env.update(self.extra_env)
        env.update(overrides)
        return env

    def popen(self, *args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        """``svc args`` running on, started as from a terminal (see ``AS_FROM_A_TERMINAL``)."""
        return subprocess.Popen(
            [sys.executable, "-c", AS_FROM_A_TERMINAL, *command(), *args],
            env=self.environment(),
            cwd=str(self.home),
            **kwargs,
        )

    def __call__(
        self,
        *args: str,
        input: bytes | str | None = None,
        ok: bool | None = True,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> Run:
        """Run ``svc args``; ``ok=True`` asserts exit 0, ``ok=False`` a failure, None neither."""
        data = input.encode() if isinstance(input, str) else input
        done = subprocess.run(
            [*command(), *args],
            input=data,
            capture_output=True,
            env=self.environment(**(env or {})),
            cwd=str(self.home),
            timeout=timeout,
            check=False,
        )
        run = Run(
            args, done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode()
        )
        if ok is True:
            assert run.returncode == 0, str(run)
        elif ok is False:
            assert run.returncode != 0, str(run)
        assert "Traceback" not in run.stderr, str(run)
        return run

    def bytes_of(self, *args: str) -> bytes:
        done = subprocess.run(
            [*command(), *args], capture_output=True, env=self.environment(), timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


def error_line(run: Run) -> str:
    """The single error line a failed run printed (and that it is single)."""
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, str(run)
    assert lines[0].startswith("svc: "), str(run)
    return lines[0]


def tree_files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
