"""The README, followed by a new user: `make serve` in one terminal, then every command of its
``sh`` blocks in another, in order and as written, with the credentials the first start
printed in place of ``bk_...`` and ``sk_...``; and what `make serve` prints looks as the
README's ``text`` block says.

Only the port and the data dir differ from a user's run (a free port, a fresh temp dir, passed
as the settings' environment variables), and ``HOME`` (a temp dir, so `svc` keeps its alias
there). ``PATH`` has no ``.venv/bin``: the README's own activation line must put `svc` on it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serverproc import REPO_ROOT, free_port

README = REPO_ROOT / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
STARTED = "  API:"
"""The banner's last line: `make serve` is ready once it is printed."""


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text()) if lang == language]


def user_environment(tmp_path: Path, port: int) -> dict[str, str]:
    venv_bin = str(REPO_ROOT / ".venv" / "bin")
    env = {key: value for key, value in os.environ.items() if not key.startswith("SERVICE_")}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env["HOME"] = str(tmp_path / "home")
    env.pop("XDG_CONFIG_HOME", None)
    env["SERVICE_DATA_DIR"] = str(tmp_path / "data")
    env["SERVICE_PORT"] = str(port)
    return env


class Serve:
    """`make serve` running, in a process group of its own (its terminal)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                ["make", "serve"],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_started(self, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while STARTED not in self.output():
            assert self.process.poll() is None, f"make serve ended:\n{self.output()}"
            assert time.monotonic() < deadline, f"make serve never served:\n{self.output()}"
            time.sleep(0.1)
        time.sleep(0.2)  # the rest of the banner's line
        return self.output()

    def ctrl_c(self) -> int:
        """What a terminal's Ctrl-C does: SIGINT to the whole foreground group."""
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(60)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[Serve, dict[str, str], int]]:
    done = subprocess.run(["make", "-q", ".venv/.installed-stamp"], cwd=REPO_ROOT, check=False)
    assert done.returncode == 0, "the venv is not up to date: `make test` installs it first"
    (tmp_path / "home").mkdir()
    port = free_port()
    env = user_environment(tmp_path, port)
    running = Serve(env, tmp_path / "make-serve.log")
    try:
        yield running, env, port
    finally:
        if running.process.poll() is None:
            running.ctrl_c()


def as_pattern(line: str, port: int, data_dir: str) -> re.Pattern[str]:
    """A README output line as a pattern: ``...`` stands for anything."""
    line = line.replace("127.0.0.1:9000", f"127.0.0.1:{port}").replace("./data", data_dir)
    return re.compile(".*".join(re.escape(part) for part in line.split("...")))


def test_make_serve_then_every_readme_command_works_as_written(
    serve: tuple[Serve, dict[str, str], int], tmp_path: Path
) -> None:
    running, env, port = serve
    output = running.wait_started()
    # What make serve printed, line by line, in the README's order.
    lines = iter(output.splitlines())
    for expected in blocks("text")[0].splitlines():
        pattern = as_pattern(expected, port, env["SERVICE_DATA_DIR"])
        assert any(pattern.fullmatch(line) for line in lines), f"{expected!r} not in\n{output}"
    access = re.search(r"access key: (bk_\S+)", output)
    secret = re.search(r"secret key: (sk_\S+)", output)
    assert access and secret, output
    # Every command of every sh block, in order, in one shell per block, as written.
    printed = []
    for block in blocks("sh"):
        script = "\n".join(line for line in block.splitlines() if not line.startswith("make "))
        if not script:
            continue  # the block of make serve (running) and make test (this suite)
        script = (
            script.replace("bk_...", access[1])
            .replace("sk_...", secret[1])
            .replace("127.0.0.1:9000", f"127.0.0.1:{port}")
        )
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=REPO_ROOT,
            env=env,
            input=secret[1] + "\n",  # svc alias set asks for the secret
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr and '"error"' not in done.stdout, done.stdout
        printed.append(done.stdout)
    # What the commands did, seen through the API.
    picture = (REPO_ROOT / "docs" / "console" / "buckets.png").read_bytes()
    with httpx.Client(
        base_url=f"http://127.0.0.1:{port}/api/v1", auth=(access[1], secret[1])
    ) as api:
        assert api.get("/buckets/photos/objects/buckets.png").content == picture
        manuals = api.get("/buckets/manuals/objects", params={"prefix": "api.md"}).json()
        assert [each["key"] for each in manuals["objects"]] == ["api.md"]
    share = printed[-1].strip().splitlines()[-1]
    assert httpx.get(share).content == picture  # the presigned URL works without credentials
    running.ctrl_c()
    assert "Traceback" not in running.output()


def test_readme_and_docs_name_only_files_of_this_repository() -> None:
    texts = {
        path: path.read_text() for path in [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]
    }
    for path, text in texts.items():
        assert "../shared" not in text, f"{path.name} points outside the repository"
        for name in re.findall(r"\bdocs/[\w./-]+\.(?:md|png)\b", text):
            assert (REPO_ROOT / name).exists(), f"{path.name} names {name}, which is missing"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_install_of_make_serve_says_one_line(tmp_path: Path) -> None:
    """A fresh venv, made as `make serve` makes it: one line says what happens, pip only its
    errors (its notes, ~75 lines here, buried the server's first lines)."""
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["make", f"VENV={venv}", f"{venv}/.installed-stamp"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1700,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    note = f"installing the project and its tools into {venv}/ (a few minutes the first time)..."
    assert (done.stdout + done.stderr).splitlines() == [note]
