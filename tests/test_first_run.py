"""First-run UX of ``python -m service`` as a subprocess: ``--help`` describes every flag, and a
start that cannot work prints one line, exits non-zero and writes nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest

from service.config import RULES, Config, Rule, env_name, flag_name
from tests.serverproc import REPO_ROOT, ServerProcess, free_port


def run_service(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("SERVICE_")
    }
    environment["PYTHONPATH"] = str(REPO_ROOT)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO_ROOT),
    )


def assert_one_line_refusal(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_help_describes_every_flag_with_its_variable_default_and_allowed_values() -> None:
    done = run_service("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for field in fields(Config):
        if RULES.get(field.name, Rule()).test_only:
            assert flag_name(field.name) not in text
            continue
        assert flag_name(field.name) in text, field.name
        assert f"env {env_name(field.name)}; default" in text, field.name
    assert "allowed: integer 1..65535" in text
    assert "allowed: strict | balanced" in text
    assert "--crash-point" not in text


@pytest.mark.parametrize(
    ("args", "env", "needles"),
    [
        (("--port", "70000"), {}, ("--port", "70000", "1..65535")),
        ((), {"SERVICE_PORT": "0"}, ("SERVICE_PORT", "1..65535")),
        ((), {"SERVICE_PORT": "\uff19\uff10\uff10\uff10"}, ("SERVICE_PORT",)),
        ((), {"SERVICE_DURABILITY": "fast"}, ("SERVICE_DURABILITY", "strict | balanced")),
        ((), {"SERVICE_METRICS_PUBLIC": "maybe"}, ("SERVICE_METRICS_PUBLIC",)),
        (("--staging-ttl", "1" * 5000), {}, ("--staging-ttl",)),
        (("--no-such-flag",), {}, ("--no-such-flag", "--help")),
        ((), {"SERVICE_ROOT_ACCESS_KEY": "bad", "SERVICE_ROOT_SECRET_KEY": "sk_x"}, ("bk_",)),
        ((), {"SERVICE_ROOT_ACCESS_KEY": "bk_abcdef"}, ("SERVICE_ROOT_SECRET_KEY",)),
        ((), {"SERVICE_ADMIN_PASSWORD": "x"}, ("SERVICE_ADMIN_PASSWORD", "8")),
    ],
)
def test_a_bad_value_is_one_line_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], needles: tuple[str, ...]
) -> None:
    data = tmp_path / "data"
    done = run_service("--data-dir", str(data), *args, env=env)
    assert done.returncode == 2
    assert_one_line_refusal(done, *needles)
    assert not data.exists()


def test_a_port_in_use_is_found_before_anything_is_written(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_service("--data-dir", str(data), "--port", str(port))
    assert done.returncode == 1
    assert_one_line_refusal(done, f"port {port}", "already in use", "--port")
    assert not data.exists()  # no journal, and no credentials were generated


def test_a_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "data"
    afile.write_text("not a directory")
    done = run_service("--data-dir", str(afile), "--port", str(free_port()))
    assert done.returncode == 1
    assert_one_line_refusal(done, str(afile), "is a file")
    assert afile.read_text() == "not a directory"


def test_an_unusable_data_dir_is_refused(tmp_path: Path) -> None:
    done = run_service("--data-dir", "/sys/service-data", "--port", str(free_port()))
    assert done.returncode == 1
    assert_one_line_refusal(done, "/sys/service-data", "SERVICE_DATA_DIR")
    below_a_file = tmp_path / "afile"
    below_a_file.write_text("x")
    done = run_service("--data-dir", str(below_a_file / "data"), "--port", str(free_port()))
    assert_one_line_refusal(done, "a part of the path is a file")


def test_a_second_server_on_the_same_data_dir_is_refused(
    server_factory: Callable[..., ServerProcess],
) -> None:
    first = server_factory()
    before = sorted(p.name for p in first.data_dir.rglob("*"))
    done = run_service("--data-dir", str(first.data_dir), "--port", str(free_port()))
    assert done.returncode == 1
    line = assert_one_line_refusal(done, "in use by another server", "--data-dir")
    assert first.process is not None and f"pid {first.process.pid}" in line
    assert sorted(p.name for p in first.data_dir.rglob("*")) == before
    with first.client() as api:
        assert api.get("/buckets").status_code == 200
    # Once the first server is gone the data dir can be used again (also after a SIGKILL).
    first.kill()
    first.start()
    with first.client() as api:
        assert api.get("/buckets").status_code == 200


def test_workers_starts_that_many_serving_processes(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory(SERVICE_WORKERS="3")
    with server.client() as api:
        assert api.get("/buckets").status_code == 200
    assert "3 serving processes" in server.logs()


def test_a_malformed_cors_origin_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = run_service("--data-dir", str(data), env={"SERVICE_CORS_ORIGINS": "notanorigin"})
    assert done.returncode == 2
    assert_one_line_refusal(done, "SERVICE_CORS_ORIGINS", "notanorigin")
    assert not data.exists()
